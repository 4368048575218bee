import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// `ClusterMembership.handBack` on the in-memory shared store: the leases are released once the attempts
/// out in the partitions handed back have ended and the delivery states are written, or past the wait.
/// Each test turns the commit loop itself beside the hand-back, on a loop of its own (``OnALoopOfItsOwn``).
@Suite(.onALoopOfItsOwn) struct HandBackWaitTests {
    /// A gateway alone on the in-memory shared store, holding every partition; counts the delivery log's
    /// barriers and when each came. Its lease of 20 s and heartbeat of 7 s make a hand-back wait 2 s, as
    /// the defaults do, while the leases count as held for 16 s from each renewal (the hand-back renews
    /// them first): a loaded test run, whose first seconds can hold the concurrency pool for ten to twenty,
    /// does not make them lapse before the hand-back begins. A lease of 120 s makes the wait 82 s.
    struct Gateway {
        let store = InMemorySharedStore(clock: { Int64(Date().timeIntervalSince1970 * 1000) })
        let engine: SchedulerEngine
        let membership: ClusterMembership
        let metrics = GatewayMetrics()
        let barriers = Shared<[ContinuousClock.Instant]>([])

        init(leaseTime: Duration = .seconds(20)) async throws {
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            engine = SchedulerEngine(
                store: store, configuration: SchedulerConfiguration(), now: { Date() }, logger: logger, metrics: metrics,
                partitioning: SchedulerEngine.Partitioning(gateway: "g", store: store), monotonic: { .now },
                outlet: SchedulerEngine.DeliveryOutlet(yield: { _ in }, finish: {})
            )
            let barriers = barriers
            membership = ClusterMembership(
                gateway: "g", address: nil, store: store, engine: engine, logger: logger,
                leaseTime: leaseTime, heartbeatInterval: .seconds(7),
                deliveryStatesWritten: { barriers.withLock { $0.append(.now) } }, metrics: metrics
            )
            try await engine.load()
            _ = try await membership.renew()
            await engine.partitionLoadEnded()
        }

        /// A delivery to a device of partition 1023, which a second gateway's arrival makes surplus (the
        /// highest partitions are handed back first).
        static let delivery = RecordedDelivery(
            apnsID: "out-at-apple", device: 1023, released: Timestamp(milliseconds: 0), instances: [1], requests: [1],
            priority: .high, expiration: nil, state: .sending
        )

        /// A second gateway beats; this one's heartbeat then names its surplus. Hands it back with the
        /// commit loop turning, and returns how long the hand-back took. The turns allow a minute: a turn
        /// reads the inbox in a task of its own (``abandoning(after:timedOut:returnOnCancel:_:)``), on the
        /// concurrency pool whatever loop the test prefers, and a run's first seconds can hold the pool for
        /// twenty.
        func handBack() async throws -> Duration {
            _ = try await store.heartbeat(gateway: "h", address: nil, startedAt: 0, leaseMilliseconds: 20_000, now: nil)
            let surplus = try await membership.renew()
            try #require(surplus[1023] != nil)
            let done = Atomic(false)
            let started = ContinuousClock.now
            // The hand-back waits for a commit that only a turn makes.
            async let turns: Void = BesideTheCommitLoopTests.turns(of: engine, within: Self.turnsLimit, pastDeadline: .stopTheEngine) {
                done.load(ordering: .relaxed)
            }
            try await membership.handBack(surplus)
            let took = started.duration(to: .now)
            done.store(true, ordering: .relaxed)
            try await turns
            return took
        }

        /// How long the turns beside a hand-back go on before they stop the engine and fail the test.
        static let turnsLimit = Duration.seconds(60)

        /// Whether the second gateway can take partition 1023 now.
        func released() async throws -> Bool {
            try await store.heartbeat(gateway: "h", address: nil, startedAt: 0, leaseMilliseconds: 20_000, now: nil).held[1023] != nil
        }

        var attemptsLeftOut: Double? {
            PrometheusText(String(decoding: metrics.exposition(), as: UTF8.self))["reloadgate_hand_back_attempts_out_total"]
        }
    }

    @Test func theLeasesAreReleasedOnceTheAttemptOutHasEndedAndItsStateIsWritten() async throws {
        // A wait of 82 s, which the hand-back must not reach: the attempt ends 300 ms in. The turns beside
        // it stop at a minute, three times what a full run's crowd added to the hand-back's steps (about
        // 20 s in both rounds of a CI run); only a wait waited out goes past that.
        let gateway = try await Gateway(leaseTime: .seconds(120))
        #expect(gateway.membership.handBackWait == .seconds(82))
        #expect(gateway.membership.beginAttempt(Gateway.delivery))
        let ended = Shared<ContinuousClock.Instant?>(nil)
        // The push service's answer 300 ms into the hand-back, on the test's loop (a child task): a
        // `Task { }` ran on the run's crowded pool.
        async let answer: Void = {
            try await Task.sleep(for: .milliseconds(300))
            ended.withLock { $0 = .now }
            gateway.membership.endAttempt(Gateway.delivery)
        }()
        let took = try await gateway.handBack()
        try await answer
        #expect(took < gateway.membership.handBackWait, "\(took)")
        // The delivery log's barrier, and so the release after it, came after the attempt ended.
        let end = try #require(ended.withLock { $0 })
        #expect(gateway.barriers.withLock { $0.count == 1 && $0[0] >= end })
        #expect(try await gateway.released())
        #expect(gateway.attemptsLeftOut == nil)
    }

    @Test func pastTheWaitTheLeasesAreReleasedAndTheAttemptsLeftOutCounted() async throws {
        let gateway = try await Gateway()
        #expect(gateway.membership.handBackWait == .seconds(2))   // as with the default lease and heartbeat
        #expect(gateway.membership.beginAttempt(Gateway.delivery))
        let took = try await gateway.handBack()
        // From below exactly; from above within the turns' own limit, which leaves the crowd its seconds.
        #expect(took >= .seconds(2) && took < Gateway.turnsLimit, "\(took)")
        #expect(gateway.barriers.withLock { $0.count } == 1)
        #expect(try await gateway.released())
        #expect(gateway.attemptsLeftOut == 1)
        // No attempt begins for a partition handed back.
        #expect(!gateway.membership.beginAttempt(Gateway.delivery))
    }
}
