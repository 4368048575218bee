/// One widget push to one device, released by the scheduler (rule 8: every pending reload of the
/// device that rides along is in it).
public struct Delivery: Hashable, Sendable {
    /// One instance the push reloads.
    public struct Reloaded: Hashable, Sendable {
        public var instance: InstanceHandle
        /// Whether a budget token was charged (not for exempt reloads, nor when the bucket was empty:
        /// then the device is predicted to throttle it).
        public var charged: Bool
    }

    public var device: DeviceHandle
    /// When the scheduler released it.
    public var at: Timestamp
    public var reloaded: CompactList<Reloaded>
    /// The requests the push serves, merged ones included: the first 100 of each instance's pending
    /// reload (see ``requestCount`` for all).
    public var requests: CompactList<RequestID>
    /// How many requests the push serves in all.
    public var requestCount: Int = 0
    /// The highest priority of the served requests.
    public var priority: Priority
    /// The latest expiration of the served requests; `nil` when one had none.
    public var expiration: Timestamp?
}

/// A pending reload that expired while waiting (its due time moved past its expiration).
public struct ExpiredReload: Hashable, Sendable {
    public var instance: InstanceHandle
    public var requests: [RequestID]
    public var reason: DecisionReason
}

/// A timeline reload that happened (rule 3): recorded like one on the device, serving any pending reload.
public struct TimelineReload: Hashable, Sendable {
    public var instance: InstanceHandle
    public var at: Timestamp
    public var charged: Bool
    /// Requests of a pending reload that the timeline reload served.
    public var servedRequests: [RequestID]
}

/// The durable state to write for one instance: its snapshot, or `nil` when it was removed (its state
/// and pending reload are deleted).
public struct InstanceWrite: Hashable, Sendable {
    public var instance: InstanceHandle
    public var snapshot: InstanceSnapshot?
}

/// What a clock tick released, and every instance state that changed since the previous tick (by
/// requests, registry changes, timelines, the operator or the tick itself): the caller writes them in the
/// same transaction as the inputs that changed them. Nothing else needs to be asked of the scheduler.
public struct TickOutput: Hashable, Sendable {
    public var deliveries: [Delivery] = []
    public var timelineReloads: [TimelineReload] = []
    public var expired: [ExpiredReload] = []
    /// The instances whose state changed since the previous tick, each once, in the order they first changed.
    public var instanceStates: [InstanceWrite] = []

    public var isEmpty: Bool { deliveries.isEmpty && timelineReloads.isEmpty && expired.isEmpty && instanceStates.isEmpty }
}
