import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The door's scheduling half (``GatewayDoor`` is the only caller): owns the ``ReloadScheduler`` state
/// machine, feeds it requests, registry changes and clock ticks, and writes everything it decides through
/// to the store in group commits. A caller is answered only after the batch holding its request has committed (docs/DESIGN.md,
/// Durability); deliveries reach the delivery worker only after the batch that released them committed.
///
/// The actor is re-entered while a batch commits, so requests arriving meanwhile gather into the next
/// batch: one transaction (one fsync) serves all of them.
///
/// One job per file: loading (`+Loading`), requests (`+Requests`), idempotency keys (`+Idempotency`),
/// request ids (`+RequestIDs`), the registry's mirror (`+Registry`), the operator's commands (`+Operator`),
/// the group commit (`+Commit`, performing ``CommitPipeline``), several gateways on one database
/// (`+Partitions`, and the inbox of forwarded work in `+Inbox`; the leases' state machine,
/// ``PartitionLeases``, is performed by ``ClusterMembership``).
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

    /// A request handed over by ``enqueue(_:render:reply:)``.
    struct Queued: Sendable {
        var submission: ReloadCommand
        var render: Render
        var reply: Reply
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
    /// Several gateways on one database: the gateway's id and the shared store; `nil`: this engine
    /// schedules every device (one gateway).
    let partitioning: Partitioning?
    /// The partitions this engine schedules, with the epoch of the lease (a shared store only).
    var owned: [Int: Int64] = [:]
    /// Partitions loaded (or reloaded) here whose inbox has not been read since, with the epoch of the lease
    /// they were loaded under: work forwarded to them before may wait there, or in the open batch, and must
    /// be decided first. Until an inbox read that began after the load, their new requests and operator
    /// commands are forwarded too, as before the load (``decidesHere(partition:)``); that read decides the
    /// open batch's forwards to them after the inbox's (``catchUp(_:)``).
    var catchingUp: [Int: Int64] = [:]
    /// Partitions taken and not loaded yet (``takeOver(_:)``): their load waits for a moment with no
    /// commit in flight, or runs.
    var awaitingLoad: [Int: Int64] = [:]
    /// The partition load running beside the commit loop (``startAwaitedLoad()``), if one is.
    var partitionLoad: Task<Void, Never>?
    /// When the last partition load failed (the next begins a second later at the earliest).
    var lastFailedLoad: ContinuousClock.Instant?
    /// Counts the builds of the whole state (``load()``): a partition load read before the last one is
    /// not applied to it.
    var stateGeneration = 0
    /// The gateway's fence generation (a shared store only): commits are written under it (``LeaseFence``).
    var fenceGeneration: Int64 = 0
    /// Forwarded work may wait in the inbox (a notification came, or more than one read returned).
    var inboxMayHaveWork = true
    var lastInboxRead: ContinuousClock.Instant?
    /// The apns-ids of released deliveries: increasing, so that the store appends to its index.
    var apnsIDs = MessageID.Ordered()
    /// The open batch, the commit in flight and who waits for which (``CommitPipeline``).
    var pipeline = CommitPipeline<Waiter, OpenBatch>()
    /// The outcome of the commit in flight, set by the commit loop's child task that runs it.
    nonisolated let commitOutcome = Mutex<CommitOutcome?>(nil)
    /// Requests handed over from event loops, decided by the commit loop.
    nonisolated let inbox = GroupCommitQueue<Queued>(limit: SchedulerEngine.inboxLimit)
    var inFlightKeys: [KeyName: InFlightKey] = [:]
    /// Wakes the timer loop when a turn sets a timer before its planned wake (``timerTurn(longest:)``).
    nonisolated let timerNudge = TimerNudge()
    /// When the timer loop plans to look at the clock next (engine milliseconds).
    var plannedTimerWake: Int64 = 0
    /// Commits whose child task of the commit loop has not been collected (``DoorService/commitLoop``).
    nonisolated let uncollectedCommits = Atomic<Int>(0)
    /// Where the answers the store keeps in request rows are found (capacity 0: a store that keeps none).
    var keptAnswers: KeptAnswerIndex
    /// Until when the idempotency table may hold a push's key (recorded there while ``keptAnswers`` was
    /// full, or before the gateway started): until then a key the index does not name is looked up there.
    var tableMayHoldKeptKeysUntil = Timestamp(milliseconds: 0)
    /// The gateway stops: nothing new is decided (what is queued still is, and committed).
    var isStopping: Bool { pipeline.isStopping }
    /// A commit failed and the state could not be reloaded: the in-memory scheduler may hold decisions
    /// that were never committed, so nothing is decided until ``load()`` succeeds again.
    var isDegraded: Bool { pipeline.isDegraded }
    /// When the last attempt to leave the degraded state began.
    var lastRebuild: ContinuousClock.Instant?
    /// The attempt to leave the degraded state running beside the commit loop (``startRebuild()``), if one is.
    var rebuildAttempt: Task<Void, Never>?
    /// The failure to rebuild was logged (once per outage).
    var outageReported = false
    /// What a write beside the loop met while a commit was in flight (``storeFailed(_:)``): the requests
    /// decided meanwhile are refused with it when that commit ends.
    var failureBesideInFlight: StoreError?
    /// How often a degraded engine tries to reload its state, and a failed partition load is begun again.
    static let rebuildInterval: Duration = .seconds(1)
    /// How many pushes' apns-ids the index of kept answers holds by default (`ingress.apnsIdsInMemory`):
    /// the keys of 1,100 pushes a second over the 15-minute retry window, about 60 MB.
    static let defaultKeptAnswerCapacity = 1_000_000

    /// Deliveries ready to send, in release order, one element per committed batch (the delivery
    /// worker reads them).
    nonisolated let releasedDeliveries: AsyncStream<[RecordedDelivery]>
    /// One element whenever there is something to commit (the commit loop reads it).
    nonisolated var commitRequests: AsyncStream<Void> { inbox.signals }

    /// Counts released deliveries (the delivery queue's depth).
    nonisolated let metrics: GatewayMetrics
    /// Live freshness: each committed batch's decisions and timeline reloads are handed to it.
    nonisolated let freshness: FreshnessMonitor
    /// Called when the engine turns degraded, before it refuses anyone for the store: the gateway says
    /// `503` on `/ready` before a sender has seen a refusal (the commit loop marks it ready again).
    nonisolated let onDegraded: @Sendable () -> Void

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
        outlet: DeliveryOutlet? = nil,
        keptAnswerCapacity: Int = SchedulerEngine.defaultKeptAnswerCapacity,
        onDegraded: @escaping @Sendable () -> Void = {}
    ) {
        self.onDegraded = onDegraded
        // Several gateways share a store: any of them may get a retry, so answers go to its table.
        keptAnswers = KeptAnswerIndex(capacity: store.keepsAnswersInRequests && partitioning == nil ? keptAnswerCapacity : 0)
        self.monotonic = monotonic
        self.partitioning = partitioning
        self.metrics = metrics
        self.store = store
        self.configuration = configuration
        self.now = now
        self.logger = logger
        self.scheduler = ReloadScheduler(configuration: configuration)
        self.freshness = FreshnessMonitor(scheduling: configuration, metrics: metrics)
        let (stream, continuation) = AsyncStream.makeStream(of: [RecordedDelivery].self)
        releasedDeliveries = stream
        deliveries = outlet ?? DeliveryOutlet(yield: { continuation.yield($0) }, finish: { continuation.finish() })
    }

    /// Where an engine's released deliveries go, one element per committed batch (or takeover, or requeue).
    struct DeliveryOutlet: Sendable {
        let yield: @Sendable ([RecordedDelivery]) -> Void
        let finish: @Sendable () -> Void
    }
}

extension SchedulerEngine {
    /// How much the engine holds besides the scheduler's state: what is in flight, and the window's keys.
    struct Footprint: Sendable, Equatable {
        var scheduler: ReloadScheduler.Footprint
        var inFlightKeys: Int
        var batchKeys: Int
        var openBatch: Int
        var openWaiters: Int
        var keptAnswers: Int
        var uncollectedCommits: Int
    }

    var footprint: Footprint {
        Footprint(
            scheduler: scheduler.footprint, inFlightKeys: inFlightKeys.count, batchKeys: pipeline.open.keys.count,
            openBatch: pipeline.open.ledger.requests.count + pipeline.open.ledger.decisions.count
                + pipeline.open.ledger.instanceStates.count + pipeline.open.ledger.deliveries.count,
            openWaiters: pipeline.openWaiters.count, keptAnswers: keptAnswers.count,
            uncollectedCommits: uncollectedCommits.load(ordering: .relaxed)
        )
    }
}

/// Too many requests wait to be decided (`503 ServiceUnavailable`); nothing was accepted.
struct SchedulerOverloaded: Error, CustomStringConvertible {
    var description: String { "the scheduler's queue is full" }
}

/// The scheduler is stopping (graceful shutdown): the request was not accepted.
struct SchedulerUnavailable: Error, CustomStringConvertible {
    var description: String { "the scheduler is shutting down" }
}

