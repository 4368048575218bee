import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization

@testable import ReloadGateServer

/// A value the engine's callbacks set and the simulation reads.
final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result { value.withLock { body(&$0) } }
}

/// The simulation's clock: milliseconds since the start, moved only by the simulation. Every engine, every
/// cluster membership and the store read it (as a date, as a monotonic instant, as the database's time).
final class VirtualClock: Sendable {
    private let elapsed = Mutex<Int64>(0)
    private let base = ContinuousClock.now
    /// 2026-01-01, so that timestamps look like times.
    static let epoch: Int64 = 1_767_225_600_000

    var milliseconds: Int64 { Self.epoch + elapsed.withLock { $0 } }
    var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
    var instant: ContinuousClock.Instant { base + .milliseconds(elapsed.withLock { $0 }) }

    func advance(by milliseconds: Int64) {
        elapsed.withLock { $0 += milliseconds }
    }
}

/// One gateway of the simulated cluster: the real ``SchedulerEngine`` and ``ClusterMembership`` over the
/// shared in-memory store, driven step by step. What the gateway's tasks do concurrently (the commit
/// loop, the commit in flight, the heartbeat, the delivery worker) the simulation does as separate events,
/// in the order the seed chose.
final class SimulatedGateway {
    let index: Int
    /// The gateway's id (a restarted gateway is a new one, as in production).
    let id: String
    let engine: SchedulerEngine
    let membership: ClusterMembership
    /// What the worker holds (the real worker's bookkeeping: a delivery handed over again while held is
    /// not taken twice).
    let held = HeldDeliveries()
    /// Deliveries the engine released, waiting for the worker (``SimulatedEvent/send(gateway:)``).
    let released = Shared<[RecordedDelivery]>([])
    /// The commit the loop started and the simulation has not ended yet.
    var inFlight: SchedulerEngine.PendingCommit?
    /// Leases being handed back, waiting for the commit of what was decided for them (the heartbeat waits
    /// meanwhile, as ``ClusterMembership/beat()`` does).
    var handingBack: (leases: [Int: Int64], committed: Shared<Bool>)?
    /// Sent, but the `sent` state could not be written yet (the store failed): retried with the next send.
    var unrecorded: [RecordedDelivery] = []
    var isAlive = true
    var isPaused = false

    init(index: Int, id: String, store: InMemorySharedStore, clock: VirtualClock, configuration: SchedulerConfiguration) {
        self.index = index
        self.id = id
        var logger = Logger(label: "simulation.\(id)")
        logger.logLevel = .critical
        let released = released
        engine = SchedulerEngine(
            store: store,
            configuration: configuration,
            now: { clock.date },
            logger: logger,
            metrics: Self.metrics,
            partitioning: SchedulerEngine.Partitioning(gateway: id, store: store),
            monotonic: { clock.instant },
            outlet: SchedulerEngine.DeliveryOutlet(yield: { deliveries in released.withLock { $0 += deliveries } }, finish: {})
        )
        membership = ClusterMembership(
            gateway: id, address: nil, store: store, engine: engine, logger: logger,
            leaseTime: .seconds(5), heartbeatInterval: .seconds(1), monotonic: { clock.instant }
        )
    }

    /// One set of metrics for every simulated gateway (they are not looked at; making them costs more than a step).
    static let metrics = GatewayMetrics()

    /// Whether events reach it.
    var isRunning: Bool { isAlive && !isPaused }
}
