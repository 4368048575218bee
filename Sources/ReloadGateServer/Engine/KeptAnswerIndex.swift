import NIOCore
import ReloadGateCore
import ReloadGateStore

/// Where the engine finds the answers its store keeps in request rows (``SchedulingStore/keepsAnswersInRequests``,
/// a store one gateway owns): a key's fingerprint names the requests that may hold its answer, until
/// the answer expires. The rows are the record; the index is rebuilt from them on start.
///
/// Bounded: it holds at most ``capacity`` keys (plus those of the commits in flight, which the engine
/// checked against it before they were sealed); while it is full, the engine records new answers in the
/// idempotency table instead. Keys leave it in the order they came, once expired, so it holds the
/// retry window's keys and no more: memory follows the rate of pushes with an `apns-id` over the last
/// 15 minutes, never the number of pushes seen. A fingerprint names requests, not a key: the answer
/// read from a row is matched against the key, so two keys of one fingerprint are both found.
struct KeptAnswerIndex {
    /// The most keys held at once (0: none; every answer goes to the idempotency table).
    let capacity: Int
    private let fingerprint: @Sendable (IdempotencyKey) -> UInt64
    /// The request of each fingerprint; `more` holds the rare further requests of a fingerprint.
    private var requests: [UInt64: RequestID] = [:]
    private var more: [UInt64: [RequestID]] = [:]
    /// Every key held, in the order it was added, with its expiry.
    private var order = CircularBuffer<(fingerprint: UInt64, request: RequestID, expiresAt: Timestamp)>()

    /// - Parameter fingerprint: a 64-bit hash of a key; tests give one with collisions.
    init(capacity: Int, fingerprint: @escaping @Sendable (IdempotencyKey) -> UInt64 = KeptAnswerIndex.hash) {
        self.capacity = capacity
        self.fingerprint = fingerprint
    }

    /// How many keys it holds.
    var count: Int { order.count }

    /// Whether a new answer may be kept in its request's row: the index has room for its key.
    var hasRoom: Bool { order.count < capacity }

    /// The requests whose rows may hold `name`'s answer (usually none, or one).
    func candidates(for name: IdempotencyKey) -> [RequestID] {
        let print = fingerprint(name)
        guard let first = requests[print] else { return [] }
        return [first] + (more[print] ?? [])
    }

    /// Adds a key whose answer `request`'s row holds, until `expiresAt`.
    mutating func add(_ name: IdempotencyKey, request: RequestID, expiresAt: Timestamp) {
        let print = fingerprint(name)
        if requests[print] == nil {
            requests[print] = request
        } else {
            more[print, default: []].append(request)
        }
        order.append((print, request, expiresAt))
    }

    /// Forgets the keys expired at `now`, oldest first (a key added later with an earlier expiry waits
    /// for those before it: the answer read from its row says it has expired).
    mutating func forgetExpired(at now: Timestamp) {
        while let oldest = order.first, oldest.expiresAt <= now {
            order.removeFirst()
            remove(oldest.request, of: oldest.fingerprint)
        }
    }

    private mutating func remove(_ request: RequestID, of print: UInt64) {
        if requests[print] == request {
            if var others = more.removeValue(forKey: print), !others.isEmpty {
                requests[print] = others.removeFirst()
                if !others.isEmpty { more[print] = others }
            } else {
                requests.removeValue(forKey: print)
            }
        } else if var others = more[print] {
            others.removeAll { $0 == request }
            more[print] = others.isEmpty ? nil : others
        }
    }

    /// The fingerprint of a key: the process's hash of its app and text (rebuilt with the index on start).
    static func hash(_ name: IdempotencyKey) -> UInt64 {
        UInt64(bitPattern: Int64(name.hashValue))
    }
}
