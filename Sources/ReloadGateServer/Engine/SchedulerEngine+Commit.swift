import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The engine's group commit, performed for ``CommitPipeline``: the commit loop's turn, sealing, the
/// commit itself (a child task of the loop), answering, failing and rebuilding, stopping.
extension SchedulerEngine {
    func waitForCommit() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            waitForCommit { continuation.resume(with: $0) }
        }
    }

    /// Calls `waiter` once the open batch has committed (or failed). Refused at once after the last
    /// commit, or while degraded: nothing would answer.
    func waitForCommit(_ waiter: @escaping Waiter) {
        perform(pipeline.wait(waiter))
        inbox.wake()
    }

    /// Asks the commit loop to look at the clock (the timer loop calls this when something fell due).
    func wake() {
        inbox.wake()
    }

    /// The timer loop's turn: wakes the commit loop when a timer fell due, or when a degraded engine
    /// should try to reload its state or a partitioned one read its inbox; returns how long the loop
    /// sleeps: until the next timer, at most `longest`. The loop is nudged (``timerNudge``) when a commit
    /// turn sets an earlier timer than the one it sleeps towards.
    func timerTurn(longest: Duration) -> Duration {
        let time = Timestamp(now()).milliseconds
        var sleep = longest
        if let next = scheduler.nextWakeUp?.milliseconds {
            if next <= time { inbox.wake() } else { sleep = min(sleep, .milliseconds(next - time)) }
        }
        if needsWake() { inbox.wake() }
        plannedTimerWake = time + sleep.components.seconds * 1000 + sleep.components.attoseconds / 1_000_000_000_000_000
        return sleep
    }

    /// Nudges the timer loop when the scheduler's next timer comes before the loop's planned wake.
    func nudgeTimerLoopIfEarlier() {
        guard let next = scheduler.nextWakeUp?.milliseconds, next < plannedTimerWake else { return }
        plannedTimerWake = next
        timerNudge.nudge()
    }

    /// Whoever waits for a commit.
    typealias Waiter = @Sendable (Result<Void, any Error>) -> Void

    /// A commit for the commit loop to run (``perform(_:)``).
    struct PendingCommit: Sendable {
        var number: Int
        var batch: LedgerBatch
    }

    /// What a turn of the commit loop hands back: the commit to start, and the callers of the commit that
    /// ended, answered once the next one has started (``answer()``).
    struct Turn: Sendable {
        var commit: PendingCommit?
        var committed: [Waiter] = []
        /// The engine's state after the turn (the loop's readiness), read in the same hop.
        var isStopping = false
        var isDegraded = false

        /// Tells the callers of the commit that ended that it succeeded.
        func answer() {
            for waiter in committed { waiter(.success(())) }
        }
    }

    /// What a commit came to, and how long it took.
    struct CommitOutcome: Sendable {
        var number: Int
        var result: Result<Void, any Error>
        var took: Duration
    }

    /// Runs `commit` (the commit loop calls it in a child task) and wakes the loop, whose next turn
    /// answers its waiters.
    nonisolated func perform(_ commit: PendingCommit) async {
        let started = monotonic()
        let result: Result<Void, any Error>
        do {
            try await store.commit(commit.batch)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        commitEnded(commit.number, result, took: started.duration(to: monotonic()))
    }

    /// Commit `number` ended with `result`: the loop's next turn settles it (``perform(_:)`` calls this;
    /// the cluster simulation, which decides when a commit ends and how, calls it itself).
    nonisolated func commitEnded(_ number: Int, _ result: Result<Void, any Error>, took: Duration) {
        commitOutcome.withLock { $0 = CommitOutcome(number: number, result: result, took: took) }
        // Requests queued while it ran did not wake the loop (``seal()``); this wakes it for all of them.
        inbox.resumeWakeUps()
    }

    /// The commit loop's turn: answers the commit that ended (if one did), decides what is queued and what
    /// fell due, and returns the open batch as the next commit when none is in flight. A degraded engine
    /// tries to rebuild its state (at most once a second) and refuses everything queued meanwhile.
    ///
    /// One commit runs at a time, and the engine decides what arrives while it runs into the next batch
    /// (the commits are pipelined). When a commit fails, the batch decided meanwhile (made on the failed
    /// one's state) is refused with it.
    func commitTurn() async -> Turn {
        let started = monotonic()
        var turn = await takeTurn()
        if turn.commit != nil { metrics.sealed(after: started.duration(to: monotonic())) }
        nudgeTimerLoopIfEarlier()
        turn.isStopping = isStopping
        turn.isDegraded = isDegraded
        return turn
    }

    private func takeTurn() async -> Turn {
        if pipeline.hasEnded {
            refuseQueued(SchedulerUnavailable())
            return Turn()
        }
        var committed: [Waiter] = []
        if let ended = commitOutcome.withLock({ outcome in defer { outcome = nil }; return outcome }) {
            guard let succeeded = await settle(ended) else { return Turn() }
            committed = succeeded
        }
        if pipeline.isDegraded {
            // At most one attempt a second (the timer loop wakes the turns), beside the loop: while it
            // waits for the store (its probes, then the reads that scan), the requests arriving are
            // refused at once, not held for it.
            if rebuildAttempt == nil, lastRebuild.map({ $0.duration(to: monotonic()) >= Self.rebuildInterval }) ?? true {
                startRebuild()
            }
            guard !pipeline.isDegraded else {
                refuseQueued(Self.degraded)
                return Turn(committed: committed)
            }
        }
        if partitioning != nil {
            // Partitions begin to load, and the inbox is read, only between commits: a commit in flight may
            // write their state, and delete inbox rows it consumed. The requests queued here are taken
            // before the inbox is read and decided after what it holds: a request another gateway
            // answered (and forwarded here) before one of them was sent is decided first, as one gateway
            // would. So while a commit is in flight they wait in the queue for the turn after it, which
            // their commit would wait for anyway.
            if pipeline.inFlight == nil {
                startAwaitedLoad()
                let queued = inbox.takeAll()
                await readForwardedWork(before: queued.isEmpty ? nil : queued.count)
                await decide(queued)
            }
        } else {
            await decide(inbox.takeAll())
        }
        if pipeline.isDegraded {
            // The registry's group commit found the store away while the drain awaited a read
            // (``storeFailed(_:)``): nothing is sealed; the rebuild is the next turn's.
            inbox.wake()
            return Turn(committed: committed)
        }
        collectTick()
        // The next batch leaves before the last one's callers are answered.
        return Turn(commit: seal(), committed: committed)
    }

    /// Adds to the open batch what fell due by now and every instance state changed since the last tick.
    func collectTick() {
        let output = scheduler.tick(now: Timestamp(now()))
        record(output)
        pipeline.open.ledger.instanceStates.reserveRoom(for: output.instanceStates.count)
        for write in output.instanceStates {
            pipeline.open.ledger.instanceStates.append((Int64(write.instance.rawValue), write.snapshot))
        }
    }

    /// The open batch as the next commit, when nothing is in flight and it holds something or someone waits.
    func seal() -> PendingCommit? {
        let time = Timestamp(now())
        guard let sealed = pipeline.turn(sealing: { batch in
            if partitioning != nil { batch.ledger.fence = fence(of: batch) }
            batch.ledger.expiredBy = time
        }).startCommit else { return nil }
        // What arrives while this commits goes into the next batch, which cannot leave before this one
        // ends: new requests do not wake the loop one by one; the commit's end wakes it for all of them
        // (``commitEnded(_:_:took:)``).
        inbox.holdWakeUps()
        return PendingCommit(number: sealed.number, batch: sealed.batch.ledger)
    }

    /// Settles the commit that ended: its callers, to answer (``Turn/answer()``), or `nil` when it failed
    /// (they and the open batch's were refused).
    func settle(_ ended: CommitOutcome) async -> [Waiter]? {
        switch ended.result {
        case .success:
            let actions = pipeline.commitEnded(ended.number, succeeded: true)
            let succeeded = complete(actions, took: ended.took)
            let failure = failureBesideInFlight
            failureBesideInFlight = nil
            if actions.rebuild {
                // The store was found away beside the loop while this commit ran (``storeFailed(_:)``):
                // its callers are answered, and what was decided since is refused with that failure.
                let error = failure ?? Self.degraded
                logger.error("the store cannot write; requests are refused until it can", metadata: ["error": "\(error)"])
                onDegraded()
                var refusals = actions
                refusals.succeeded = []
                perform(refusals, error: error)
            }
            return succeeded
        case .failure(let error):
            failureBesideInFlight = nil
            await fail(pipeline.commitEnded(ended.number, succeeded: false), error: error)
            return nil
        }
    }

    /// Answers the waiters `actions` names, and refuses the idempotency keys of the batches it dropped:
    /// with `error` when the refusal is a failed commit.
    func perform(_ actions: CommitPipeline<Waiter, OpenBatch>.Actions, error: (any Error)? = nil) {
        for waiter in actions.succeeded { waiter(.success(())) }
        guard let reason = actions.refusal else { return }
        let refusal: any Error =
            switch reason {
            case .commitFailed: error ?? Self.degraded
            case .degraded: Self.degraded
            case .ended: SchedulerUnavailable()
            }
        for waiter in actions.refused { waiter(.failure(refusal)) }
        for batch in actions.dropped { refuseKeys(batch.keys, refusal) }
    }

    /// A batch committed: its deliveries go to the delivery worker, and its callers are returned, to be
    /// answered (a replay of an idempotency key in flight is answered here).
    func complete(_ actions: CommitPipeline<Waiter, OpenBatch>.Actions, took: Duration) -> [Waiter] {
        guard let committed = actions.committed else { return actions.succeeded }
        metrics.committed(in: took, pending: scheduler.pendingCount)
        metrics.decisionsCommitted(committed.ledger.decisions)
        freshness.committed(
            requests: committed.ledger.requests, forwarded: committed.forwardedArrivals,
            decisions: committed.ledger.decisions, timelineReloads: committed.timelineReloads,
            at: committed.ledger.expiredBy ?? Timestamp(now())
        )
        answerKeys(of: committed)
        let released = committed.ledger.deliveries
        if !released.isEmpty {
            metrics.deliveriesQueued(released.count)
            deliveries.yield(released)
        }
        return actions.succeeded
    }

    /// A commit failed: nothing of that batch is accepted, and the decisions made since depend on it,
    /// so every waiting caller gets the error and the scheduler is rebuilt from what the store holds.
    func fail(_ actions: CommitPipeline<Waiter, OpenBatch>.Actions, error: any Error) async {
        logger.error("commit failed; the requests of the batch are refused", metadata: ["error": "\(error)"])
        if pipeline.isDegraded { onDegraded() }
        perform(actions, error: error)
        if case .fenced(let generation, let held) = error as? StoreError {
            // Another gateway took partitions over: forget those no longer held at once (the heartbeat
            // would within a second) and commit under the new generation from now on.
            let kept = Set(held)
            let lost = owned.keys.filter { !kept.contains($0) }.sorted()
            for partition in lost {
                owned[partition] = nil
                catchingUp[partition] = nil
            }
            // Those taken and waiting to be loaded too: loaded now, they would be decided twice.
            for partition in awaitingLoad.keys where !kept.contains(partition) { awaitingLoad[partition] = nil }
            fenceGeneration = max(fenceGeneration, generation)
            logger.warning(
                "partitions taken over by another gateway; the requests of the batch are refused",
                metadata: ["partitions": "\(lost)", "generation": "\(fenceGeneration)"]
            )
        }
        // The rebuild is the next turn's (now, since the loop is woken): this turn ends degraded, so the
        // loop marks the gateway not ready at once, not after a rebuild that waits for the store.
        if actions.rebuild { inbox.wake() }
    }

    /// Starts an attempt to leave the degraded state (``rebuild()``) in a task beside the commit loop;
    /// its end wakes the loop.
    func startRebuild() {
        lastRebuild = monotonic()
        rebuildAttempt = Task {
            await self.rebuild()
            self.rebuildAttempt = nil
            self.inbox.wake()
        }
    }

    /// Waits for the attempt to rebuild in progress, if one is (tests and the cluster simulation, which
    /// keep the order of events).
    func rebuildEnded() async {
        await rebuildAttempt?.value
    }

    /// Reloads the scheduler from the store, or, when nothing decided was dropped (the pipeline's
    /// ``CommitPipeline/reloadNeeded``), only checks that the store can commit again; while that fails the
    /// engine is degraded (every request is refused; the next turn a second later tries again).
    func rebuild() async {
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
            let reloaded = pipeline.reloadNeeded
            if reloaded { try await load() }
            // After a reload, whatever the open batch gathered while degraded was decided on the state just
            // thrown away (a hand-back's last tick, say): the pipeline drops it, so that it is never written
            // (a reload released twice, once by the old state and once by the reloaded one, in one batch).
            // Without one, the state was kept and the batch, decided on it, commits. (No wait between the
            // read of `reloadNeeded` above and this: nothing can be dropped in between.)
            perform(pipeline.rebuilt(succeeded: true, reloaded: reloaded))
            if outageReported {
                logger.notice(
                    reloaded
                        ? "the scheduler's state was reloaded from the store; requests are accepted again"
                        : "the store can commit again; requests are accepted again (nothing decided was lost: the state was kept)"
                )
            }
            outageReported = false
        } catch {
            _ = pipeline.rebuilt(succeeded: false)
            // (Stopping: the attempt was cancelled, and says nothing of the store.)
            if !outageReported, !isStopping {
                // Once per outage: what is stuck (the database away, a table locked, the disk full).
                logger.error(
                    "the store cannot commit; requests are refused (503) and /ready answers 503 until it can",
                    metadata: ["error": "\(error)"]
                )
                outageReported = true
            }
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

    /// Refuses everything queued with `error` and drops what a degraded engine gathered (nothing may be
    /// decided; whoever waits for a commit was refused by the pipeline already).
    func refuseQueued(_ error: any Error) {
        for item in inbox.takeAll() { item.reply(.failure(error)) }
        perform(pipeline.refuseOpen(), error: error)
    }

    /// Adds what a tick released to the batch: deliveries (as `pending`, with their apns-id) and
    /// pending reloads that expired while waiting.
    func record(_ output: TickOutput) {
        pipeline.open.ledger.deliveries.reserveRoom(for: output.deliveries.count)
        for delivery in output.deliveries {
            var recorded = RecordedDelivery(
                apnsID: apnsIDs.next(milliseconds: delivery.at.milliseconds),
                device: Int64(delivery.device.rawValue),
                released: delivery.at,
                instances: CompactList(delivery.reloaded.lazy.map { Int64($0.instance.rawValue) }),
                requests: delivery.requests,
                requestCount: delivery.requestCount,
                priority: delivery.priority,
                expiration: delivery.expiration,
                state: .pending
            )
            if partitioning != nil { recorded.leaseEpoch = owned[DevicePartition.of(device: recorded.device)] }
            pipeline.open.ledger.deliveries.append(recorded)
        }
        pipeline.open.timelineReloads += output.timelineReloads
        for expired in output.expired {
            for request in expired.requests {
                pipeline.open.ledger.decisions.append(
                    Decision(request: request, instance: expired.instance, kind: .expired, due: nil, reason: expired.reason)
                )
            }
        }
    }

    // MARK: Stopping

    /// Refuses new work; the commit loop commits what is gathered and ends, and the delivery stream ends.
    func stop() {
        pipeline.stop()
        // Requests already queued are still decided and committed; later ones are refused.
        inbox.close()
    }

    /// Waits for the work the loop started beside itself (a rebuild, a partition load) before the
    /// pipeline ends: both use the store, which the gateway closes once this service has stopped. Both
    /// are cancelled first: their reads may scan for minutes, or wait on a PostgreSQL connection that no
    /// longer answers, and a read on PostgreSQL ends when its caller is cancelled (SQLite's are local); a
    /// rebuild cancelled so leaves the engine degraded, which a stopping engine no longer minds.
    func endWorkBesideTheLoop() async {
        partitionLoad?.cancel()
        rebuildAttempt?.cancel()
        await rebuildAttempt?.value
        await partitionLoad?.value
    }

    /// Ends the pipeline and the stream of deliveries, after the commit loop's last commit: whoever still
    /// waits is refused (`false` when a commit is still in flight: the loop must wait for it first).
    func finish() -> Bool {
        guard let actions = pipeline.finish() else { return false }
        perform(actions)
        deliveries.finish()
        return true
    }
}
