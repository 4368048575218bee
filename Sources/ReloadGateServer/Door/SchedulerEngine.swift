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

    private struct InFlightKey {
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


    private struct KeyName: Hashable {
        var app: Int64
        var key: String
    }

    let store: any GatewayStore
    nonisolated let configuration: SchedulerConfiguration
    let now: @Sendable () -> Date
    let logger: Logger
    let deliveries: AsyncStream<[RecordedDelivery]>.Continuation

    var scheduler: ReloadScheduler
    private var nextRequestID: RequestID = 1
    /// The last id of the current block of request ids (a shared store hands them out in blocks).
    private var lastRequestIDOfBlock: RequestID = .max
    var batch = LedgerBatch()
    /// Several gateways on one database: the gateway's id and the shared store; `nil`: this engine
    /// schedules every device (one gateway).
    let partitioning: Partitioning?
    /// The partitions this engine schedules, with the epoch of the lease (a shared store only).
    var owned: [Int: Int64] = [:]
    /// The gateway's fence generation (a shared store only): commits are written under it (``LeaseFence``).
    var fenceGeneration: Int64 = 0
    /// The generation the open batch was begun under, when a heartbeat has changed it since: the batch
    /// may hold decisions for partitions taken over meanwhile, so it commits (and fails) under that one.
    var openBatchGeneration: Int64?
    /// Forwarded work may wait in the inbox (a notification came, or more than one read returned).
    var inboxMayHaveWork = true
    var lastInboxRead: ContinuousClock.Instant?
    private var batchDeliveries: [RecordedDelivery] = []
    /// The apns-ids of released deliveries: increasing, so that the store appends to its index.
    private var apnsIDs = MessageID.Ordered()
    /// The batch being committed, while the next one is decided.
    private var flight: Flight?
    /// Called with the outcome of the open batch's commit.
    private var waiters: [@Sendable (Result<Void, any Error>) -> Void] = []
    /// Requests and adoptions handed over from event loops, decided by the commit loop.
    nonisolated let inbox = GroupCommitQueue<Queued>(limit: SchedulerEngine.inboxLimit)
    private var inFlightKeys: [KeyName: InFlightKey] = [:]
    private var batchKeys: [KeyName] = []
    private(set) var isStopping = false
    /// The commit loop made its last commit (the gateway stops): nothing waits for a commit any more.
    private var commitLoopEnded = false
    /// A commit failed and the state could not be reloaded: the in-memory scheduler may hold decisions
    /// that were never committed, so nothing is decided until ``load()`` succeeds again.
    private(set) var isDegraded = false
    /// When the last attempt to leave the degraded state began.
    private var lastRebuild: ContinuousClock.Instant?
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
        var store: any ClusterStore
    }

    init(
        store: any GatewayStore,
        configuration: SchedulerConfiguration,
        now: @escaping @Sendable () -> Date,
        logger: Logger,
        metrics: GatewayMetrics = GatewayMetrics(),
        partitioning: Partitioning? = nil
    ) {
        self.partitioning = partitioning
        self.metrics = metrics
        self.store = store
        self.configuration = configuration
        self.now = now
        self.logger = logger
        self.scheduler = ReloadScheduler(configuration: configuration)
        (releasedDeliveries, deliveries) = AsyncStream.makeStream(of: [RecordedDelivery].self)
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

    // MARK: Requests

    /// What a submitter is told once its request is decided and committed (or refused).
    typealias Reply = @Sendable (Result<Outcome, any Error>) -> Void

    /// Decides a request and returns once its decisions are committed.
    /// - Throws: the store's error when the commit failed: nothing of the request was accepted.
    func submit(_ submission: ReloadCommand, render: @escaping Render) async throws -> Outcome {
        try checkAccepting()
        return try await withCheckedThrowingContinuation { continuation in
            enqueue(submission, render: render) { continuation.resume(with: $0) }
        }
    }

    /// Hands a request over from any thread (an event loop) without waiting: it is decided with the next
    /// batch and `reply` is called once that batch committed. No task and no actor hop per request.
    nonisolated func enqueue(_ submission: ReloadCommand, render: @escaping Render, reply: @escaping Reply) {
        switch inbox.append(.request(submission, render, reply)) {
        case nil: break
        case .full: reply(.failure(SchedulerOverloaded()))
        case .closed: reply(.failure(SchedulerUnavailable()))
        }
    }

    /// Hands a device to adopt over from any thread; the commit loop writes it (no task per adoption).
    nonisolated func enqueue(_ adoption: Adoption) {
        switch inbox.append(.adoption(adoption)) {
        case nil: break
        case .full: adoption.then(.failure(SchedulerOverloaded()))
        case .closed: adoption.then(.failure(SchedulerUnavailable()))
        }
    }

    /// Requests queued by ``enqueue(_:render:reply:)`` beyond this many are refused (`ServiceUnavailable`).
    static let inboxLimit = 50_000

    /// Decides the queued requests (the commit loop calls this before sealing a batch). Only the commit
    /// loop drains, one item after the other: an idempotency key's lookup in the store sees every
    /// earlier batch committed, and no other request with the key is accepted meanwhile.
    private func drainInbox() async {
        let queued = inbox.takeAll()
        for item in queued {
            switch item {
            case .request(let submission, let render, let reply):
                await accept(submission, render: render, reply: reply)
            case .adoption(let adoption):
                // Rare (once per new token): written here, on the commit loop, in its own transaction.
                do {
                    let adopted = try await store.adoptDevice(app: adoption.app, token: adoption.token, now: adoption.received)
                    if isLocal(device: adopted.device) {
                        if let handle = Self.handle(adopted.instance), let device = Self.deviceHandle(adopted.device) {
                            scheduler.register(handle, device: device, kind: SQLiteStore.implicitWidget)
                        }
                    } else {
                        // Another gateway schedules the new device: it learns of it from its inbox, ahead of
                        // the push that follows (which it would otherwise decide `no-match`).
                        _ = try await devicesChangedWithoutWaiting([adopted.device])
                    }
                    adoption.then(.success(adopted.device))
                } catch {
                    adoption.then(.failure(error))
                }
            }
        }
    }

    /// Decides a request into the open batch; `reply` is called after the batch committed, or at once
    /// for an idempotent replay or conflict.
    private func accept(_ submission: ReloadCommand, render: Render, reply: @escaping Reply) async {
        if let idempotency = submission.idempotency {
            let name = KeyName(app: submission.app.id, key: idempotency.key)
            if var inFlight = inFlightKeys[name] {
                guard inFlight.bodyHash == idempotency.bodyHash else { return reply(.success(.conflict)) }
                inFlight.waiters.append(reply)
                inFlightKeys[name] = inFlight
                return
            }
            do {
                switch try await store.idempotentAnswer(
                    app: submission.app.id,
                    key: idempotency.key,
                    bodyHash: idempotency.bodyHash,
                    now: submission.received
                ) {
                case .replay(let status, let body): return reply(.success(.replay(status: status, body: body)))
                case .conflict: return reply(.success(.conflict))
                case .new: inFlightKeys[name] = InFlightKey(bodyHash: idempotency.bodyHash)
                }
            } catch {
                return reply(.failure(error))
            }
        }

        let id: RequestID
        do {
            id = try await takeRequestID()
        } catch {
            if let idempotency = submission.idempotency {
                let name = KeyName(app: submission.app.id, key: idempotency.key)
                for waiter in inFlightKeys.removeValue(forKey: name)?.waiters ?? [] { waiter(.failure(error)) }
            }
            return reply(.failure(error))
        }
        // On a shared store, targets of devices whose partition another gateway holds go to its inbox.
        let (local, forwarded) = split(submission)
        let request = ReloadRequest(
            id: id,
            targets: local.compactMap(Self.handle),
            priority: submission.priority,
            expiration: submission.expiration,
            collapseID: submission.collapseID,
            team: submission.team,
            exempt: submission.exempt,
            received: submission.received
        )
        let first = batch.decisions.count
        if !local.isEmpty || forwarded.isEmpty { scheduler.receive(request, into: &batch.decisions) }
        forward(forwarded, of: submission, id: id)
        let decisions = Array(batch.decisions[first...])
        let answer = render(id, decisions)
        batch.requests.append(
            RecordedRequest(
                id: id,
                app: submission.app.id,
                source: submission.source,
                received: submission.received,
                priority: submission.priority,
                expiration: submission.expiration,
                collapseID: submission.collapseID,
                exempt: submission.exempt,
                summary: submission.summary,
                apnsID: submission.apnsID
            )
        )
        if let idempotency = submission.idempotency {
            batch.idempotentAnswers.append(
                IdempotentAnswer(
                    app: submission.app.id,
                    key: idempotency.key,
                    bodyHash: idempotency.bodyHash,
                    status: answer.status,
                    response: answer.body,
                    createdAt: submission.received
                )
            )
            batchKeys.append(KeyName(app: submission.app.id, key: idempotency.key))
        }
        waiters.append { result in
            reply(result.map { .decided(request: id, decisions: decisions, status: answer.status, body: answer.body) })
        }
        inbox.wake()
    }

    /// The next request id: after the highest recorded one (one gateway), or from a block no other
    /// gateway uses (a shared store).
    private func takeRequestID() async throws -> RequestID {
        if let partitioning, nextRequestID > lastRequestIDOfBlock || lastRequestIDOfBlock == .max {
            let block = try await partitioning.store.requestIDBlock()
            nextRequestID = block.lowerBound
            lastRequestIDOfBlock = block.upperBound
        }
        let id = nextRequestID
        nextRequestID &+= 1
        return id
    }

    // MARK: Registry

    /// Brings the scheduler in line with a device registration that the store has committed: removed
    /// widgets (and a retired previous token's) are forgotten, their pending reloads dropped with a
    /// `cancelled` decision; returns once those decisions are committed (at once when none was pending).
    func apply(_ registration: DeviceRegistration) async throws {
        try checkAccepting()
        if try await applyWithoutWaiting(registration) { try await waitForCommit() }
    }

    /// Applies committed registry writes in their order (the registry's group commit) and says whether
    /// their effects wait for a commit (dropped pending reloads, planned reloads, forwarded changes): the
    /// caller then awaits ``waitForCommit()`` once for all of them.
    func applyWithoutWaiting(_ written: [(RegistryWrite, RegistryWritten)]) async throws -> Bool {
        try checkAccepting()
        var needsCommit = false
        for (write, result) in written {
            switch (write, result) {
            case (_, .device(let registration)):
                if try await applyWithoutWaiting(registration) { needsCommit = true }
            case (.putTimeline(_, _, _, let timeline), .timeline(let instance)):
                if try await setTimelineWithoutWaiting(instance: instance, timeline) { needsCommit = true }
            default:
                break
            }
        }
        return needsCommit
    }

    /// The scheduler's side of a registration; `true` when it waits for a commit.
    private func applyWithoutWaiting(_ registration: DeviceRegistration) async throws -> Bool {
        if partitioning != nil {
            return try await devicesChangedWithoutWaiting([registration.device] + (registration.retired.map { [$0.device] } ?? []))
        }
        let removed = registration.removedInstances + (registration.retired?.instances ?? [])
        let dropped = drop(removed.compactMap(Self.handle), reason: .removedFromRegistry)
        if let device = Self.deviceHandle(registration.device) {
            for (id, widget) in registration.instances {
                if let handle = Self.handle(id) { scheduler.register(handle, device: device, kind: widget.kind) }
            }
        }
        return dropped > 0
    }

    /// Forgets removed instances (a deleted device); their pending reloads are dropped with a `cancelled`
    /// decision, committed before this returns.
    func remove(instances: [Int64], of device: Int64) async throws {
        try checkAccepting()
        if partitioning != nil { return try await devicesChanged([device]) }
        if drop(instances.compactMap(Self.handle), reason: .removedFromRegistry) > 0 { try await waitForCommit() }
    }

    /// Forgets the instances of a device Apple unregistered (410) that the store has marked: their pending
    /// reloads are dropped with a `cancelled` decision naming Apple's time, and their state is deleted in
    /// the same commit. Returns the instance -> dropped requests, once committed.
    func unregister(device: Int64, since: Timestamp) async throws -> [Int64: [RequestID]] {
        try checkAccepting()
        guard let handle = Self.deviceHandle(device) else { return [:] }
        if partitioning != nil, !isLocal(device: device) {
            try await devicesChanged([device])
            return [:]
        }
        var dropped: [Int64: [RequestID]] = [:]
        for instance in scheduler.instances(ofDevice: handle) {
            let requests = scheduler.remove(instance)
            record(dropped: requests, of: instance, reason: .deviceUnregistered(since: since))
            dropped[Int64(instance.rawValue)] = requests
        }
        try await waitForCommit()
        return dropped
    }

    /// Removes `instances` from the scheduler, recording a `cancelled` decision for each request of their
    /// pending reloads; returns how many instances had one.
    func drop(_ instances: [InstanceHandle], reason: DecisionReason) -> Int {
        var count = 0
        for instance in instances {
            let requests = scheduler.remove(instance)
            if !requests.isEmpty { count += 1 }
            record(dropped: requests, of: instance, reason: reason)
        }
        return count
    }

    private func record(dropped requests: [RequestID], of instance: InstanceHandle, reason: DecisionReason) {
        for request in requests {
            batch.decisions.append(Decision(request: request, instance: instance, kind: .cancelled, due: nil, reason: reason))
        }
    }

    /// Records a timeline that the store has committed and returns once the instance's new planned
    /// reload is written through.
    func setTimeline(instance: Int64, _ timeline: Timeline) async throws {
        try checkAccepting()
        if try await setTimelineWithoutWaiting(instance: instance, timeline) { try await waitForCommit() }
    }

    /// The scheduler's side of a timeline; `true` when it waits for a commit.
    private func setTimelineWithoutWaiting(instance: Int64, _ timeline: Timeline) async throws -> Bool {
        guard let handle = Self.handle(instance) else { return false }
        if let partitioning, scheduler.device(of: handle) == nil {
            // Not scheduled here: its owner reads the device again (when it is here, it is registered).
            guard let device = try await partitioning.store.device(ofInstance: instance) else { return false }
            return try await devicesChangedWithoutWaiting([device])
        }
        scheduler.setTimeline(handle, timeline)
        return true
    }

    // MARK: Operator

    /// Why each of `instances` waits now (those without a pending reload are left out).
    func pendingWaits(_ instances: [Int64]) -> [Int64: PendingWait] {
        let time = Timestamp(now())
        var waits: [Int64: PendingWait] = [:]
        for id in instances {
            if let handle = Self.handle(id), let wait = scheduler.pendingWait(of: handle, at: time) { waits[id] = wait }
        }
        return waits
    }

    /// How full the budgets are now (``ReloadScheduler/budgetUse(at:lowest:)``).
    func budgetUse(lowest: Int) -> BudgetUse {
        scheduler.budgetUse(at: Timestamp(now()), lowest: lowest)
    }

    /// The budgets of `instances` now (unregistered ones are left out).
    func budgets(_ instances: [Int64]) -> [Int64: BudgetView] {
        let time = Timestamp(now())
        var budgets: [Int64: BudgetView] = [:]
        for id in instances {
            if let handle = Self.handle(id), let budget = scheduler.budget(of: handle, at: time) { budgets[id] = budget }
        }
        return budgets
    }

    /// Drops the pending reloads of `instances` whose listed requests include `request` (every one of
    /// `instances` when `request` is nil), records a `cancelled` decision for each of their listed
    /// requests, and returns once that is committed: instance -> the requests dropped with it.
    func cancel(instances given: [Int64], listing request: RequestID?) async throws -> [Int64: [RequestID]] {
        try checkAccepting()
        var dropped: [Int64: [RequestID]] = [:]
        // Instances another gateway schedules: the command goes to its inbox (it drops them when it reads it).
        let (instances, forwarded) = try await splitForOperator(given)
        for (partition, ids) in forwarded {
            batch.forwards.append(InboxEntry(partition: partition, work: .cancel(instances: ids, request: request)))
            for id in ids { dropped[id] = request.map { [$0] } ?? [] }
        }
        for id in instances {
            guard let handle = Self.handle(id) else { continue }
            if let request, scheduler.pendingReload(of: handle)?.requests.contains(request) != true { continue }
            guard let requests = scheduler.cancelPending(handle) else { continue }
            dropped[id] = requests
            // In the ledger beside each request's first decision, so that `explain` tells why nothing
            // was sent. (A pending reload lists its first 100 requests; merged ones beyond keep only
            // their `merged` decision.)
            for request in requests {
                batch.decisions.append(
                    Decision(request: request, instance: handle, kind: .cancelled, due: nil, reason: .cancelledByOperator)
                )
            }
        }
        if !dropped.isEmpty || !batch.forwards.isEmpty { try await waitForCommit() }
        return dropped
    }

    /// Makes the pending reloads of `instances` due now (exempt from the budget when `ignoringBudget`)
    /// and returns once that is committed: the instances that had one.
    func flush(instances given: [Int64], ignoringBudget: Bool) async throws -> [Int64] {
        try checkAccepting()
        let (instances, forwarded) = try await splitForOperator(given)
        for (partition, ids) in forwarded {
            batch.forwards.append(InboxEntry(partition: partition, work: .flush(instances: ids, ignoringBudget: ignoringBudget)))
        }
        let flushed = scheduler.flushPending(instances.compactMap(Self.handle), at: Timestamp(now()), ignoringBudget: ignoringBudget)
            .map { Int64($0.rawValue) }
        if !flushed.isEmpty || !forwarded.isEmpty { try await waitForCommit() }
        return flushed + forwarded.values.flatMap { $0 }
    }

    // MARK: Commit

    func waitForCommit() async throws {
        // After the last commit nothing would ever answer.
        if commitLoopEnded { throw SchedulerUnavailable() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            waiters.append { continuation.resume(with: $0) }
            inbox.wake()
        }
    }

    /// Asks the commit loop to look at the clock (the timer loop calls this when something fell due).
    func wake() {
        inbox.wake()
    }

    /// Milliseconds until the next timer by the engine's clock (0: due now); `nil` when none is set.
    func millisecondsUntilNextTimer() -> Int64? {
        scheduler.nextWakeUp.map { max(0, $0.milliseconds - Timestamp(now()).milliseconds) }
    }

    /// A sealed batch whose commit runs while the next batch is decided.
    private struct Flight {
        var batch: LedgerBatch
        var waiters: [@Sendable (Result<Void, any Error>) -> Void]
        var keys: [KeyName]
        var deliveries: [RecordedDelivery]
        var outcome: FlightOutcome
        var task: Task<Void, Never>
    }

    /// What a commit in flight came to: `nil` while it runs.
    private final class FlightOutcome: Sendable {
        let value = Mutex<(result: Result<Void, any Error>, took: Duration)?>(nil)
    }

    /// Commits everything gathered so far, with whatever fell due by now. Only the commit loop calls it.
    ///
    /// One commit runs at a time, and the engine decides what arrives while it runs into the next batch
    /// (the commits are pipelined): a commit starts as soon as the one before has committed, and its
    /// callers are answered after that. When a commit fails, the batch decided meanwhile (made on the
    /// failed one's state) is refused with it. Without `finishing`, it returns while a commit runs (the
    /// commit's end wakes the loop again); with it (the gateway stops), it waits until everything is
    /// committed.
    func commitPending(finishing: Bool = false) async {
        if isDegraded, flight == nil {
            // At most one attempt a second (the timer loop makes them): requests arriving in between are
            // refused at once instead of waiting for a probe that just failed.
            if lastRebuild.map({ $0.duration(to: .now) >= Self.rebuildInterval }) ?? true { await rebuild() }
            guard !isDegraded else { return refuseEverything(Self.degraded) }
        }
        while true {
            // The inbox is read only between commits: a commit in flight may delete rows it consumed.
            if partitioning != nil, flight == nil { await readForwardedWork() }
            await drainInbox()
            collectTick()
            if let current = flight {
                guard let (result, took) = current.outcome.value.withLock({ $0 }) else {
                    guard finishing else { return }
                    await current.task.value
                    continue
                }
                flight = nil
                if case .failure(let error) = result {
                    await fail(waiters: current.waiters, keys: current.keys, error: error)
                    return
                }
                // The next batch leaves before this one's callers are answered.
                startCommit()
                complete(current, took: took)
                continue
            }
            guard !batch.isEmpty || !waiters.isEmpty else { return }
            startCommit()
        }
    }

    /// Adds to the open batch what fell due by now and every instance state changed since the last tick.
    func collectTick() {
        let output = scheduler.tick(now: Timestamp(now()))
        record(output)
        for write in output.instanceStates {
            batch.instanceStates.append((Int64(write.instance.rawValue), write.snapshot))
        }
    }

    /// Seals the open batch and starts its commit (nothing when there is nothing to commit or wait for).
    private func startCommit() {
        guard !batch.isEmpty || !waiters.isEmpty else { return }
        if partitioning != nil { batch.fence = fence(of: batch) }
        let sealed = batch
        let outcome = FlightOutcome()
        let started = ContinuousClock.now
        let task = Task { [store, inbox] in
            let result: Result<Void, any Error>
            do {
                try await store.commit(sealed)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            outcome.value.withLock { $0 = (result, started.duration(to: .now)) }
            inbox.wake()
        }
        flight = Flight(batch: sealed, waiters: waiters, keys: batchKeys, deliveries: batchDeliveries, outcome: outcome, task: task)
        batch = LedgerBatch()
        openBatchGeneration = nil
        waiters = []
        batchKeys = []
        batchDeliveries = []
    }

    /// A batch committed: its callers are answered and its deliveries go to the delivery worker.
    private func complete(_ committed: Flight, took: Duration) {
        metrics.committed(in: took, pending: scheduler.pendingCount)
        metrics.decisionsCommitted(committed.batch.decisions)
        for waiter in committed.waiters { waiter(.success(())) }
        for name in committed.keys {
            guard let inFlight = inFlightKeys.removeValue(forKey: name) else { continue }
            if !inFlight.waiters.isEmpty, let answer = committed.batch.idempotentAnswers.first(where: {
                $0.app == name.app && $0.key == name.key
            }) {
                for waiter in inFlight.waiters { waiter(.success(.replay(status: answer.status, body: answer.response))) }
            }
        }
        if !committed.deliveries.isEmpty {
            metrics.deliveriesQueued(committed.deliveries.count)
            deliveries.yield(committed.deliveries)
        }
    }

    /// A commit failed: nothing of that batch is accepted, and the decisions made since depend on it,
    /// so every waiting caller gets the error and the scheduler is rebuilt from what the store holds.
    private func fail(waiters sealedWaiters: [@Sendable (Result<Void, any Error>) -> Void], keys: [KeyName], error: any Error) async {
        logger.error("commit failed; the requests of the batch are refused", metadata: ["error": "\(error)"])
        for waiter in sealedWaiters + waiters { waiter(.failure(error)) }
        for name in keys + batchKeys {
            for waiter in inFlightKeys.removeValue(forKey: name)?.waiters ?? [] { waiter(.failure(error)) }
        }
        waiters = []
        batchKeys = []
        batch = LedgerBatch()
        openBatchGeneration = nil
        batchDeliveries = []
        if case .fenced(let generation, let held) = error as? StoreError {
            // Another gateway took partitions over: forget those no longer held at once (the heartbeat
            // would within a second) and commit under the new generation from now on.
            let kept = Set(held)
            let lost = owned.keys.filter { !kept.contains($0) }.sorted()
            for partition in lost { owned[partition] = nil }
            fenceGeneration = max(fenceGeneration, generation)
            logger.warning(
                "partitions taken over by another gateway; the requests of the batch are refused",
                metadata: ["partitions": "\(lost)", "generation": "\(fenceGeneration)"]
            )
        }
        await rebuild()
    }

    /// Reloads the scheduler from the store; while that fails the engine is degraded (every request is
    /// refused; the timer loop and each new request try again).
    private func rebuild() async {
        lastRebuild = .now
        do {
            // A store that does not answer at all is not asked to load (its queries may wait a minute),
            // nor one that cannot commit now (a table locked, a full disk): requests would only wait for
            // a commit that fails at its deadline.
            guard await store.isReachable(within: Self.reachabilityTimeout) else {
                throw StoreError.unavailable(reason: "the database does not answer within \(Self.reachabilityTimeout)")
            }
            if let stuck = await store.commitProbe(within: Self.probeTimeout) {
                throw StoreError.unavailable(reason: stuck)
            }
            try await load()
            if isDegraded { logger.notice("the scheduler's state was reloaded from the store; requests are accepted again") }
            isDegraded = false
        } catch {
            if !isDegraded {
                // Once per outage: what is stuck (the database away, a table locked, the disk full).
                logger.error(
                    "the store cannot commit; requests are refused (503) and /ready answers 503 until it can",
                    metadata: ["error": "\(error)"]
                )
            }
            isDegraded = true
        }
    }

    /// What a degraded engine answers: the store is away (`503`; nothing was accepted).
    static let degraded = StoreError.unavailable(
        reason: "the scheduler's state cannot be reloaded from it; requests are refused until it can"
    )

    /// How long a degraded engine waits for the store to answer before it refuses what is queued.
    static let reachabilityTimeout: Duration = .seconds(2)
    /// How long a degraded engine's probe commit may wait for a lock before it refuses what is queued.
    static let probeTimeout: Duration = .milliseconds(500)

    /// Throws when no change may be made: stopping, or degraded (the state must be reloaded first).
    func checkAccepting() throws {
        if isStopping { throw SchedulerUnavailable() }
        if isDegraded { throw Self.degraded }
    }

    /// Refuses everything queued and waiting with `error` (degraded: nothing may be decided).
    private func refuseEverything(_ error: any Error) {
        for item in inbox.takeAll() {
            switch item {
            case .request(_, _, let reply): reply(.failure(error))
            case .adoption(let adoption): adoption.then(.failure(error))
            }
        }
        for waiter in waiters { waiter(.failure(error)) }
        for name in batchKeys {
            for waiter in inFlightKeys.removeValue(forKey: name)?.waiters ?? [] { waiter(.failure(error)) }
        }
        waiters = []
        batchKeys = []
        batch = LedgerBatch()
        openBatchGeneration = nil
        batchDeliveries = []
    }

    /// Adds what a tick released to the batch: deliveries (as `pending`, with their apns-id) and
    /// pending reloads that expired while waiting.
    private func record(_ output: TickOutput) {
        for delivery in output.deliveries {
            let recorded = RecordedDelivery(
                apnsID: apnsIDs.next(milliseconds: delivery.at.milliseconds),
                device: Int64(delivery.device.rawValue),
                released: delivery.at,
                instances: delivery.reloaded.map { Int64($0.instance.rawValue) },
                requests: Array(delivery.requests),
                requestCount: delivery.requestCount,
                priority: delivery.priority,
                expiration: delivery.expiration,
                state: .pending
            )
            batch.deliveries.append(recorded)
            batchDeliveries.append(recorded)
        }
        for expired in output.expired {
            for request in expired.requests {
                batch.decisions.append(
                    Decision(request: request, instance: expired.instance, kind: .expired, due: nil, reason: expired.reason)
                )
            }
        }
    }

    // MARK: Stopping

    /// Refuses new work; the commit loop commits what is gathered and ends, and the delivery stream ends.
    func stop() {
        isStopping = true
        // Requests already queued are still decided and committed; later ones are refused.
        inbox.close()
    }

    /// Ends the stream of deliveries (after the last commit).
    func finishDeliveries() {
        commitLoopEnded = true
        for waiter in waiters { waiter(.failure(SchedulerUnavailable())) }
        waiters = []
        deliveries.finish()
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

