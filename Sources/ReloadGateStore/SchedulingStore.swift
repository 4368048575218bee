public import Foundation
public import ReloadGateCore

/// What the scheduler engine asks of its store, and nothing more: the state it loads, the group commit,
/// idempotency keys, adopting a device, and the health checks of a degraded engine. ``GatewayStore``
/// refines it; the cluster simulation's in-memory store implements only this and
/// ``SharedSchedulingStore``.
public protocol SchedulingStore: Sendable {
    // MARK: Loading
    /// Every widget instance of an active device, with its kind and planned reload.
    func registeredInstances() async throws -> [RegisteredInstance]
    /// The stored scheduling state (budget, history, pending reload) of every instance that has one.
    func instanceSnapshots() async throws -> [(instance: Int64, snapshot: InstanceSnapshot)]
    /// The highest request id recorded (0 when none): one gateway continues after it.
    func lastRequestID() async throws -> RequestID

    // MARK: The group commit
    /// Writes a batch of the ledger (requests, decisions, deliveries, instance states, idempotent
    /// answers, forwarded work written and consumed) in one transaction, or nothing: under a
    /// ``LedgerBatch/fence`` that no longer holds it writes nothing and throws ``StoreError/fenced(generation:held:)``.
    func commit(_ batch: LedgerBatch) async throws
    /// The answers recorded for `keys`, expired or not (``IdempotentAnswer/lookup(_:bodyHash:now:)`` says
    /// what they mean): one read for all the keys of a drain of the engine's inbox.
    func idempotentAnswers(for keys: [IdempotencyKey]) async throws -> [IdempotencyKey: IdempotentAnswer]
    /// Whether the store keeps an answer in its request's row (``RecordedRequest/answer``) when the
    /// engine asks: a store one gateway owns, whose engine sees every commit and so can find those
    /// answers by an index in memory. A store several gateways share keeps every answer in the
    /// idempotency table, where any gateway finds it.
    var keepsAnswersInRequests: Bool { get }
    /// The answers kept in the rows of `requests` (requests without one are left out).
    func keptAnswers(requests: [RequestID]) async throws -> [RequestID: IdempotentAnswer]
    /// Every answer kept in a request's row that has not expired at `now`, oldest first, without its
    /// response: what the engine's index in memory is rebuilt from on start. `window`: the longest any
    /// such answer is kept (requests received earlier are not read).
    func keptAnswerKeys(unexpiredAt now: Timestamp, window: Int64) async throws -> [KeptAnswerKey]
    /// When the last of the idempotency table's keys that begin with `prefix` and expire after `now` and
    /// no later than `limit` expires (`nil`: there is none): on start, how long keys of a kind the engine
    /// otherwise keeps in request rows may still be found in the table.
    func lastExpiry(ofTableKeysPrefixed prefix: String, after now: Timestamp, notAfter limit: Timestamp) async throws -> Timestamp?
    /// Registers the device (or control, for `pushType` `controls`) of a push to an unknown token
    /// (`ingress.unknownDevices: adopt`) with one implicit instance of kind `*`, in a transaction of its
    /// own; the same device and instance when it exists already. (The gateway adopts in the registry's
    /// group commit, ``RegistryWrite/adoptDevice(app:token:pushType:pushToStart:)``; the cluster
    /// simulation and the stores' tests through this.)
    func adoptDevice(app: App, token: DeviceToken, pushType: PushType, pushToStart: Bool, now: Date) async throws -> (device: Int64, instance: Int64)

    // MARK: Health
    /// Whether the store answers a trivial query within `timeout` (a database server that is up and
    /// reachable); an embedded store always does.
    func isReachable(within timeout: Duration) async -> Bool
    /// Why a commit could not be made now (`nil`: it could): a write probe that changes nothing the
    /// gateway reads, held to `timeout`. A database whose tables a migration has locked, a full disk, a
    /// server that does not answer: each fails it. The gateway accepts requests again once it passes.
    func commitProbe(within timeout: Duration) async -> String?
}

/// What a partitioned engine and its cluster membership ask of a store several gateways share
/// (``ClusterStore`` refines it): partition leases, request ids in blocks, the inbox of forwarded work,
/// and the partition-wise loading of the scheduler's state.
///
/// Every registry change such a store writes (a device put, removed, adopted or marked unregistered, a
/// timeline) puts ``ForwardedWork/device(id:)`` in the inbox of the device's partition in the change's own
/// transaction: the owner learns of it whatever becomes of the gateway that made it.
public protocol SharedSchedulingStore: SchedulingStore {
    /// Renews, takes and balances this gateway's leases (one transaction).
    func heartbeat(gateway: String, address: String?, startedAt: Int64, leaseMilliseconds: Int64, now: Int64?) async throws
        -> LeaseState
    /// Gives leases back (only those still held with these epochs).
    func release(_ leases: [Int: Int64], gateway: String) async throws
    /// Gives every lease of `gateway` back and removes it from the live gateways (it stops): the others
    /// take its partitions with their next heartbeat, and count their shares without it.
    func leave(gateway: String) async throws
    /// A block of request ids no other gateway uses.
    func requestIDBlock() async throws -> ClosedRange<RequestID>
    /// The oldest forwarded work of `partitions` written after the entry `after` (0: all of it), at most
    /// `limit` entries, in the order it was written.
    func inbox(partitions: [Int], after: Int64, limit: Int) async throws -> [InboxEntry]
    /// The scheduler's state of the devices of `partitions`.
    func registeredInstances(partitions: [Int]) async throws -> [RegisteredInstance]
    /// The stored scheduling state of the instances of `partitions`' devices.
    func instanceSnapshots(partitions: [Int]) async throws -> [(instance: Int64, snapshot: InstanceSnapshot)]
    /// Deliveries of the devices of `partitions` in `states` (a new owner sends what the last one left).
    func deliveries(in states: [RecordedDelivery.State], partitions: [Int]) async throws -> [RecordedDelivery]
    /// The device of a widget instance (`nil`: no such instance).
    func device(ofInstance instance: Int64) async throws -> Int64?
    /// The instances of the active ones of `devices` (none for an inactive or deleted one), by instance id,
    /// to bring a scheduler in line with their registrations: one read for a registry batch's devices.
    func registeredInstances(devices: [Int64]) async throws -> [RegisteredInstance]
}

/// An answer kept in a request's row: which request, its key, and until when it holds.
public struct KeptAnswerKey: Hashable, Sendable {
    public var request: RequestID
    public var name: IdempotencyKey
    public var expiresAt: Timestamp

    public init(request: RequestID, name: IdempotencyKey, expiresAt: Timestamp) {
        self.request = request
        self.name = name
        self.expiresAt = expiresAt
    }
}

extension SchedulingStore {
    /// Adopts a device for widget pushes.
    public func adoptDevice(app: App, token: DeviceToken, now: Date) async throws -> (device: Int64, instance: Int64) {
        try await adoptDevice(app: app, token: token, pushType: .widgets, pushToStart: false, now: now)
    }

    /// Adopts a token of `pushType` (not a push-to-start token).
    public func adoptDevice(app: App, token: DeviceToken, pushType: PushType, now: Date) async throws -> (device: Int64, instance: Int64) {
        try await adoptDevice(app: app, token: token, pushType: pushType, pushToStart: false, now: now)
    }
}

extension SchedulingStore {
    /// What one idempotency key finds for a request with a body of `bodyHash` at `now`.
    public func idempotentAnswer(app: Int64, key: String, bodyHash: [UInt8], now: Timestamp) async throws -> IdempotencyLookup {
        let name = IdempotencyKey(app: app, key: key)
        return IdempotentAnswer.lookup(try await idempotentAnswers(for: [name])[name], bodyHash: bodyHash, now: now)
    }
}

extension SharedSchedulingStore {
    /// A store several gateways share keeps every answer in the idempotency table: a retry may come
    /// through any of them.
    public var keepsAnswersInRequests: Bool { false }

    public func keptAnswers(requests: [RequestID]) async throws -> [RequestID: IdempotentAnswer] { [:] }

    public func keptAnswerKeys(unexpiredAt now: Timestamp, window: Int64) async throws -> [KeptAnswerKey] { [] }

    public func lastExpiry(ofTableKeysPrefixed prefix: String, after now: Timestamp, notAfter limit: Timestamp) async throws
        -> Timestamp?
    { limit }

    /// The oldest forwarded work of `partitions`, from the first entry the inbox holds.
    public func inbox(partitions: [Int], limit: Int) async throws -> [InboxEntry] {
        try await inbox(partitions: partitions, after: 0, limit: limit)
    }
}

extension LedgerBatch {
    /// Refuses a batch with an answer in a request's row, for a store that keeps none there: it would
    /// be lost.
    public func checkNoKeptAnswers() throws {
        if let request = requests.first(where: { $0.answer != nil }) {
            throw StoreError.corrupt(reason: "request \(request.id) keeps its answer in its row, which this store does not")
        }
    }
}
