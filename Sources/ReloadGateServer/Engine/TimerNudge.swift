import Synchronization

/// Wakes the door's timer loop before its planned time: the engine nudges it when a commit turn sets a
/// timer earlier than the one the loop sleeps towards. A nudge given while the loop is not waiting is
/// kept for its next wait, so one given between planning and waiting is not lost.
final class TimerNudge: Sendable {
    private struct State {
        var nudged = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    /// Ends the current wait, or the next one.
    func nudge() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.nudged = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns after `duration` on `clock`, at a nudge, or at the task's cancellation, whichever is first.
    func wait(for duration: Duration, on clock: any Clock<Duration>) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(for: duration) }
            group.addTask { await self.nextNudge() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns at the next nudge (at once if one came since the last wait) or at cancellation.
    private func nextNudge() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    // (A cancellation that came before the waiter was stored found none to resume.)
                    if state.nudged || Task.isCancelled {
                        state.nudged = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
