import Synchronization

/// A hold on one kind of store read, for tests of what the gateway does while a read does not answer (a
/// connection that died under it, a database slow to scan): while held, each read waits at ``pass()``
/// until ``release()``.
public final class ReadHold: Sendable {
    private struct State {
        var held = false
        var waiting: [CheckedContinuation<Void, Never>] = []
        var begun = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Reads from now on wait until ``release()``.
    public func hold() {
        state.withLock { $0.held = true }
    }

    /// Lets the waiting reads go on, and later ones through.
    public func release() {
        let waiting = state.withLock { state in
            state.held = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// How many reads wait at the hold now.
    public var waiting: Int { state.withLock { $0.waiting.count } }

    /// How many reads have begun, held or not.
    public var begun: Int { state.withLock { $0.begun } }

    /// Called by the read before it reads: waits while the hold is on.
    func pass() async {
        await withCheckedContinuation { continuation in
            let passes = state.withLock { state in
                state.begun += 1
                if state.held { state.waiting.append(continuation) }
                return !state.held
            }
            if passes { continuation.resume() }
        }
    }
}
