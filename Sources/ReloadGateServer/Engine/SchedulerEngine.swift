import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The door's scheduling half (``GatewayDoor`` is the only caller): owns the ``ReloadScheduler`` state
/// machine, feeds it requests, registry changes and clock ticks, and writes everything it decides through
/// to the store in group commits. A caller is answered only after the batch holding its request has committed (DESIGN.md,
/// Durability); deliveries reach the delivery worker only after the batch that released them committed.
///
/// The actor is re-entered while a batch commits, so requests arriving meanwhile gather into the next
/// batch: one transaction (one fsync) serves all of them.
actor SchedulerEngine {
    /// What a submitter gets back.
    enum Outcome: Sendable {
        /// The request was decided and committed; `status`/`body` is the answer that was recorded.
        case decided(request: RequestID, decisions: [Decision], status: Int, body: String)
        /// The same idempotency key and body was answered before: the first answer, again.
        case replay(status: Int, body: String)
        /// The same idempotency key came with another body.
        case conflict
    }

    /// Renders the answer to a decided request (recorded with an idempotency key, so a replay gets
    /// exactly the same bytes).
    typealias Render = @Sendable (RequestID, [Decision]) -> (status: Int, body: String)

    struct InFlightKey {
        var bodyHash: [UInt8]
        var waiters: [Reply] = []
    }

    /// A request handed over by ``enqueue(_:render:reply:)``, or a device to adopt (``enqueue(_:)``).
    enum Queued: Sendable {
        case request(ReloadCommand, Render, Reply)
        case adoption(Adoption)
    }

    /// A device to adopt (its first push, `ingress.unknownDevices: adopt`): written by the commit loop,
    /// registered with the scheduler, then `then` is called with the device's id.
    struct Adoption: Sendable {
        var app: App
        var token: DeviceToken
        var received: Date
        var then: @Sendable (Result<Int64, any Error>) -> Void
    }


    struct KeyName: Hashable {
        var app: Int64
        var key: String
    }

    let store: any SchedulingStore
    nonisolated let configuration: SchedulerConfiguration
    let now: @Sendable () -> Date
    /// The monotonic clock of the engine's own intervals (rebuild attempts, inbox polls); the cluster
    /// simulation's is virtual.
    nonisolated let monotonic: @Sendable () -> ContinuousClock.Instant
    let logger: Logger
    /// Where released deliveries go: ``releasedDeliveries`` (the delivery worker reads it), or the
    /// cluster simulation's outlet.
    let deliveries: DeliveryOutlet

    var scheduler: ReloadScheduler
    var nextRequestID: RequestID = 1
    /// The last id of the current block of request ids (a shared store hands them out in blocks).
    var lastRequestIDOfBlock: RequestID = .max
    var batch = LedgerBatch()
    /// Several gateways on one database: the gateway's id and the shared store; `nil`: this engine
    /// schedules every device (one gateway).
    let partitioning: Partitioning?
    /// The partitions this engine schedules, with the epoch of the lease (a shared store only).
    var owned: [Int: Int64] = [:]
    /// Partitions taken while a commit was in flight, loaded by the commit loop once it has ended
    /// (``takeOver(_:)``).
    var awaitingLoad: [Int: Int64] = [:]
    /// The gateway's fence generation (a shared store only): commits are written under it (``LeaseFence``).
    var fenceGeneration: Int64 = 0
    /// The generation the open batch was begun under, when a heartbeat has changed it since: the batch
    /// may hold decisions for partitions taken over meanwhile, so it commits (and fails) under that one.
    var openBatchGeneration: Int64?
    /// Forwarded work may wait in the inbox (a notification came, or more than one read returned).
    var inboxMayHaveWork = true
    var lastInboxRead: ContinuousClock.Instant?
    var batchDeliveries: [RecordedDelivery] = []
    /// The apns-ids of released deliveries: increasing, so that the store appends to its index.
    var apnsIDs = MessageID.Ordered()
    /// Who waits for which commit, and the state of the group commit (``CommitPipeline``).
    var pipeline = CommitPipeline<Waiter>()
    /// The batch being committed, while the next one is decided (the pipeline holds its waiters).
    var sealed: Sealed?
    /// The outcome of the commit in flight, set by the commit loop's child task that runs it.
    nonisolated let commitOutcome = Mutex<CommitOutcome?>(nil)
    /// Requests and adoptions handed over from event loops, decided by the commit loop.
    nonisolated let inbox = GroupCommitQueue<Queued>(limit: SchedulerEngine.inboxLimit)
    var inFlightKeys: [KeyName: InFlightKey] = [:]
    var batchKeys: [KeyName] = []
    /// The gateway stops: nothing new is decided (what is queued still is, and committed).
    var isStopping: Bool { pipeline.isStopping }
    /// A commit failed and the state could not be reloaded: the in-memory scheduler may hold decisions
    /// that were never committed, so nothing is decided until ``load()`` succeeds again.
    var isDegraded: Bool { pipeline.isDegraded }
    /// When the last attempt to leave the degraded state began.
    var lastRebuild: ContinuousClock.Instant?
    /// The failure to rebuild was logged (once per outage).
    var outageReported = false
    /// How often a degraded engine tries to reload its state.
    static let rebuildInterval: Duration = .seconds(1)

    /// Deliveries ready to send, in release order, one element per committed batch (the delivery
    /// worker reads them).
    nonisolated let releasedDeliveries: AsyncStream<[RecordedDelivery]>
    /// One element whenever there is something to commit (the commit loop reads it).
    nonisolated var commitRequests: AsyncStream<Void> { inbox.signals }

    /// Counts released deliveries (the delivery queue's depth).
    nonisolated let metrics: GatewayMetrics

    /// The gateway's place among several on one database.
    struct Partitioning: Sendable {
        var gateway: String
        var store: any SharedSchedulingStore
    }

    init(
        store: any SchedulingStore,
        configuration: SchedulerConfiguration,
        now: @escaping @Sendable () -> Date,
        logger: Logger,
        metrics: GatewayMetrics = GatewayMetrics(),
        partitioning: Partitioning? = nil,
        monotonic: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        outlet: DeliveryOutlet? = nil
    ) {
        self.monotonic = monotonic
        self.partitioning = partitioning
        self.metrics = metrics
        self.store = store
        self.configuration = configuration
        self.now = now
        self.logger = logger
        self.scheduler = ReloadScheduler(configuration: configuration)
        let (stream, continuation) = AsyncStream.makeStream(of: [RecordedDelivery].self)
        releasedDeliveries = stream
        deliveries = outlet ?? DeliveryOutlet(yield: { continuation.yield($0) }, finish: { continuation.finish() })
    }

    /// Where an engine's released deliveries go, one element per committed batch (or takeover, or requeue).
    struct DeliveryOutlet: Sendable {
        let yield: @Sendable ([RecordedDelivery]) -> Void
        let finish: @Sendable () -> Void
    }

    // MARK: Loading

    /// Builds the scheduler from the store: registers every instance of an active device, restores its
    /// budget, history and pending reload, and rebuilds the timers. Request ids continue after the
    /// highest recorded one.
    func load() async throws {
        var scheduler = ReloadScheduler(configuration: configuration)
        let instances: [RegisteredInstance]
        let snapshots: [(instance: Int64, snapshot: InstanceSnapshot)]
        if let partitioning {
            // Only the partitions this gateway holds (none before its first heartbeat).
            let partitions = owned.keys.sorted()
            instances = try await partitioning.store.registeredInstances(partitions: partitions)
            snapshots = try await partitioning.store.instanceSnapshots(partitions: partitions)
        } else {
            instances = try await store.registeredInstances()
            snapshots = try await store.instanceSnapshots()
            nextRequestID = try await store.lastRequestID() &+ 1
        }
        try Self.restore(instances, snapshots, into: &scheduler)
        self.scheduler = scheduler
        logger.info(
            "scheduler loaded",
            metadata: ["instances": "\(instances.count)", "pending": "\(scheduler.pendingCount)"]
        )
    }

    /// Registers `instances` with `scheduler` and restores their stored state (their budget, history
    /// and pending reload, and their timers).
    static func restore(
        _ instances: [RegisteredInstance],
        _ snapshots: [(instance: Int64, snapshot: InstanceSnapshot)],
        into scheduler: inout ReloadScheduler
    ) throws {
        var registered = Set<Int64>()
        for instance in instances {
            guard let handle = Self.handle(instance.instance), let device = Self.deviceHandle(instance.device) else {
                throw StoreError.corrupt(reason: "instance \(instance.instance) or device \(instance.device) exceeds 2^31")
            }
            scheduler.register(handle, device: device, kind: instance.kind)
            registered.insert(instance.instance)
        }
        var restored = Set<Int64>()
        for (instance, snapshot) in snapshots where registered.contains(instance) {
            scheduler.restore(InstanceHandle(Int32(instance)), snapshot)
            restored.insert(instance)
        }
        // A timeline reported but not yet written through (the gateway stopped in between): its planned
        // reload comes from the timeline itself.
        for instance in instances where !restored.contains(instance.instance) {
            if let planned = instance.plannedReload {
                scheduler.restore(
                    InstanceHandle(Int32(instance.instance)),
                    InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: planned, pending: nil)
                )
            }
        }
    }

    static func handle(_ id: Int64) -> InstanceHandle? { Int32(exactly: id).map(InstanceHandle.init) }
    static func deviceHandle(_ id: Int64) -> DeviceHandle? { Int32(exactly: id).map(DeviceHandle.init) }

}

/// Too many requests wait to be decided (`503 ServiceUnavailable`); nothing was accepted.
struct SchedulerOverloaded: Error, CustomStringConvertible {
    var description: String { "the scheduler's queue is full" }
}

/// The scheduler is stopping (graceful shutdown): the request was not accepted.
struct SchedulerUnavailable: Error, CustomStringConvertible {
    var description: String { "the scheduler is shutting down" }
}

