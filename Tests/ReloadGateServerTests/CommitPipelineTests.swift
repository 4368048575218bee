import PropertyBased
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The commit pipeline's state machine on its own (pure: no store, no tasks, no clock): every event in
/// every state, and thousands of generated event sequences run against a model of the executor, checking
/// after each step that at most one commit is in flight and that no waiter is answered twice, and at the
/// end that every waiter was answered, with success exactly when the commit it waited for succeeded, and
/// that everything decided into an open batch was committed or dropped, once, by the pipeline.
@Suite(.offThePool)
struct CommitPipelineTests {
    /// A batch of numbered decisions.
    struct Batch: PipelineBatch {
        var items: [Int] = []
        var isEmpty: Bool { items.isEmpty }
    }

    typealias Pipeline = CommitPipeline<Int, Batch>

    /// A pipeline brought into each state with waiter 1 in flight (where there is a flight) and waiter 2
    /// in the open batch (where one can be).
    static func pipeline(in state: String) -> Pipeline {
        var pipeline = Pipeline()
        switch state {
        case "accepting, idle":
            _ = pipeline.wait(2)
        case "accepting, in flight":
            _ = pipeline.wait(1)
            pipeline.open.items.append(1)
            _ = pipeline.turn()
            _ = pipeline.wait(2)
        case "degraded":
            _ = pipeline.wait(1)
            pipeline.open.items.append(1)
            _ = pipeline.turn()
            _ = pipeline.commitEnded(1, succeeded: false)
        case "stopping, idle":
            _ = pipeline.wait(2)
            pipeline.stop()
        case "stopping, in flight":
            _ = pipeline.wait(1)
            pipeline.open.items.append(1)
            _ = pipeline.turn()
            _ = pipeline.wait(2)
            pipeline.stop()
        case "ended":
            pipeline.stop()
            _ = pipeline.finish()
        default:
            Issue.record("no state \(state)")
        }
        return pipeline
    }

    static let states = ["accepting, idle", "accepting, in flight", "degraded", "stopping, idle", "stopping, in flight", "ended"]

    @Test(arguments: states) func aWaiterJoinsTheOpenBatchOrIsRefusedAtOnce(state: String) {
        var pipeline = Self.pipeline(in: state)
        let actions = pipeline.wait(3)
        switch state {
        case "degraded":
            #expect(actions.refused == [3] && actions.refusal == .degraded)
        case "ended":
            #expect(actions.refused == [3] && actions.refusal == .ended)
        default:
            #expect(actions.refused.isEmpty && actions.succeeded.isEmpty)
            #expect(pipeline.openWaiters.last == 3)
        }
    }

    @Test(arguments: states) func aTurnStartsACommitOnlyWhenNothingIsInFlight(state: String) {
        var pipeline = Self.pipeline(in: state)
        let before = pipeline.inFlight
        let actions = pipeline.turn()
        switch state {
        case "accepting, idle", "stopping, idle":
            // Waiter 2 is in the open batch: it commits even though the batch itself holds nothing.
            #expect(actions.startCommit != nil)
            #expect(pipeline.inFlight == actions.startCommit?.number)
            #expect(pipeline.openWaiters.isEmpty)
        case "degraded":
            #expect(actions.rebuild && actions.startCommit == nil)
        default:
            #expect(actions.startCommit == nil && !actions.rebuild)
            #expect(pipeline.inFlight == before)
        }
    }

    @Test func anIdleTurnWithNothingToCommitDoesNothing() {
        var pipeline = Pipeline()
        #expect(pipeline.turn().startCommit == nil)
        pipeline.open.items.append(7)
        let started = pipeline.turn(sealing: { $0.items.append(8) }).startCommit
        #expect(started?.number == 1)
        // Sealed as it was, finished by `sealing`; a new batch is open.
        #expect(started?.batch.items == [7, 8])
        #expect(pipeline.inFlightCommit?.batch.items == [7, 8])
        #expect(pipeline.open.isEmpty)
    }

    @Test(arguments: states, [true, false]) func aCommitThatEndsAnswersItsWaitersOnce(state: String, succeeded: Bool) {
        var pipeline = Self.pipeline(in: state)
        guard let number = pipeline.inFlight else { return }
        let actions = pipeline.commitEnded(number, succeeded: succeeded)
        #expect(pipeline.inFlight == nil)
        if succeeded {
            #expect(actions.succeeded == [1] && actions.refused.isEmpty)
            #expect(actions.committed?.items == [1] && actions.dropped.isEmpty)
            #expect(pipeline.openWaiters == [2])
            #expect(pipeline.isStopping == state.hasPrefix("stopping"))
        } else {
            // Waiter 2 was decided on the failed commit's state: refused with it.
            #expect(actions.succeeded.isEmpty && actions.refused == [1, 2] && actions.refusal == .commitFailed)
            #expect(actions.committed == nil && actions.dropped.map(\.items) == [[1]])
            #expect(pipeline.openWaiters.isEmpty)
            if state.hasPrefix("stopping") { #expect(pipeline.hasEnded && !actions.rebuild) } else { #expect(pipeline.isDegraded && actions.rebuild) }
        }
    }

    @Test(arguments: states, [true, false]) func aRebuildThatSucceedsEndsTheDegradedStateOnly(state: String, succeeded: Bool) {
        var pipeline = Self.pipeline(in: state)
        let accepting = pipeline.isAccepting
        // Something gathered while degraded (a hand-back's last tick): decided on the state thrown away.
        if state == "degraded" { pipeline.open.items.append(5) }
        let actions = pipeline.rebuilt(succeeded: succeeded)
        if state == "degraded" {
            #expect(pipeline.isAccepting == succeeded)
            #expect(actions.dropped.map(\.items) == (succeeded ? [[5]] : []))
            #expect(pipeline.open.isEmpty == succeeded)
        } else {
            #expect(pipeline.isAccepting == accepting)
            #expect(actions.dropped.isEmpty)
        }
    }

    /// A write of the engine's own found the store away: with nothing in flight the open batch's waiters
    /// are refused and the engine degrades; in every other state nothing changes at once (with a commit in
    /// flight, the engine degrades when it ends: the next test).
    @Test(arguments: states) func aStoreFailureOutsideACommitDegradesAtOnceOnlyAnIdleAcceptingPipeline(state: String) {
        var pipeline = Self.pipeline(in: state)
        let actions = pipeline.storeFailed()
        if state == "accepting, idle" {
            #expect(actions.refused == [2] && actions.refusal == .commitFailed && actions.rebuild)
            #expect(pipeline.isDegraded && pipeline.openWaiters.isEmpty)
            // Someone waited for the open batch: its state is reloaded before accepting again.
            #expect(pipeline.reloadNeeded)
        } else {
            #expect(actions.refused.isEmpty && !actions.rebuild)
            #expect(pipeline.isDegraded == (state == "degraded"))
        }
    }

    /// The store found away beside the loop while a commit is in flight: nothing changes until that commit
    /// ends, and then, whatever its outcome, the engine is degraded. The commit may well succeed (a
    /// registration's write waited for a locked table the ledger's commit does not touch): its waiters are
    /// answered, since it was committed, and the open batch's are refused. The state is reloaded when the
    /// write may have been committed or something decided was dropped. A stopping pipeline only stops.
    @Test(arguments: [false, true]) func aStoreFailureDuringACommitDegradesWhenItEnds(mayHaveWritten: Bool) {
        var pipeline = Self.pipeline(in: "accepting, in flight")
        var actions = pipeline.storeFailed(mayHaveWritten: mayHaveWritten)
        #expect(actions.refused.isEmpty && !actions.rebuild && pipeline.isAccepting)
        actions = pipeline.commitEnded(1, succeeded: true)
        #expect(actions.committed?.items == [1] && actions.succeeded == [1])
        #expect(actions.refused == [2] && actions.refusal == .commitFailed && actions.rebuild)
        #expect(pipeline.isDegraded && pipeline.reloadNeeded)

        // Nothing waits for the open batch and nothing was decided into it: a probe that commits is enough,
        // unless the write may have been committed.
        var quiet = Pipeline()
        _ = quiet.wait(1)
        quiet.open.items.append(1)
        let number = quiet.turn().startCommit?.number
        _ = quiet.storeFailed(mayHaveWritten: mayHaveWritten)
        actions = quiet.commitEnded(number ?? 0, succeeded: true)
        #expect(actions.succeeded == [1] && actions.refused.isEmpty && actions.dropped.isEmpty && actions.rebuild)
        #expect(quiet.isDegraded && quiet.reloadNeeded == mayHaveWritten)

        // A commit that fails degrades the engine as always, and the failure is not kept for the next one.
        var failed = Self.pipeline(in: "accepting, in flight")
        _ = failed.storeFailed(mayHaveWritten: mayHaveWritten)
        actions = failed.commitEnded(1, succeeded: false)
        #expect(actions.refused == [1, 2] && actions.rebuild && failed.isDegraded && failed.reloadNeeded)
        #expect(failed.failedBesideInFlight == nil)

        // Stopping: the commit in flight ends as it would have, and nothing degrades.
        var stopping = Self.pipeline(in: "accepting, in flight")
        _ = stopping.storeFailed(mayHaveWritten: mayHaveWritten)
        stopping.stop()
        actions = stopping.commitEnded(1, succeeded: true)
        #expect(actions.succeeded == [1] && !actions.rebuild && stopping.isStopping && !stopping.isDegraded)
    }

    /// The store found away beside the loop while nothing had been decided since the last commit: the
    /// state in memory is the store's, so the engine accepts again once a probe commits, without reading it
    /// all again; what it gathered meanwhile (decided on that state) is kept. A failed commit, or anything
    /// decided that was dropped, needs the reload.
    @Test func aStoreFailureWithNothingDecidedNeedsNoReload() {
        var pipeline = Pipeline()
        var actions = pipeline.storeFailed()
        #expect(pipeline.isDegraded && actions.rebuild && actions.refused.isEmpty && actions.dropped.isEmpty)
        #expect(!pipeline.reloadNeeded)
        pipeline.open.items.append(7)
        actions = pipeline.rebuilt(succeeded: true, reloaded: false)
        #expect(pipeline.isAccepting && actions.dropped.isEmpty)
        #expect(pipeline.open.items == [7])

        // Degraded again by the store, then what was gathered is dropped (a degraded turn refuses it):
        // the probe alone no longer does.
        _ = pipeline.wait(1)
        actions = pipeline.turn()
        #expect(pipeline.commitEnded(actions.startCommit!.number, succeeded: true).succeeded == [1])
        _ = pipeline.storeFailed()
        pipeline.open.items.append(8)
        #expect(pipeline.refuseOpen().dropped.map(\.items) == [[8]])
        #expect(pipeline.reloadNeeded)
        _ = pipeline.rebuilt(succeeded: true, reloaded: false)
        #expect(pipeline.isDegraded)
        _ = pipeline.rebuilt(succeeded: true)
        #expect(pipeline.isAccepting && !pipeline.reloadNeeded)

        // A write whose outcome is unknown may have changed the registry behind the state.
        var unknown = Pipeline()
        _ = unknown.storeFailed(mayHaveWritten: true)
        #expect(unknown.isDegraded && unknown.reloadNeeded)

        // A failed commit dropped its batch.
        var failed = Self.pipeline(in: "degraded")
        #expect(failed.reloadNeeded)
        _ = failed.rebuilt(succeeded: true, reloaded: false)
        #expect(failed.isDegraded)
    }

    @Test(arguments: states) func stopKeepsTheOpenBatchAndTheCommitInFlight(state: String) {
        var pipeline = Self.pipeline(in: state)
        let inFlight = pipeline.inFlight
        let open = pipeline.openWaiters
        pipeline.stop()
        #expect(pipeline.isStopping)
        #expect(!pipeline.isAccepting)
        #expect(pipeline.inFlight == inFlight)
        #expect(pipeline.openWaiters == open)
        #expect(pipeline.hasEnded == (state == "degraded" || state == "ended"))
    }

    @Test(arguments: states) func finishWaitsForTheCommitInFlightAndRefusesWhatIsLeft(state: String) {
        var pipeline = Self.pipeline(in: state)
        let open = pipeline.openWaiters
        guard let actions = pipeline.finish() else {
            #expect(pipeline.inFlight != nil)
            return
        }
        #expect(pipeline.hasEnded)
        #expect(actions.refused == open)
        #expect(pipeline.wait(9).refused == [9])
    }

    /// One step of a generated run.
    enum Event: CaseIterable {
        case wait, decide, turn, commitSucceeds, commitFails, storeFails, storeFailsUnknown, rebuildSucceeds, probeSucceeds, rebuildFails, refuseOpen, stop
    }

    /// A model executor: performs the pipeline's actions and records every answer.
    struct Run {
        var pipeline = Pipeline()
        var nextWaiter = 0
        /// waiter -> the commit it was sealed into.
        var sealedInto: [Int: Int] = [:]
        var commitSucceeded: [Int: Bool] = [:]
        var answers: [Int: Bool] = [:]
        var waiting: [Int] = []
        /// Decisions made into open batches, and how each ended (`true`: committed).
        var decided: [Int] = []
        var ended: [Int: Bool] = [:]
        /// Whether something decided was dropped since the state was last loaded: the state in memory is
        /// ahead of the store's, and the pipeline may not accept again without a reload.
        var ahead = false
        /// The store was found away beside the loop while a commit was in flight (`true`: by a write that
        /// may have been committed): the pipeline may not accept after that commit ends.
        var failedBesideInFlight: Bool?
        var problems: [String] = []

        mutating func perform(_ actions: Pipeline.Actions) {
            for waiter in actions.succeeded { answer(waiter, true) }
            for waiter in actions.refused { answer(waiter, false) }
            if !actions.refused.isEmpty, actions.refusal == nil { problems.append("refused without a reason") }
            if let started = actions.startCommit {
                // The waiters sealed into it are those that were open until now.
                for waiter in waiting where answers[waiter] == nil && sealedInto[waiter] == nil { sealedInto[waiter] = started.number }
                if started.batch.items.contains(where: { ended[$0] != nil }) { problems.append("commit \(started.number) holds a decision that ended") }
            }
            for item in actions.committed?.items ?? [] { end(item, committed: true) }
            for item in actions.dropped.flatMap(\.items) { end(item, committed: false) }
            if actions.dropped.contains(where: { !$0.items.isEmpty }) { ahead = true }
        }

        mutating func end(_ item: Int, committed: Bool) {
            if ended[item] != nil { problems.append("decision \(item) ended twice") }
            ended[item] = committed
        }

        mutating func answer(_ waiter: Int, _ success: Bool) {
            if answers[waiter] != nil { problems.append("waiter \(waiter) answered twice") }
            answers[waiter] = success
            if success, let commit = sealedInto[waiter], commitSucceeded[commit] != true {
                problems.append("waiter \(waiter) answered success, but its commit \(commit) did not succeed")
            }
            if success, sealedInto[waiter] == nil { problems.append("waiter \(waiter) answered success without a commit") }
        }

        mutating func step(_ event: Event) {
            switch event {
            case .wait:
                nextWaiter += 1
                waiting.append(nextWaiter)
                perform(pipeline.wait(nextWaiter))
            case .decide:
                // The executor decides while accepting (a stopping engine's drain may still, into the
                // batch its last commit takes; a degraded one may gather a hand-back's last tick).
                guard !pipeline.hasEnded else { return }
                decided.append(decided.count + 1)
                pipeline.open.items.append(decided.count)
            case .turn:
                perform(pipeline.turn())
            case .commitSucceeds, .commitFails:
                guard let number = pipeline.inFlight else { return }
                commitSucceeded[number] = event == .commitSucceeds
                perform(pipeline.commitEnded(number, succeeded: event == .commitSucceeds))
                if let mayHaveWritten = failedBesideInFlight {
                    if pipeline.isAccepting { problems.append("accepting after a commit during which the store was found away") }
                    if mayHaveWritten { ahead = true }
                }
                failedBesideInFlight = nil
            case .storeFails:
                if pipeline.isAccepting, pipeline.inFlight != nil { failedBesideInFlight = failedBesideInFlight ?? false }
                perform(pipeline.storeFailed())
            case .storeFailsUnknown:
                // The write's outcome unknown: the state may be behind the store's, as after a drop (with a
                // commit in flight, from its end on).
                if pipeline.isAccepting, pipeline.inFlight == nil { ahead = true }
                if pipeline.isAccepting, pipeline.inFlight != nil { failedBesideInFlight = true }
                perform(pipeline.storeFailed(mayHaveWritten: true))
            case .rebuildSucceeds:
                perform(pipeline.rebuilt(succeeded: true))
                if pipeline.isAccepting { ahead = false }
            case .probeSucceeds:
                // The store can commit again and the state was not reloaded: allowed only when nothing
                // decided was dropped.
                let reloadNeeded = pipeline.reloadNeeded
                perform(pipeline.rebuilt(succeeded: true, reloaded: false))
                if reloadNeeded, pipeline.isAccepting { problems.append("accepting again without the reload it needs") }
            case .rebuildFails:
                perform(pipeline.rebuilt(succeeded: false))
            case .refuseOpen:
                guard pipeline.isDegraded || pipeline.hasEnded else { return }
                perform(pipeline.refuseOpen())
            case .stop:
                // A stopping pipeline's commits end as they would have.
                pipeline.stop()
                failedBesideInFlight = nil
            }
            if pipeline.isAccepting, ahead { problems.append("accepting on a state ahead of the store's (something decided was dropped)") }
        }

        /// What the commit loop does when the gateway stops: its last commits, then `finish`.
        mutating func end() {
            pipeline.stop()
            for _ in 0..<3 {
                if let number = pipeline.inFlight {
                    commitSucceeded[number] = true
                    perform(pipeline.commitEnded(number, succeeded: true))
                }
                perform(pipeline.turn())
            }
            if let number = pipeline.inFlight {
                commitSucceeded[number] = true
                perform(pipeline.commitEnded(number, succeeded: true))
            }
            guard let actions = pipeline.finish() else { return problems.append("finish refused with nothing in flight") }
            perform(actions)
        }
    }

    @Test func everyWaiterIsAnsweredExactlyOnceInGeneratedRuns() async {
        await propertyCheck(count: 5000, input: Gen.element(of: Event.allCases).map { $0 ?? .wait }.array(of: 0...120)) { events in
            var run = Run()
            for event in events {
                run.step(event)
                #expect(run.problems.isEmpty, "\(run.problems) after \(events)")
                if !run.problems.isEmpty { return }
            }
            run.end()
            #expect(run.problems.isEmpty, "\(run.problems) after \(events)")
            let unanswered = run.waiting.filter { run.answers[$0] == nil }
            #expect(unanswered.isEmpty, "never answered: \(unanswered) after \(events)")
            let lost = run.decided.filter { run.ended[$0] == nil }
            #expect(lost.isEmpty, "decisions neither committed nor dropped: \(lost) after \(events)")
            #expect(run.pipeline.hasEnded)
        }
    }
}
