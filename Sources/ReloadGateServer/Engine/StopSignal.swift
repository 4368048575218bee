import Synchronization

/// The gateway's stop, for the work that must end at it: raised once (``raise()``), never lowered. A
/// wait that the stop should cut short (a delivery's backoff before its retry) sleeps on it
/// (``sleep(for:on:)``) and is woken by the raise, instead of looking at a flag every so often.
final class StopSignal: Sendable {
    private struct State {
        var raised = false
        /// The sleeps waiting for the raise, by their number.
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    init() {}

    /// Whether the stop was raised.
    var isRaised: Bool { state.withLock { $0.raised } }

    /// Sleeps waiting for the raise now (tests: a sleep that ended keeps no waiter).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Raises the stop: every sleep ends now, and every later one at once.
    func raise() {
        let waiters = state.withLock { state in
            state.raised = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Sleeps for `duration` on `clock`. Returns `true` when the duration has passed, `false` when the
    /// stop was raised (before or meanwhile) or the task was cancelled first.
    func sleep(for duration: Duration, on clock: any Clock<Duration>) async -> Bool {
        guard !isRaised else { return false }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await clock.sleep(for: duration)) != nil }
            group.addTask {
                await self.raised()
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Returns at the raise (at once if it came already) or at the task's cancellation.
    private func raised() async {
        let number = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    // (A cancellation that came before the waiter was stored found none to resume.)
                    if state.raised || Task.isCancelled { return true }
                    state.waiters[number] = waiter
                    return false
                }
                if now { waiter.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: number) }
            waiter?.resume()
        }
    }
}
