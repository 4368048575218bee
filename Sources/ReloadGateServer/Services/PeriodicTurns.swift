import Logging
import ReloadGateStore
import ServiceLifecycle
import Synchronization

/// What a periodic service does until the gateway's graceful shutdown: a turn every `interval`, each
/// abandoned past `deadline` and at once when the shutdown comes. A turn reads the store, and a read of a
/// store that does not answer (a connection whose reply was lost, a server stopped mid-query) does not end
/// by itself or on cancellation: waited for, it would hold the gateway's shutdown as long. An abandoned
/// turn runs on to its end in the background, and no turn starts while it does (turns piling up on a
/// store that never answers would hold memory without bound); what it would have done is done by the
/// first turn after it. A failed or skipped turn is logged once until one succeeds again.
struct PeriodicTurns: Sendable {
    var interval: Duration
    var deadline: Duration
    let logger: Logger
    /// The warning logged when a turn fails (with the error).
    let failure: Logger.Message

    /// The turn took longer than ``deadline``.
    struct TimedOut: Error, CustomStringConvertible {
        let deadline: Duration
        var description: String { "no answer within \(deadline)" }
    }

    /// An abandoned turn has not ended yet: this one is skipped.
    struct LastTurnRunning: Error, CustomStringConvertible {
        var description: String { "the last turn, abandoned, has not ended yet" }
    }

    func run(_ turn: @escaping @Sendable () async throws -> Void) async {
        let running = Mutex(false)
        await cancelWhenGracefulShutdown {
            var failing = false
            while !Task.isCancelled {
                do {
                    guard running.withLock({ running in
                        defer { running = true }
                        return !running
                    }) else { throw LastTurnRunning() }
                    try await abandoning(after: deadline, timedOut: { [deadline] in TimedOut(deadline: deadline) }) {
                        defer { running.withLock { $0 = false } }
                        try await turn()
                    }
                    failing = false
                } catch is CancellationError {
                    return
                } catch {
                    if !failing { logger.warning(failure, metadata: ["error": "\(error)"]) }
                    failing = true
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
