import Synchronization

/// Counts the requests in flight and, once draining, refuses new ones, so that a graceful shutdown
/// lets every accepted request finish before the listener closes its connections.
///
/// Why the gateway does this itself: Hummingbird 2.28's HTTP/2 graceful close sends its final GOAWAY and
/// closes the connection while a stream is still open, so a request in flight on HTTP/2 when SIGTERM
/// arrives would be lost (seen in `GracefulShutdownTests`; Hummingbird's own test of that path is
/// disabled). Draining first means the listener only ever closes idle connections.
public final class RequestDrain: Sendable {
    private struct State {
        var inFlight = 0
        var draining = false
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Registers a request; `false` (and nothing registered) once draining has begun.
    public func begin() -> Bool {
        state.withLock { state in
            guard !state.draining else { return false }
            state.inFlight += 1
            return true
        }
    }

    /// Ends a request registered with ``begin()``.
    public func end() {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.inFlight -= 1
            guard state.draining, state.inFlight == 0 else { return [] }
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The number of requests in flight.
    public var inFlight: Int { state.withLock { $0.inFlight } }

    /// Whether new requests are refused.
    public var isDraining: Bool { state.withLock { $0.draining } }

    /// Refuses new requests from now on and returns once none is in flight, or when the calling task
    /// is cancelled (the grace period is over).
    public func drain() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    state.draining = true
                    if state.inFlight == 0 || Task.isCancelled { return true }
                    state.idleWaiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { state in
                defer { state.idleWaiters = [] }
                return state.idleWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }
}
