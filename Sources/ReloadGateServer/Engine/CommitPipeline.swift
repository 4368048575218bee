/// The scheduler engine's group commit, as a state machine: which batch commits when, and who is answered
/// with what. It holds the open batch (``open``, what the executor decides into), the commit in flight (its
/// number, its batch and whoever waits for it) and the open batch's waiters; the store and the tasks belong
/// to the executor (``SchedulerEngine`` and the commit loop of ``DoorService``), which performs the actions
/// each event returns. Only the pipeline's events seal, replace or drop the open batch.
///
/// Requests are decided into the open batch while the batch before it commits (at most one commit in
/// flight). A commit that fails refuses its own waiters and the open batch's (decided on its state), and
/// the engine is degraded until its state is rebuilt from the store, or, when nothing decided was dropped,
/// until the store can commit again (``reloadNeeded``). Every waiter is answered exactly once:
/// each state that holds waiters has one way out, and each way out answers them (``finish()`` answers
/// whatever is left).
struct CommitPipeline<Waiter, Batch: PipelineBatch> {
    /// A commit in flight: its number, its batch and whoever waits for it.
    struct Commit {
        var number: Int
        var batch: Batch
        var waiters: [Waiter]
    }

    /// A batch sealed to commit as `number`.
    struct Sealed {
        var number: Int
        var batch: Batch
    }

    enum State {
        /// Deciding into the open batch; `inFlight` commits meanwhile.
        case accepting(inFlight: Commit?)
        /// A commit failed and the state has not been rebuilt from the store since: nothing is decided, no
        /// batch is open, nothing is in flight.
        case degraded
        /// The gateway stops: the open batch and the commit in flight still commit, nothing else is decided.
        case stopping(inFlight: Commit?)
        /// After the last commit: every waiter is refused at once.
        case ended
    }

    /// Why a waiter is refused.
    enum Refusal: Equatable {
        /// The commit it waited for (or the one before, whose state it was decided on) failed.
        case commitFailed
        /// The engine is degraded.
        case degraded
        /// The engine has stopped.
        case ended
    }

    /// What the executor does, in this order: take in `committed` (the batch of the commit that
    /// succeeded) and answer `succeeded`; refuse `refused` (with `refusal`) and what `dropped` holds (the
    /// failed commit's batch and the open one, whose contents are gone); commit `startCommit`; rebuild the
    /// state from the store when `rebuild`.
    struct Actions {
        var committed: Batch?
        var succeeded: [Waiter] = []
        var refused: [Waiter] = []
        var refusal: Refusal?
        var dropped: [Batch] = []
        var startCommit: Sealed?
        var rebuild = false

        static var none: Actions { Actions() }
    }

    private(set) var state: State = .accepting(inFlight: nil)
    /// Whether leaving the degraded state needs the scheduler's state reloaded from the store: something
    /// decided was dropped (a failed commit's batch, an open batch's contents), so the state in memory is
    /// ahead of the store's. A store found away by a write beside the loop (``storeFailed()``) while
    /// nothing had been decided since the last commit leaves the state as the store has it: a probe that
    /// commits is enough, and a million instances are not read again for it.
    private(set) var reloadNeeded = false
    /// The store was found away beside the loop (``storeFailed(mayHaveWritten:)``) while a commit was in
    /// flight: the engine degrades when that commit ends, whatever its outcome (it may succeed: a
    /// registration's write waited for a locked table the ledger's commit does not touch). `true`: that
    /// write may have been committed. `nil`: none.
    private(set) var failedBesideInFlight: Bool?
    /// What is decided until the next commit starts. The executor adds to it; the events below seal it
    /// (``turn(sealing:)``) or drop it, and open a new one.
    var open = Batch()
    /// Who waits for the open batch.
    private(set) var openWaiters: [Waiter] = []
    private var lastNumber = 0

    /// Whether requests may be decided now.
    var isAccepting: Bool {
        if case .accepting = state { return true }
        return false
    }

    var isDegraded: Bool {
        if case .degraded = state { return true }
        return false
    }

    /// Stop was asked (or the pipeline ended).
    var isStopping: Bool {
        switch state {
        case .stopping, .ended: true
        case .accepting, .degraded: false
        }
    }

    var hasEnded: Bool {
        if case .ended = state { return true }
        return false
    }

    /// The commit in flight.
    var inFlightCommit: Commit? {
        switch state {
        case .accepting(let commit?), .stopping(let commit?): commit
        default: nil
        }
    }

    /// The number of the commit in flight.
    var inFlight: Int? { inFlightCommit?.number }

    /// `waiter` waits for the open batch (something was decided into it, or it waits for whatever the
    /// batch holds to be written).
    mutating func wait(_ waiter: Waiter) -> Actions {
        switch state {
        case .accepting, .stopping:
            openWaiters.append(waiter)
            return .none
        case .degraded:
            return Actions(refused: [waiter], refusal: .degraded)
        case .ended:
            return Actions(refused: [waiter], refusal: .ended)
        }
    }

    /// The commit loop's turn: the open batch starts its commit when nothing is in flight and it holds
    /// something or someone waits for it; `sealing` finishes it first (what only the moment of sealing
    /// says, such as its fence), and a new batch opens.
    mutating func turn(sealing: (inout Batch) -> Void = { _ in }) -> Actions {
        switch state {
        case .accepting(nil):
            guard let commit = seal(sealing) else { return .none }
            state = .accepting(inFlight: commit)
            return Actions(startCommit: Sealed(number: commit.number, batch: commit.batch))
        case .stopping(nil):
            guard let commit = seal(sealing) else { return .none }
            state = .stopping(inFlight: commit)
            return Actions(startCommit: Sealed(number: commit.number, batch: commit.batch))
        case .degraded:
            return Actions(rebuild: true)
        case .accepting, .stopping, .ended:
            return .none
        }
    }

    /// Commit `number` ended. On success its waiters are answered; on failure they are refused with the
    /// open batch's, whose contents are dropped, and the engine degrades (or, stopping, ends).
    mutating func commitEnded(_ number: Int, succeeded: Bool) -> Actions {
        switch state {
        case .accepting(let commit?) where commit.number == number:
            let failedBeside = failedBesideInFlight
            failedBesideInFlight = nil
            guard succeeded else {
                state = .degraded
                var actions = dropOpen(refusal: .commitFailed, with: commit)
                actions.rebuild = true
                return actions
            }
            guard let mayHaveWritten = failedBeside else {
                state = .accepting(inFlight: nil)
                return Actions(committed: commit.batch, succeeded: commit.waiters)
            }
            // Committed, and the store was found away beside it meanwhile: its callers are answered, and
            // the engine degrades as ``storeFailed(mayHaveWritten:)`` does with nothing in flight.
            var actions = degradeBeside(mayHaveWritten: mayHaveWritten)
            actions.committed = commit.batch
            actions.succeeded = commit.waiters
            return actions
        case .stopping(let commit?) where commit.number == number:
            failedBesideInFlight = nil
            guard succeeded else {
                state = .ended
                return dropOpen(refusal: .commitFailed, with: commit)
            }
            state = .stopping(inFlight: nil)
            return Actions(committed: commit.batch, succeeded: commit.waiters)
        default:
            preconditionFailure("commit \(number) ended, but it is not the one in flight (\(state))")
        }
    }

    /// A write of its own (a device adopted by its first push) found that the store cannot commit now (a
    /// lock held past the deadline, a full disk). With no commit in flight the open batch would meet the
    /// same: its waiters are refused, its contents dropped, and the engine degrades until its state is
    /// rebuilt (a probe passes); with nothing decided and no one waiting, and a write known not to have
    /// been committed, the state needs no reload. A write that `mayHaveWritten` (the connection broke
    /// under its commit, the outcome unknown) may have changed the registry behind the state: it is
    /// reloaded. With a commit in flight, the engine degrades when that commit ends: a failure degrades
    /// it anyway, and a success (a commit that touches no table of the write's) answers its own callers
    /// first (``commitEnded(_:succeeded:)``). Stopping or degraded, nothing changes.
    mutating func storeFailed(mayHaveWritten: Bool = false) -> Actions {
        switch state {
        case .accepting(nil):
            return degradeBeside(mayHaveWritten: mayHaveWritten)
        case .accepting(.some):
            failedBesideInFlight = (failedBesideInFlight ?? false) || mayHaveWritten
            return .none
        case .degraded, .stopping, .ended:
            return .none
        }
    }

    /// Degrades an accepting pipeline with nothing in flight for a store found away beside the loop.
    private mutating func degradeBeside(mayHaveWritten: Bool) -> Actions {
        state = .degraded
        // (An open batch that holds decisions is dropped below, which needs a reload too.)
        if !openWaiters.isEmpty || mayHaveWritten { reloadNeeded = true }
        var actions = dropOpen(refusal: .commitFailed)
        actions.rebuild = true
        return actions
    }

    /// A rebuild of the state from the store ended: a degraded engine accepts again when it succeeded.
    /// After a reload the open batch is new (what was gathered while degraded was decided on the state
    /// thrown away). Without one (`reloaded` false, which ``reloadNeeded`` must allow) the state was kept,
    /// and so is whatever the open batch holds: it was decided on that state.
    mutating func rebuilt(succeeded: Bool, reloaded: Bool = true) -> Actions {
        guard succeeded, case .degraded = state, reloaded || !reloadNeeded else { return .none }
        state = .accepting(inFlight: nil)
        guard reloaded else { return .none }
        let actions = dropOpen(refusal: .degraded)
        reloadNeeded = false
        return actions
    }

    /// Everything queued is refused (a degraded or ended engine): the open batch's contents are dropped.
    mutating func refuseOpen() -> Actions {
        dropOpen(refusal: isDegraded ? .degraded : .ended)
    }

    /// Stop was asked: nothing more is decided; what is open and in flight still commits.
    mutating func stop() {
        switch state {
        case .accepting(let commit): state = .stopping(inFlight: commit)
        case .degraded: state = .ended
        case .stopping, .ended: break
        }
    }

    /// The commit loop has made its last commit: whoever still waits is refused, and the pipeline ends.
    /// Nil while a commit is in flight (the loop waits for it first).
    mutating func finish() -> Actions? {
        switch state {
        case .accepting(.some), .stopping(.some):
            return nil
        case .accepting(nil), .stopping(nil), .degraded, .ended:
            state = .ended
            return dropOpen(refusal: .ended)
        }
    }

    /// The open batch as a commit, or nil when there is nothing to commit; a new batch opens.
    private mutating func seal(_ sealing: (inout Batch) -> Void) -> Commit? {
        guard !open.isEmpty || !openWaiters.isEmpty else { return nil }
        lastNumber += 1
        sealing(&open)
        defer {
            open = Batch()
            openWaiters = []
        }
        return Commit(number: lastNumber, batch: open, waiters: openWaiters)
    }

    /// Drops the open batch (and `failed`, a commit that failed) and refuses their waiters; a new batch
    /// opens. Nothing to refuse and nothing in the batch: no actions. Anything decided that is dropped
    /// makes the state in memory differ from the store's (``reloadNeeded``).
    private mutating func dropOpen(refusal: Refusal, with failed: Commit? = nil) -> Actions {
        var actions = Actions()
        actions.refused = (failed?.waiters ?? []) + openWaiters
        actions.dropped = [failed?.batch, open.isEmpty ? nil : open].compactMap { $0 }
        if !actions.dropped.isEmpty { reloadNeeded = true }
        if !actions.refused.isEmpty || !actions.dropped.isEmpty { actions.refusal = refusal }
        open = Batch()
        openWaiters = []
        return actions
    }
}

/// What ``CommitPipeline`` holds as a batch: a new one is empty.
protocol PipelineBatch {
    init()
    /// Whether the batch holds nothing to write.
    var isEmpty: Bool { get }
}
