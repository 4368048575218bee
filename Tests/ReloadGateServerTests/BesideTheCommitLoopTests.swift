import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// What reads the store at length runs beside the commit loop, not in its turn: a partition taken by a
/// heartbeat is loaded, and a degraded engine's state rebuilt, while the loop goes on answering. Their
/// reads are held (a connection that died under a scan, a slow database) and the requests meanwhile must
/// be answered: decided, or refused at once while the engine is degraded.
@Suite struct BesideTheCommitLoopTests {
    enum Answer: Equatable {
        case accepted
        case refused(String)

        var isAccepted: Bool { self == .accepted }
    }

    /// The in-memory shared store with two devices in two partitions, and an engine of one gateway that
    /// holds every partition.
    struct Cluster {
        let store = InMemorySharedStore(clock: { Int64(Date().timeIntervalSince1970 * 1000) })
        let app: App
        let scheduled: (device: Int64, instances: [Int64])
        let taken: (device: Int64, instances: [Int64])
        let engine: SchedulerEngine
        let membership: ClusterMembership

        /// `monotonic`: the engine's clock of its own intervals (the inbox's once-a-second read among them).
        init(monotonic: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) async throws {
            app = App(
                id: 1, bundle: try BundleID("com.example.beside"), environment: .production, teamID: "TEAM123456",
                allowsExemptions: false, createdAt: Date()
            )
            scheduled = try store.register(app: app.id, token: Self.token(1), kinds: ["scores"], now: Timestamp(Date()))
            taken = try store.register(app: app.id, token: Self.token(2), kinds: ["scores"], now: Timestamp(Date()))
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            engine = SchedulerEngine(
                store: store, configuration: SchedulerConfiguration(), now: { Date() }, logger: logger, metrics: GatewayMetrics(),
                partitioning: SchedulerEngine.Partitioning(gateway: "g", store: store), monotonic: monotonic,
                outlet: SchedulerEngine.DeliveryOutlet(yield: { _ in }, finish: {})
            )
            membership = ClusterMembership(
                gateway: "g", address: nil, store: store, engine: engine, logger: logger,
                leaseTime: .seconds(120), heartbeatInterval: .seconds(1)
            )
            try await engine.load()
            _ = try await membership.renew()
            await engine.partitionLoadEnded()
        }

        static func token(_ number: Int) -> String {
            String(repeating: "0", count: 48) + String(format: "%016x", number)
        }

        /// A push to `device`'s instances; its answer goes to `answers` under `label`.
        func push(to device: (device: Int64, instances: [Int64]), _ label: String, answers: Shared<[String: Answer]>) {
            let command = ReloadCommand(
                app: app, source: .push, targets: device.instances, targetDevices: device.instances.map { _ in device.device },
                priority: .high, expiration: nil, collapseID: nil, team: app.teamID, exempt: false, summary: label,
                received: Timestamp(Date()), idempotency: nil
            )
            engine.enqueue(command, render: { _, _ in (200, "") }) { result in
                let answer: Answer =
                    switch result {
                    case .success(.decided): .accepted
                    case .success(let other): .refused("\(other)")
                    case .failure(let error): .refused("\(error)")
                    }
                answers.withLock { $0[label] = answer }
            }
        }

        /// A push another gateway took and forwarded to `device`'s partition: its request row, and the work
        /// in the inbox.
        func forwardFromAnotherGateway(id: RequestID, to device: (device: Int64, instances: [Int64])) async throws -> (id: RequestID, work: ForwardedWork) {
            let received = Timestamp(Date())
            let work = ForwardedWork.request(
                ForwardedRequest(
                    id: id, targets: device.instances, priority: Priority.high.rawValue, expiration: nil, collapseID: nil,
                    team: app.teamID, exempt: false, received: received.milliseconds
                )
            )
            var batch = LedgerBatch()
            batch.requests = [
                RecordedRequest(
                    id: id, app: app.id, source: .push, received: received, priority: .high, expiration: nil, collapseID: nil,
                    exempt: false, summary: "forwarded"
                )
            ]
            batch.forwards = [InboxEntry(partition: DevicePartition.of(device: device.device), work: work)]
            try await store.commit(batch)
            return (id, work)
        }

        /// Makes the engine degraded: a commit fails (a table locked). (A push first, to take a block of
        /// request ids: without one the request is refused before its commit.)
        func degrade(answers: Shared<[String: Answer]>) async throws {
            push(to: scheduled, "first", answers: answers)
            try await BesideTheCommitLoopTests.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["first"] } != nil }
            #expect(answers.withLock { $0["first"]?.isAccepted } == true)
            store.fault = .locked
            push(to: scheduled, "failed", answers: answers)
            try await BesideTheCommitLoopTests.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["failed"] } != nil }
            #expect(answers.withLock { $0["failed"]?.isAccepted } == false)
            #expect(await engine.isDegraded)
        }

        /// Holds the store's partition reads; after 20 s lets them go and notes it (a turn that waited for
        /// them; 20 s, since beside the whole suite a turn can wait seconds for a thread).
        func holdReads() -> (waited: Shared<Bool>, watchdog: Task<Void, any Error>) {
            store.partitionReadHold.hold()
            let waited = Shared(false)
            let store = store
            let watchdog = Task {
                try await Task.sleep(for: .seconds(20))
                waited.withLock { $0 = true }
                store.partitionReadHold.release()
            }
            return (waited, watchdog)
        }
    }

    @Test func aPartitionLoadThatDoesNotAnswerHoldsUpNoRequest() async throws {
        let cluster = try await Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let takenPartition = DevicePartition.of(device: cluster.taken.device)
        #expect(DevicePartition.of(device: cluster.scheduled.device) != takenPartition)
        #expect(await engine.ownedPartitions.count == DevicePartition.partitionCount)

        // The taken device's partition is let go and taken again; its load's reads do not answer.
        let epoch = try #require(cluster.membership.leases[takenPartition])
        await engine.giveUp([takenPartition], handingBack: false)
        let (waitedForTheLoad, watchdog) = cluster.holdReads()
        await engine.takeOver([takenPartition: epoch])
        try await Self.wait(within: .seconds(30)) { store.partitionReadHold.waiting == 1 || waitedForTheLoad.withLock { $0 } }

        // A push to each device: both answered while the load waits.
        let answers = Shared<[String: Answer]>([:])
        cluster.push(to: cluster.scheduled, "scheduled", answers: answers)
        cluster.push(to: cluster.taken, "taken", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0.count } == 2 }
        watchdog.cancel()
        #expect(!waitedForTheLoad.withLock { $0 })
        #expect(store.partitionReadHold.waiting == 1)
        #expect(answers.withLock { $0.values.allSatisfy(\.isAccepted) })
        let decided = store.ledger.decisions
        #expect(decided.contains { $0.instance?.rawValue == Int32(cluster.scheduled.instances[0]) && $0.kind != .forwarded })
        #expect(decided.filter { $0.instance?.rawValue == Int32(cluster.taken.instances[0]) }.map(\.kind) == [.forwarded])

        // Once the reads answer, the partition is scheduled here and the forwarded push decided from its inbox.
        store.partitionReadHold.release()
        await engine.partitionLoadEnded()
        #expect(await engine.ownedPartitions[takenPartition] == epoch)
        try await Self.turns(of: engine, within: .seconds(30)) {
            store.ledger.decisions.contains { $0.instance?.rawValue == Int32(cluster.taken.instances[0]) && $0.kind != .forwarded }
        }
    }

    /// After an outage the partitions are loaded again, and their inbox may hold pushes other gateways
    /// forwarded and answered meanwhile. A push taken here before an inbox read has found them goes to the
    /// inbox behind them, also when the first read after the reload fails (the reload marks the partitions
    /// as catching up; without the mark the new push would be decided first).
    @Test func aPartitionReloadedAfterAnOutageDecidesItsInboxBeforeNewPushes() async throws {
        let cluster = try await Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let answers = Shared<[String: Answer]>([:])
        try await cluster.degrade(answers: answers)
        store.fault = nil
        let decidedBefore = store.ledger.decisions.count
        let older = try await cluster.forwardFromAnotherGateway(id: 1_000_000_001, to: cluster.scheduled)
        // The inbox's reads do not answer (each is abandoned at its deadline) until the new push is taken.
        store.inboxReadHold.hold()
        try await Self.turnsWhileDegraded(engine, within: .seconds(30))
        #expect(await !engine.isDegraded)
        cluster.push(to: cluster.scheduled, "newer", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["newer"] } != nil }
        #expect(answers.withLock { $0["newer"]?.isAccepted } == true)
        #expect(store.inboxReadHold.begun > 0)
        store.inboxReadHold.release()

        let instance = Int32(cluster.scheduled.instances[0])
        try await Self.turns(of: engine, within: .seconds(30)) {
            store.ledger.decisions.contains { $0.request == older.id && $0.kind != .forwarded }
        }
        // (The first decision of each push for the widget, as the simulation's order check reads them.)
        let first = store.ledger.decisions[decidedBefore...].first { $0.instance?.rawValue == instance && ClusterSimulation.initialKinds.contains($0.kind) }
        #expect(first?.request == older.id, "the push forwarded before the outage's reload is decided first")
    }

    @Test func aRebuildThatDoesNotAnswerHoldsUpNoAnswer() async throws {
        let cluster = try await Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let answers = Shared<[String: Answer]>([:])
        try await cluster.degrade(answers: answers)

        // The database is back, and the rebuild's reads do not answer.
        store.fault = nil
        let (waitedForTheRebuild, watchdog) = cluster.holdReads()
        try await Self.turns(of: engine, within: .seconds(30)) {
            store.partitionReadHold.waiting == 1 || waitedForTheRebuild.withLock { $0 }
        }
        // A push meanwhile is refused at once (503), not held for the rebuild.
        cluster.push(to: cluster.scheduled, "refused", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["refused"] } != nil }
        watchdog.cancel()
        #expect(!waitedForTheRebuild.withLock { $0 })
        #expect(answers.withLock { $0["refused"]?.isAccepted } == false)

        // Once the reads answer, the rebuild ends and requests are accepted again.
        store.partitionReadHold.release()
        await engine.rebuildEnded()
        #expect(await !engine.isDegraded)
        cluster.push(to: cluster.scheduled, "accepted", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["accepted"] } != nil }
        #expect(answers.withLock { $0["accepted"]?.isAccepted } == true)
    }

    /// The store found away by a write beside the loop (the registry's group commit, ``SchedulerEngine/storeFailed(_:)``)
    /// while nothing had been decided since the last commit: the engine refuses while the store cannot
    /// commit, and accepts again once a probe commits, without reading its state again (the store's reads
    /// are held here: a reload would wait for them, as it does after a failed commit above).
    @Test func aStoreFoundAwayWithNothingDecidedComesBackWithoutAReload() async throws {
        let cluster = try await Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let answers = Shared<[String: Answer]>([:])
        cluster.push(to: cluster.scheduled, "first", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["first"] } != nil }
        #expect(answers.withLock { $0["first"]?.isAccepted } == true)

        store.fault = .locked
        await engine.storeFailed(.unavailable(reason: "a registry write met the lock"))
        #expect(await engine.isDegraded)
        cluster.push(to: cluster.scheduled, "refused", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["refused"] } != nil }
        #expect(answers.withLock { $0["refused"]?.isAccepted } == false)

        let generation = await engine.stateGeneration
        store.fault = nil
        let (waitedForAReload, watchdog) = cluster.holdReads()
        defer {
            watchdog.cancel()
            store.partitionReadHold.release()
        }
        // The next attempt (at most one a second) probes, finds the store able to commit, and ends.
        try await Self.turnsWhileDegraded(engine, within: .seconds(30))
        #expect(await !engine.isDegraded)
        #expect(await engine.stateGeneration == generation, "the state was loaded again")
        #expect(store.partitionReadHold.waiting == 0)
        #expect(!waitedForAReload.withLock { $0 })
        cluster.push(to: cluster.scheduled, "accepted", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["accepted"] } != nil }
        #expect(answers.withLock { $0["accepted"]?.isAccepted } == true)
    }

    /// The store found away beside the loop while a commit is in flight that then succeeds (a
    /// registration's write waited for a locked device table, which the ledger's commit does not touch):
    /// the commit's caller is accepted, and the engine degrades when the commit ends, as it does at once
    /// with nothing in flight. Without this the engine stayed accepting and `/ready` said 200 while no
    /// registration could be written (StoreDeadlineTests' registration test failed in a loaded CI run).
    @Test func aStoreFoundAwayDuringACommitDegradesTheEngineWhenTheCommitEnds() async throws {
        let cluster = try await Cluster()
        let engine = cluster.engine
        let answers = Shared<[String: Answer]>([:])
        cluster.push(to: cluster.scheduled, "first", answers: answers)
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["first"] } != nil }
        #expect(answers.withLock { $0["first"]?.isAccepted } == true)

        // A push sealed into a commit that has not run yet; the registry's write fails meanwhile.
        cluster.push(to: cluster.scheduled, "in flight", answers: answers)
        let turn = await engine.commitTurn()
        let commit = try #require(turn.commit)
        await engine.storeFailed(.unavailable(reason: "a registry write met a locked table"))
        #expect(await !engine.isDegraded, "the commit in flight decides first")
        await engine.perform(commit)
        turn.answer()
        cluster.push(to: cluster.scheduled, "after", answers: answers)
        await Self.turn(of: engine)
        #expect(await engine.isDegraded, "accepting after the store was found away")
        try await Self.turns(of: engine, within: .seconds(30)) { answers.withLock { $0.count } == 3 }
        #expect(answers.withLock { $0["in flight"]?.isAccepted } == true, "the commit in flight succeeded")
        #expect(answers.withLock { $0["after"]?.isAccepted } == false)

        // Nothing decided was dropped and the write stored nothing: a probe that commits ends it.
        let generation = await engine.stateGeneration
        try await Self.turnsWhileDegraded(engine, within: .seconds(30))
        #expect(await !engine.isDegraded)
        #expect(await engine.stateGeneration == generation, "the state was loaded again")
    }

    /// A stopping gateway's commit loop ends after the rebuild in progress, not before: the rebuild reads
    /// and probes the store, which the gateway closes once the loop has ended (on SQLite a probe after the close
    /// would reach a closed connection).
    @Test func theCommitLoopEndsAfterTheRebuildInProgress() async throws {
        let cluster = try await Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let answers = Shared<[String: Answer]>([:])
        try await cluster.degrade(answers: answers)
        store.fault = nil
        let (waitedForTheRebuild, watchdog) = cluster.holdReads()
        defer { watchdog.cancel() }
        try await Self.turns(of: engine, within: .seconds(30)) {
            store.partitionReadHold.waiting == 1 || waitedForTheRebuild.withLock { $0 }
        }

        await engine.stop()
        let ended = Shared(false)
        let loop = Task {
            await DoorService.commitLoop(engine: engine, readiness: Readiness())
            ended.withLock { $0 = true }
        }
        try await Task.sleep(for: .seconds(1))
        #expect(!ended.withLock { $0 }, "the commit loop ended while the rebuild still read the store")
        store.partitionReadHold.release()
        await loop.value
        #expect(!waitedForTheRebuild.withLock { $0 })
        #expect(store.partitionReadHold.waiting == 0)
    }

    /// A partition load that fails (the database away) is begun again a second later at the earliest,
    /// not at every turn, and the partition is scheduled once it can be read.
    @Test func aPartitionLoadThatFailsIsTriedAgainOnceASecond() async throws {
        let cluster = try await Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let partition = DevicePartition.of(device: cluster.taken.device)
        let epoch = try #require(cluster.membership.leases[partition])
        await engine.giveUp([partition], handingBack: false)
        store.fault = .down
        let before = store.partitionReadHold.begun
        await engine.takeOver([partition: epoch])
        await engine.partitionLoadEnded()
        #expect(await engine.ownedPartitions[partition] == nil)
        // Turns every 10 ms for half a second: at most one load begun again (one a second; a turn held
        // up by a loaded machine may reach the second), not one a turn.
        let quiet = ContinuousClock.now + .milliseconds(500)
        while ContinuousClock.now < quiet {
            await Self.turn(of: engine)
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(store.partitionReadHold.begun - before <= 2, "\(store.partitionReadHold.begun - before) loads begun")
        store.fault = nil
        // (A bound, not a figure: beside the whole suite the turns wait seconds for a thread.)
        let deadline = ContinuousClock.now + .seconds(30)
        while await engine.ownedPartitions[partition] != epoch, ContinuousClock.now < deadline {
            await Self.turn(of: engine)
            await engine.partitionLoadEnded()
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await engine.ownedPartitions[partition] == epoch)
    }

    /// A heartbeat that loses a partition while a rebuild's reads run: the rebuilt state does not schedule
    /// its instances (they are the next owner's).
    @Test func aPartitionLostDuringARebuildIsNotScheduledByIt() async throws {
        let cluster = try await Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        try await cluster.degrade(answers: Shared<[String: Answer]>([:]))

        store.fault = nil
        let (_, watchdog) = cluster.holdReads()
        try await Self.turns(of: engine, within: .seconds(30)) { store.partitionReadHold.waiting == 1 }
        let lost = DevicePartition.of(device: cluster.taken.device)
        await engine.giveUp([lost], handingBack: false)
        store.partitionReadHold.release()
        watchdog.cancel()
        await engine.rebuildEnded()
        #expect(await !engine.isDegraded)
        let instance = try #require(SchedulerEngine.handle(cluster.taken.instances[0]))
        let kept = try #require(SchedulerEngine.handle(cluster.scheduled.instances[0]))
        #expect(await !engine.scheduler.isRegistered(instance))
        #expect(await engine.scheduler.isRegistered(kept))
    }

    /// What turns of the commit loop do at their deadline.
    enum PastDeadline {
        /// Throw ``TimedOut`` at once: nothing waits for the turns.
        case fail
        /// Stop the engine, which answers whoever waits for a commit, go on turning until `done`, then
        /// throw ``TimedOut``. For turns beside a caller that waits for a commit only a turn makes (a
        /// hand-back, the worker's mark): turns that stopped first would leave it waiting for ever, and the
        /// test run with it (docs/TESTING.md).
        case stopTheEngine
    }

    /// Runs the commit loop's turns (each commit in turn, as ``DoorService``'s loop does) until `done`, or
    /// until the deadline as `pastDeadline` says.
    static func turns(
        of engine: SchedulerEngine, within limit: Duration, pastDeadline: PastDeadline = .fail, until done: @Sendable () -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + limit
        var timedOut = false
        while !done() {
            if !timedOut, ContinuousClock.now >= deadline {
                guard pastDeadline == .stopTheEngine else { throw TimedOut() }
                timedOut = true
                await engine.stop()
            }
            await turn(of: engine)
            try await Task.sleep(for: .milliseconds(10))
        }
        if timedOut { throw TimedOut() }
    }

    /// One turn of the commit loop, with the commit it starts (as ``DoorService``'s loop runs it).
    static func turn(of engine: SchedulerEngine) async {
        let turn = await engine.commitTurn()
        if let commit = turn.commit { await engine.perform(commit) }
        turn.answer()
    }

    /// Turns of the loop while the engine is degraded (its attempts to rebuild, at most one a second), for
    /// at most `limit`; then waits for the attempt in progress.
    static func turnsWhileDegraded(_ engine: SchedulerEngine, within limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        while await engine.isDegraded, ContinuousClock.now < deadline {
            await turn(of: engine)
            try await Task.sleep(for: .milliseconds(10))
        }
        await engine.rebuildEnded()
    }

    static func wait(within limit: Duration, until done: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while !done() {
            guard ContinuousClock.now < deadline else { throw TimedOut() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    struct TimedOut: Error {}
}
