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

    public init(
        id: RequestID,
        app: Int64,
        source: Source,
        received: Timestamp,
        priority: Priority,
        expiration: Timestamp?,
        collapseID: String?,
        exempt: Bool,
        summary: String
    ) {
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

/// A delivery as the ledger keeps it: pending -> sending -> sent | failed (DESIGN.md, Durability).
public struct RecordedDelivery: Hashable, Sendable {
    public enum State: String, Sendable {
        case pending, sending, sent, failed
    }

    public var apnsID: String
    public var device: Int64
    public var released: Timestamp
    public var instances: [Int64]
    public var requests: [RequestID]
    public var priority: Priority
    public var expiration: Timestamp?
    public var state: State

    public init(
        apnsID: String,
        device: Int64,
        released: Timestamp,
        instances: [Int64],
        requests: [RequestID],
        priority: Priority,
        expiration: Timestamp?,
        state: State
    ) {
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

/// Everything one group commit writes, in one transaction: the requests and their decisions, the
/// scheduling state of every instance they changed (write-through), and the deliveries released.
public struct LedgerBatch: Sendable {
    public var requests: [RecordedRequest] = []
    public var decisions: [Decision] = []
    /// The new state of changed instances; `nil` for an instance that was removed.
    public var instanceStates: [(instance: Int64, snapshot: InstanceSnapshot?)] = []
    public var deliveries: [RecordedDelivery] = []

    public init() {}

    public var isEmpty: Bool { requests.isEmpty && decisions.isEmpty && instanceStates.isEmpty && deliveries.isEmpty }
}
