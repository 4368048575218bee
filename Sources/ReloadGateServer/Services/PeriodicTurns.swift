import Logging
import ReloadGateStore
import ServiceLifecycle

/// What a periodic service does until the gateway's graceful shutdown: a turn every `interval`, each
/// abandoned past `deadline` and at once when the shutdown comes. A turn reads the store, and a read of a
/// store that does not answer (a connection whose reply was lost, a server stopped mid-query) does not end
/// by itself or on cancellation: waited for, it held the gateway's shutdown for as long (ten minutes, until
/// the test's time limit, in a full run after a PostgreSQL outage). An abandoned turn runs on to its end
/// in the background; what it reads is tried again at the next turn. A failed turn is logged once until
/// one succeeds again.
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

    func run(_ turn: @escaping @Sendable () async throws -> Void) async {
        await cancelWhenGracefulShutdown {
            var failing = false
            while !Task.isCancelled {
                do {
                    try await abandoning(after: deadline, timedOut: { [deadline] in TimedOut(deadline: deadline) }, turn)
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
