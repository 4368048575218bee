public import ReloadGateCore

/// One recorded reload request, as the ledger keeps it for `explain` and for idempotency.
public struct RecordedRequest: Hashable, Sendable {
    public enum Source: String, Sendable {
        case push, webhook, operatorCommand = "operator"
    }

    public var id: RequestID
    public var app: Int64
    public var source: Source
    public var received: Timestamp
    public var priority: Priority
    public var expiration: Timestamp?
    public var collapseID: String?
    public var exempt: Bool
    /// What the request asked for, as the caller sent it (JSON text), for `explain`.
    public var summary: String
    /// The push's `apns-id` (pushes only), so that `explain` finds a push by the id its sender saw.
    public var apnsID: String?
    /// The request's idempotent answer, kept in the request's row instead of the idempotency table (a
    /// store that ``SchedulingStore/keepsAnswersInRequests``): written with a row that is written anyway,
    /// and found through the engine's index in memory.
    public var answer: IdempotentAnswer?

    public init(
        id: RequestID,
        app: Int64,
        source: Source,
        received: Timestamp,
        priority: Priority,
        expiration: Timestamp?,
        collapseID: String?,
        exempt: Bool,
        summary: String,
        apnsID: String? = nil,
        answer: IdempotentAnswer? = nil
    ) {
        self.apnsID = apnsID
        self.answer = answer
        self.id = id
        self.app = app
        self.source = source
        self.received = received
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.exempt = exempt
        self.summary = summary
    }
}

/// A delivery as the ledger keeps it: pending -> sending -> sent | failed (docs/DESIGN.md, Durability).
public struct RecordedDelivery: Hashable, Sendable {
    public enum State: String, Sendable {
        case pending, sending, sent, failed
    }

    public var apnsID: String
    public var device: Int64
    public var released: Timestamp
    /// The instances it reloads: one, almost always, kept inline (``CompactList``).
    public var instances: CompactList<Int64>
    /// The listed requests (the first 100 of each instance): one, almost always, kept inline.
    public var requests: CompactList<RequestID>
    /// How many requests the delivery serves in all.
    public var requestCount: Int
    public var priority: Priority
    public var expiration: Timestamp?
    public var state: State
    /// What happened to it so far (read from the store; not written by ``SQLiteStore/commit(_:)``).
    public var history: History
    /// Several gateways: the epoch of its partition's lease when it was released (or loaded by a new
    /// owner). The delivery worker sends it only while that lease is held: a copy from an earlier tenure
    /// of the same gateway is another owner's business. Not stored.
    public var leaseEpoch: Int64? = nil

    /// Attempts and answers of a delivery.
    public struct History: Hashable, Sendable {
        /// Attempts started (each `sending` mark).
        public var attempts: Int
        /// The reason of the failure or of the next retry.
        public var lastError: String?
        /// Attempts that ended without an answer (the request may have reached the push service).
        public var unknownOutcomes: Int

        public init(attempts: Int = 0, lastError: String? = nil, unknownOutcomes: Int = 0) {
            self.attempts = attempts
            self.lastError = lastError
            self.unknownOutcomes = unknownOutcomes
        }
    }

    public init(
        apnsID: String,
        device: Int64,
        released: Timestamp,
        instances: CompactList<Int64>,
        requests: CompactList<RequestID>,
        requestCount: Int? = nil,
        priority: Priority,
        expiration: Timestamp?,
        state: State,
        history: History = History()
    ) {
        self.history = history
        self.requestCount = requestCount ?? requests.count
        self.apnsID = apnsID
        self.device = device
        self.released = released
        self.instances = instances
        self.requests = requests
        self.priority = priority
        self.expiration = expiration
        self.state = state
    }
}

/// The first answer to a request with an idempotency key, kept until `expiresAt`: a webhook call's
/// `idempotency-key` (24 hours), or a push's `apns-id` for its app and device (``pushRetryWindow``).
public struct IdempotentAnswer: Hashable, Sendable {
    public var app: Int64
    public var key: String
    /// SHA-256 of the request body: the same key with another body is a conflict (empty for a push: its
    /// `apns-id` names the push, whatever the body).
    public var bodyHash: [UInt8]
    public var status: Int
    public var response: String
    public var createdAt: Timestamp
    /// From then on the key is free: a request with it is new.
    public var expiresAt: Timestamp

    /// - Parameter expiresAt: `nil`: ``webhookWindow`` after `createdAt`.
    public init(
        app: Int64, key: String, bodyHash: [UInt8], status: Int, response: String, createdAt: Timestamp, expiresAt: Timestamp? = nil
    ) {
        self.app = app
        self.key = key
        self.bodyHash = bodyHash
        self.status = status
        self.response = response
        self.createdAt = createdAt
        self.expiresAt = expiresAt ?? createdAt.adding(milliseconds: Self.webhookWindow)
    }

    public var name: IdempotencyKey { IdempotencyKey(app: app, key: key) }
}

/// An app's idempotency key.
public struct IdempotencyKey: Hashable, Sendable {
    public var app: Int64
    public var key: String

    public init(app: Int64, key: String) {
        self.app = app
        self.key = key
    }
}

/// What an `idempotency-key` finds.
public enum IdempotencyLookup: Hashable, Sendable {
    /// Not seen in the last 24 hours: process the request.
    case new
    /// Seen with the same body: answer this again, do nothing new.
    case replay(status: Int, response: String)
    /// Seen with another body: `409`.
    case conflict
}

/// Everything one group commit writes, in one transaction: the requests and their decisions, the
/// scheduling state of every instance they changed (write-through), the deliveries released, and the
/// idempotent answers to remember.
public struct LedgerBatch: Sendable {
    public var idempotentAnswers: [IdempotentAnswer] = []
    public var requests: [RecordedRequest] = []
    public var decisions: [Decision] = []
    /// The new state of changed instances; `nil` for an instance that was removed.
    public var instanceStates: [(instance: Int64, snapshot: InstanceSnapshot?)] = []
    public var deliveries: [RecordedDelivery] = []
    /// Work for the owners of other partitions (a shared store only): written with the requests.
    public var forwards: [InboxEntry] = []
    /// Forwarded work this batch applied: deleted from the inbox with it.
    public var consumedInbox: [Int64] = []
    /// The leases the batch's decisions depend on (a shared store only); `nil`: none (one gateway).
    public var fence: LeaseFence?
    /// Idempotency answers that expired by then are deleted with the batch, oldest first, at most
    /// ``pruneLimit`` of them (never one of the batch's own keys): the table holds what the windows hold,
    /// pruned a little with every commit, with no write of its own. `nil`: none.
    public var expiredBy: Timestamp?

    public init() {}

    /// How many expired answers a commit deletes at most: more than it adds, so that a busy gateway
    /// catches up, and few enough to keep the commit short.
    public var pruneLimit: Int { 64 + 2 * idempotentAnswers.count }

    /// The answer the batch records for `name`: in the idempotency table's rows or in a request's row.
    public func answer(for name: IdempotencyKey) -> IdempotentAnswer? {
        idempotentAnswers.first { $0.name == name } ?? requests.lazy.compactMap(\.answer).first { $0.name == name }
    }

    public var isEmpty: Bool {
        requests.isEmpty && decisions.isEmpty && instanceStates.isEmpty && deliveries.isEmpty && idempotentAnswers.isEmpty
            && forwards.isEmpty && consumedInbox.isEmpty
    }

    /// About how many rows the batch writes: its requests, instance states (each with its pending reload
    /// and list, when it has one), deliveries, kept answers and forwarded work. What a large batch's time
    /// in the store grows with.
    var rowCount: Int {
        requests.count + instanceStates.count + deliveries.count + idempotentAnswers.count + forwards.count
    }

    /// The states both stores write: each instance's last state in ``instanceStates``, in the order of
    /// those last states. A commit gathers the turns decided while the one before it ran, so an instance can
    /// change more than once in a batch (delivered in one turn, pushed again in the next). Every state
    /// replaces the whole of the one before, a removal included, so the last one is what the store holds;
    /// written once per instance, no removal and write of one instance meet in one commit.
    var lastInstanceStates: LastInstanceStates { LastInstanceStates(instanceStates) }
}

/// ``LedgerBatch/lastInstanceStates``: the batch's states read in place, each instance's earlier states
/// skipped (a fan-out's million states are not copied into a second list).
struct LastInstanceStates {
    private let states: [(instance: Int64, snapshot: InstanceSnapshot?)]
    /// The positions of states that a later state of the same instance replaces (none in most batches).
    private let replaced: Set<Int>

    init(_ states: [(instance: Int64, snapshot: InstanceSnapshot?)]) {
        self.states = states
        var replaced = Set<Int>()
        var seen = SeenInstances(states)
        for position in states.indices.reversed() where !seen.insert(states[position].instance) {
            replaced.insert(position)
        }
        self.replaced = replaced
    }

    /// Calls `body` with each instance and its last state, in the order of those last states.
    func forEach(_ body: (_ instance: Int64, _ snapshot: InstanceSnapshot?) throws -> Void) rethrows {
        for position in states.indices where replaced.isEmpty || !replaced.contains(position) {
            try body(states[position].instance, states[position].snapshot)
        }
    }

    /// The instances met so far: a bit per id for a large batch of dense ids (a fan-out's million), a set
    /// otherwise (a batch of a few pushes would clear words for every id up to its largest).
    private struct SeenInstances {
        var bits: InstanceBits?
        var set = Set<Int64>()

        init(_ states: [(instance: Int64, snapshot: InstanceSnapshot?)]) {
            let largest = states.lazy.map(\.instance).max() ?? 0
            let smallest = states.lazy.map(\.instance).min() ?? 0
            if states.count >= 4096, InstanceBits.holds(smallest), InstanceBits.holds(largest), largest / 64 < Int64(states.count) {
                bits = InstanceBits(roomFor: largest)
            } else {
                set.reserveCapacity(states.count)
            }
        }

        /// Adds `instance`; false when it was met before.
        mutating func insert(_ instance: Int64) -> Bool {
            guard bits != nil else { return set.insert(instance).inserted }
            return bits!.insert(instance)
        }
    }
}

/// One step of a delivery's way through the store.
public struct DeliveryStateChange: Sendable, Hashable {
    public var apnsID: String
    public var state: RecordedDelivery.State
    /// The reason of a failure or of the next retry.
    public var error: String?
    /// The attempt ended without an answer: the request may have reached the push service.
    public var unknownOutcome: Bool
    /// This change counts an attempt that no `sending` mark counted: an upstream that records what it
    /// takes (the outbox) gets no mark, and its attempt is counted with its outcome.
    public var attempted: Bool

    public init(apnsID: String, state: RecordedDelivery.State, error: String? = nil, unknownOutcome: Bool = false, attempted: Bool = false) {
        self.apnsID = apnsID
        self.state = state
        self.error = error
        self.unknownOutcome = unknownOutcome
        self.attempted = attempted
    }
}

extension DeliveryStateChange {
    /// The changes of one delivery in one batch: its last state and error, every attempt and unknown
    /// outcome counted.
    public struct Merged: Sendable {
        public var state: RecordedDelivery.State = .pending
        public var error: String?
        public var attempts = 0
        public var unknownOutcomes = 0

        public init() {}

        public mutating func add(_ change: DeliveryStateChange) {
            state = change.state
            error = change.error
            if change.state == .sending || change.attempted { attempts += 1 }
            if change.unknownOutcome { unknownOutcomes += 1 }
        }
    }

    /// `changes` merged by delivery, in the order each delivery first appears: a delivery that went
    /// `sending` -> `sent` within one batch costs one update (both stores apply the result).
    public static func merged(_ changes: [DeliveryStateChange]) -> [(apnsID: String, change: Merged)] {
        var merged: [(apnsID: String, change: Merged)] = []
        merged.reserveCapacity(changes.count)
        // Each apns-id's place in `merged`, found or inserted in one access: one hash of it per change,
        // and no growth on the way (a herd's batch merges thousands).
        var places: [String: Int] = [:]
        places.reserveCapacity(changes.count)
        for change in changes {
            let place = Self.place(in: &places[change.apnsID, default: merged.count])
            if place == merged.count {
                merged.append((change.apnsID, Merged()))
            }
            merged[place].change.add(change)
        }
        return merged
    }

    /// The value a `default:` subscript found or inserted, read in the same access.
    private static func place(in slot: inout Int) -> Int { slot }
}

extension IdempotentAnswer {
    /// How long a webhook call's `idempotency-key` is remembered: 24 hours, in milliseconds.
    public static let webhookWindow: Int64 = 86_400_000
    /// How long a push's `apns-id` is remembered for its app and device: 15 minutes, in milliseconds. A
    /// sender retries a push it got no answer for within seconds or minutes; the store keeps one row per
    /// push with an `apns-id` for this long (docs/APNS.md, "A retried apns-id").
    public static let pushRetryWindow: Int64 = 900_000

    /// What `stored` (the answer the store holds for a key, if any) means to a request with the key and a
    /// body of `bodyHash` received at `now`: the one rule both stores' answers go through.
    public static func lookup(_ stored: IdempotentAnswer?, bodyHash: [UInt8], now: Timestamp) -> IdempotencyLookup {
        guard let stored, stored.expiresAt > now else { return .new }
        guard stored.bodyHash == bodyHash else { return .conflict }
        return .replay(status: stored.status, response: stored.response)
    }

    /// Whether a new answer recorded at `now` may take the place of this one: only once it has expired.
    public func isReplaceable(at now: Timestamp) -> Bool {
        expiresAt <= now
    }
}
