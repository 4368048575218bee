import Synchronization

/// Waits for `operation` until it ends, until `limit` passes, or (with `returnOnCancel`) until the calling
/// task is cancelled, whichever comes first, and never longer: the operation runs in a task of its own,
/// which is cancelled and left to end by itself when the wait ends first.
///
/// Why not a task group racing a timer: a group waits for every child before it returns, so such a
/// deadline holds only as long as the operation ends promptly on cancellation. A database client's
/// operation does not always (a query that is sent runs to its end; a connection closed under a
/// `LISTEN` being set up left the gateway's shutdown waiting forever in a full test run, 2026-11-26,
/// docs/DECISIONS.md "A deadline does not wait for what it abandons").
/// - Parameters:
///   - limit: how long to wait; `nil`: until the operation ends or the caller is cancelled.
///   - timedOut: the error thrown when `limit` passes first.
///   - returnOnCancel: `true`: the caller's cancellation ends the wait at once (for operations that
///     change nothing, or never end by themselves, like a listener); `false`: it is passed on to the
///     operation, and the wait goes on until the operation ends or `limit` passes (for writes: a caller
///     that goes on after its write was abandoned may meet that write later, like a stopping gateway
///     releasing leases that its last heartbeat, still running, renews).
/// - Throws: the operation's error, `timedOut()`, or `CancellationError` when the caller was cancelled.
public func abandoning<T: Sendable>(
    after limit: Duration?,
    timedOut: @escaping @Sendable () -> any Error,
    returnOnCancel: Bool = true,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = AbandoningOutcome<T>()
    if returnOnCancel, Task.isCancelled { throw CancellationError() }
    let work = Task {
        do { outcome.settle(.success(try await operation())) } catch { outcome.settle(.failure(error)) }
    }
    let timer = limit.map { limit in
        Task {
            guard (try? await LateTimer.sleep(until: .now.advanced(by: limit)) { !outcome.isSettled }) != nil else { return }
            outcome.settle(.failure(timedOut()))
        }
    }
    defer {
        work.cancel()
        timer?.cancel()
    }
    return try await withTaskCancellationHandler {
        try await outcome.value()
    } onCancel: {
        if returnOnCancel { outcome.settle(.failure(CancellationError())) } else { work.cancel() }
    }
}

/// The first of the operation's result, the timeout and the caller's cancellation; the waiter is
/// resumed exactly once.
private final class AbandoningOutcome<T: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<T, any Error>)
        case settled(Result<T, any Error>)
        case delivered
    }

    private let state = Mutex<State>(.pending)

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let settled = state.withLock { state -> Result<T, any Error>? in
                switch state {
                case .pending:
                    state = .waiting(continuation)
                    return nil
                case .settled(let result):
                    state = .delivered
                    return result
                case .waiting, .delivered:
                    preconditionFailure("one waiter only")
                }
            }
            if let settled { continuation.resume(with: settled) }
        }
    }

    /// Whether the wait has its outcome.
    var isSettled: Bool {
        state.withLock { state in
            switch state {
            case .pending, .waiting: false
            case .settled, .delivered: true
            }
        }
    }

    func settle(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            switch state {
            case .pending:
                state = .settled(result)
                return nil
            case .waiting(let continuation):
                state = .delivered
                return continuation
            case .settled, .delivered:
                return nil
            }
        }
        waiter?.resume(with: result)
    }
}
