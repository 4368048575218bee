import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore

/// The one door in front of the gateway's state (docs/DECISIONS.md, "The door").
///
/// Every change of state is a command (``GatewayCommand``: a device put or deleted, a timeline, Apple's
/// 410, a key, an app, a cancel, a flush; reload requests through ``reload(_:render:)`` and
/// ``enqueue(_:render:reply:)``, delivery state changes through ``DeliveryReports``). The door commits the
/// change to the store, then applies it to the scheduler and to the caches that hold what changed, and
/// returns a typed outcome that the route, the ingress handler, the worker or the CLI renders. Nothing
/// else holds the store as ``GatewayStore``: the rest of the server reads through ``reader``.
///
/// The door owns the caches (apps, provider keys, devices of the push path) and the scheduler
/// (``SchedulerEngine``, with the group commit and idempotency), so a change takes effect everywhere it
/// matters before its caller is answered.
final class GatewayDoor: Sendable {
    /// The state, read-only, for routes, handlers and the worker.
    let reader: any GatewayStoreReading
    /// Apps by bundle and API key, for the routes and the push path.
    let apps: AppDirectory
    /// Provider keys, for the token verifier.
    let keys: ProviderKeyDirectory
    /// Devices' status and default targets on the push path; webhook targets (``RegistryCache``).
    let registryCache: RegistryCache
    let logger: Logger
    let now: @Sendable () -> Date

    let store: any GatewayStore
    let engine: SchedulerEngine
    /// Several gateways on one database: this gateway's id and the shared store (`nil`: one gateway).
    let partitioning: GatewayCluster?
    /// Delivery state changes, written in group commits.
    let deliveryStates: DeliveryStateLog
    /// Device registrations and timelines, written in group commits.
    let registry: RegistryLog

    init(
        store: any GatewayStore,
        scheduling: SchedulerConfiguration,
        now: @escaping @Sendable () -> Date,
        logger: Logger,
        metrics: GatewayMetrics = GatewayMetrics(),
        partitioning: GatewayCluster? = nil,
        keptAnswerCapacity: Int = SchedulerEngine.defaultKeptAnswerCapacity,
        onDegraded: @escaping @Sendable () -> Void = {}
    ) {
        self.partitioning = partitioning
        self.store = store
        self.reader = store
        self.now = now
        self.logger = logger
        self.apps = AppDirectory(store: store)
        self.keys = ProviderKeyDirectory(store: store, logger: logger)
        self.registryCache = RegistryCache()
        self.engine = SchedulerEngine(
            store: store, configuration: scheduling, now: now, logger: logger, metrics: metrics,
            partitioning: partitioning.map { SchedulerEngine.Partitioning(gateway: $0.gateway, store: $0.store) },
            keptAnswerCapacity: keptAnswerCapacity, onDegraded: onDegraded
        )
        self.deliveryStates = DeliveryStateLog(store: store, now: now, logger: logger)
        self.registry = RegistryLog(store: store, engine: engine, registryCache: registryCache, now: now, logger: logger)
    }

    /// Carries out a command and returns its outcome once it is committed and applied.
    func execute<Command: GatewayCommand>(_ command: Command) async throws -> Command.Outcome {
        try await command.execute(at: self)
    }

    // MARK: Reload requests

    /// A webhook reload: decided, committed, answered (idempotency keys are handled here).
    func reload(_ submission: ReloadCommand, render: @escaping SchedulerEngine.Render) async throws
        -> SchedulerEngine.Outcome
    {
        try await engine.submit(submission, render: render)
    }

    /// A push: handed over from the event loop without waiting; `reply` is called after its commit.
    func enqueue(
        _ submission: ReloadCommand,
        render: @escaping SchedulerEngine.Render,
        reply: @escaping SchedulerEngine.Reply
    ) {
        engine.enqueue(submission, render: render, reply: reply)
    }

    /// Adopts a device by its first push (`ingress.unknownDevices: adopt`): written in the registry's
    /// group commit (beside the scheduler's commit loop, with other adoptions and registrations),
    /// registered with the scheduler, forgotten by the push path's cache; then `then` gets the device.
    func adopt(
        app: App,
        token: DeviceToken,
        pushType: PushType,
        pushToStart: Bool = false,
        then: @escaping @Sendable (Result<AdoptedDevice, any Error>) -> Void
    ) {
        registry.enqueue(.adoptDevice(app: app, token: token, pushType: pushType, pushToStart: pushToStart)) { result in
            then(result.flatMap { written in
                guard case .adopted(let adopted) = written else { return .failure(StoreError.corrupt(reason: "an adoption wrote no device")) }
                return .success(adopted)
            })
        }
    }

    /// Loads the scheduler from the store (when the gateway runs, before anything listens).
    func load() async throws {
        try await engine.load()
        try await engine.loadKeptAnswers()
    }

    // MARK: Reads of the scheduler's state

    /// Why each of `instances` waits now (those without a pending reload are left out). On a shared store,
    /// instances another gateway schedules are answered from their stored state.
    func pendingWaits(_ instances: [Int64]) async -> [Int64: PendingWait] {
        var waits = await engine.pendingWaits(instances)
        let others = await engine.notScheduledHere(instances)
        guard !others.isEmpty, let (scheduler, time) = await storedScheduler(others) else { return waits }
        for id in others {
            if let handle = SchedulerEngine.handle(id), let wait = scheduler.pendingWait(of: handle, at: time) { waits[id] = wait }
        }
        return waits
    }

    /// How full the budgets of the instances this gateway schedules are now, by policy, with the `lowest`
    /// instances that have the fewest tokens (the dashboard; on a shared store, this gateway's partitions).
    func budgetUse(lowest: Int) async -> BudgetUse {
        await engine.budgetUse(lowest: lowest)
    }

    /// The budgets of `instances` now (unregistered ones are left out); on a shared store, those of
    /// instances another gateway schedules from their stored state.
    func budgets(_ instances: [Int64]) async -> [Int64: BudgetView] {
        var budgets = await engine.budgets(instances)
        let others = await engine.notScheduledHere(instances)
        guard !others.isEmpty, let (scheduler, time) = await storedScheduler(others) else { return budgets }
        for id in others {
            if let handle = SchedulerEngine.handle(id), let budget = scheduler.budget(of: handle, at: time) { budgets[id] = budget }
        }
        return budgets
    }

    /// A scheduler holding only `instances`, restored from the store (their owner's last commit), and the
    /// time to read it at; `nil` with one gateway or when the store cannot be read.
    private func storedScheduler(_ instances: [Int64]) async -> (ReloadScheduler, Timestamp)? {
        guard let partitioning else { return nil }
        do {
            let state = try await partitioning.store.schedulingState(instances: instances)
            var scheduler = ReloadScheduler(configuration: engine.configuration)
            try SchedulerEngine.restore(state.instances, state.snapshots, into: &scheduler)
            return (scheduler, Timestamp(now()))
        } catch {
            logger.warning("cannot read the stored state of instances scheduled by another gateway", metadata: ["error": "\(error)"])
            return nil
        }
    }
}

/// What the delivery worker reports to the door: each delivery's way (pending -> sending -> sent |
/// failed) and devices Apple answered 410 for.
protocol DeliveryReports: Sendable {
    /// Queues a state change; written with the next batch.
    func record(_ change: DeliveryStateChange)
    /// Queues state changes and returns once they are committed (a `sending` mark before the request leaves).
    func recordDurably(_ changes: [DeliveryStateChange]) async throws
    /// Apple answered 410 for the device: unregistered since `since` (Apple's timestamp, or now).
    func markUnregistered(device: Int64, since: Timestamp) async
    /// The push service (or the outbox) took `delivery` at `at`: the requests it serves are served; or
    /// (`failed`) refused it for good: they never will be.
    func served(_ delivery: RecordedDelivery, at: Timestamp, failed: Bool)
}

extension GatewayDoor: DeliveryReports {
    func served(_ delivery: RecordedDelivery, at: Timestamp, failed: Bool) {
        engine.freshness.delivered(instances: delivery.instances, released: delivery.released, at: at, failed: failed)
    }

    func record(_ change: DeliveryStateChange) {
        deliveryStates.record(change)
    }

    func recordDurably(_ changes: [DeliveryStateChange]) async throws {
        try await deliveryStates.recordDurably(changes)
    }

    func markUnregistered(device: Int64, since: Timestamp) async {
        do {
            let dropped = try await execute(MarkUnregistered(device: device, since: since))
            if let dropped, !dropped.isEmpty {
                logger.info(
                    "pending reloads dropped: device unregistered by Apple",
                    metadata: ["device-id": "\(device)", "instances": "\(dropped.keys.sorted())"]
                )
            }
        } catch {
            logger.error("cannot mark a device unregistered", metadata: ["device-id": "\(device)", "error": "\(error)"])
        }
    }
}
