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
        apnsID: String? = nil
    ) {
        self.apnsID = apnsID
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
    public var instances: [Int64]
    /// The listed requests (the first 100 of each instance).
    public var requests: [RequestID]
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
        instances: [Int64],
        requests: [RequestID],
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

/// The first answer to a webhook call with an `idempotency-key`, kept 24 hours.
public struct IdempotentAnswer: Hashable, Sendable {
    public var app: Int64
    public var key: String
    /// SHA-256 of the request body: the same key with another body is a conflict.
    public var bodyHash: [UInt8]
    public var status: Int
    public var response: String
    public var createdAt: Timestamp

    public init(app: Int64, key: String, bodyHash: [UInt8], status: Int, response: String, createdAt: Timestamp) {
        self.app = app
        self.key = key
        self.bodyHash = bodyHash
        self.status = status
        self.response = response
        self.createdAt = createdAt
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

    public init() {}

    public var isEmpty: Bool {
        requests.isEmpty && decisions.isEmpty && instanceStates.isEmpty && deliveries.isEmpty && idempotentAnswers.isEmpty
            && forwards.isEmpty && consumedInbox.isEmpty
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

    public init(apnsID: String, state: RecordedDelivery.State, error: String? = nil, unknownOutcome: Bool = false) {
        self.apnsID = apnsID
        self.state = state
        self.error = error
        self.unknownOutcome = unknownOutcome
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
            if change.state == .sending { attempts += 1 }
            if change.unknownOutcome { unknownOutcomes += 1 }
        }
    }

    /// `changes` merged by delivery, in the order each delivery first appears: a delivery that went
    /// `sending` -> `sent` within one batch costs one update (both stores apply the result).
    public static func merged(_ changes: [DeliveryStateChange]) -> [(apnsID: String, change: Merged)] {
        var merged: [String: Merged] = [:]
        var order: [String] = []
        for change in changes {
            if merged[change.apnsID] == nil { order.append(change.apnsID) }
            merged[change.apnsID, default: Merged()].add(change)
        }
        return order.map { ($0, merged[$0]!) }
    }
}

extension IdempotentAnswer {
    /// How long an idempotency key is remembered: 24 hours, in milliseconds.
    public static let window: Int64 = 86_400_000
}
