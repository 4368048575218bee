/// The scheduler engine's group commit, as a state machine: which batch commits when, and who is answered
/// with what. It holds the waiters (whoever waits for a batch's commit) and the number of the commit in
/// flight; the batches themselves, the store and the tasks belong to the executor (``SchedulerEngine`` and
/// the commit loop of ``DoorService``), which performs the actions each event returns.
///
/// Requests are decided into the open batch while the batch before it commits (at most one commit in
/// flight). A commit that fails refuses its own waiters and the open batch's (decided on its state), and
/// the engine is degraded until its state is rebuilt from the store. Every waiter is answered exactly once:
/// each state that holds waiters has one way out, and each way out answers them (``finish()`` answers
/// whatever is left).
struct CommitPipeline<Waiter> {
    /// A commit in flight: its number and whoever waits for it.
    struct Commit {
        var number: Int
        var waiters: [Waiter]
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

    /// What the executor does, in this order: answer `succeeded`, refuse `refused` (with `refusal`), drop
    /// the open batch's contents when `discardOpenBatch`, seal the open batch and commit it as
    /// `startCommit`, rebuild the state from the store when `rebuild`.
    struct Actions {
        var succeeded: [Waiter] = []
        var refused: [Waiter] = []
        var refusal: Refusal?
        var discardOpenBatch = false
        var startCommit: Int?
        var rebuild = false

        static var none: Actions { Actions() }
    }

    private(set) var state: State = .accepting(inFlight: nil)
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

    /// The number of the commit in flight.
    var inFlight: Int? {
        switch state {
        case .accepting(let commit?), .stopping(let commit?): commit.number
        default: nil
        }
    }

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
    /// something (`batchIsEmpty` says whether the batch itself does) or someone waits for it.
    mutating func turn(batchIsEmpty: Bool) -> Actions {
        switch state {
        case .accepting(nil):
            guard let commit = seal(batchIsEmpty: batchIsEmpty) else { return .none }
            state = .accepting(inFlight: commit)
            return Actions(startCommit: commit.number)
        case .stopping(nil):
            guard let commit = seal(batchIsEmpty: batchIsEmpty) else { return .none }
            state = .stopping(inFlight: commit)
            return Actions(startCommit: commit.number)
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
            guard succeeded else {
                let refused = commit.waiters + openWaiters
                openWaiters = []
                state = .degraded
                return Actions(refused: refused, refusal: .commitFailed, discardOpenBatch: true, rebuild: true)
            }
            state = .accepting(inFlight: nil)
            return Actions(succeeded: commit.waiters)
        case .stopping(let commit?) where commit.number == number:
            guard succeeded else {
                let refused = commit.waiters + openWaiters
                openWaiters = []
                state = .ended
                return Actions(refused: refused, refusal: .commitFailed, discardOpenBatch: true)
            }
            state = .stopping(inFlight: nil)
            return Actions(succeeded: commit.waiters)
        default:
            preconditionFailure("commit \(number) ended, but it is not the one in flight (\(state))")
        }
    }

    /// A write of its own (a device adopted by its first push) found that the store cannot commit now (a
    /// lock held past the deadline, a full disk). With no commit in flight the open batch would meet the
    /// same: its waiters are refused, its contents dropped, and the engine degrades until its state is
    /// rebuilt (a probe passes). With a commit in flight, that commit's end decides.
    mutating func storeFailed() -> Actions {
        guard case .accepting(nil) = state else { return .none }
        let refused = openWaiters
        openWaiters = []
        state = .degraded
        return Actions(refused: refused, refusal: .commitFailed, discardOpenBatch: true, rebuild: true)
    }

    /// A rebuild of the state from the store ended: a degraded engine accepts again when it succeeded.
    mutating func rebuilt(succeeded: Bool) {
        if succeeded, case .degraded = state { state = .accepting(inFlight: nil) }
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
            let refused = openWaiters
            openWaiters = []
            state = .ended
            return Actions(refused: refused, refusal: refused.isEmpty ? nil : .ended, discardOpenBatch: !refused.isEmpty)
        }
    }

    /// The open batch as a commit, or nil when there is nothing to commit.
    private mutating func seal(batchIsEmpty: Bool) -> Commit? {
        guard !batchIsEmpty || !openWaiters.isEmpty else { return nil }
        lastNumber += 1
        defer { openWaiters = [] }
        return Commit(number: lastNumber, waiters: openWaiters)
    }
}
