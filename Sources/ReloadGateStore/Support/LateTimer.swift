/// A timer that fires well after its time means the process did not run meanwhile: stopped (SIGSTOP, a
/// debugger, its virtual machine paused) or starved of CPU. What the timer bounds may have ended in that
/// time, its answer waiting unread on a socket, and at the resume the timer and the socket's reader wake
/// together. The store's timers then wait ``grace`` more before they give an operation up, so that a pause
/// of the gateway is not taken for a database that stopped answering: closing the connection would leave
/// the write's outcome unknown, and the engine refusing requests until it has reloaded its state
/// (docs/DECISIONS.md, "A store timer that fires after a pause waits a second more").
enum LateTimer {
    /// Later than this, a timer is taken to have fired after a pause.
    static let tolerance: Duration = .seconds(1)
    /// The further wait after a pause.
    static let grace: Duration = .seconds(1)

    /// Whether a timer due at `due` fires, now, late enough to have been held by a pause.
    static func firedAfterPause(due: ContinuousClock.Instant) -> Bool {
        due.duration(to: .now) > tolerance
    }

    /// Sleeps until `due`; when that came after a pause and `stillRunning()` holds, ``grace`` more.
    /// - Returns: whether it waited the grace.
    /// - Throws: `CancellationError` when the task is cancelled.
    @discardableResult
    static func sleep(until due: ContinuousClock.Instant, stillRunning: () -> Bool) async throws -> Bool {
        try await Task.sleep(until: due, clock: .continuous)
        guard firedAfterPause(due: due), stillRunning() else { return false }
        try await Task.sleep(for: grace)
        return true
    }
}
