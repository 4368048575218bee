import Synchronization

/// The hand-over to a group commit: items arrive from any thread (event loops, tasks) without a task or
/// an actor hop each, and one commit loop takes all that gathered while the previous commit ran, so one
/// transaction (one fsync) serves them all. The door's scheduler engine queues requests here and the
/// delivery state log queues state changes; each loop decides what a commit of its items is.
///
/// The loop waits on ``signals``: at most one wake-up is buffered, however many items arrived.
final class GroupCommitQueue<Item: Sendable>: Sendable {
    /// Why an item was not taken.
    enum Refusal: Error {
        /// The queue holds `limit` items: the committer is behind.
        case full
        /// ``close()`` was called: no more items.
        case closed
    }

    private struct State {
        var items: [Item] = []
        var isOpen = true
    }

    private let state = Mutex(State())
    private let signal: AsyncStream<Void>.Continuation
    /// One element whenever there is something to commit; finished by ``close()``.
    let signals: AsyncStream<Void>
    /// Items held at most; more are refused (``Refusal/full``).
    let limit: Int

    init(limit: Int = .max) {
        self.limit = limit
        (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues `item` and wakes the loop; `nil` when taken, else why not.
    func append(_ item: Item) -> Refusal? {
        let refusal = state.withLock { state -> Refusal? in
            guard state.isOpen else { return .closed }
            guard state.items.count < limit else { return .full }
            state.items.append(item)
            return nil
        }
        if refusal == nil { signal.yield() }
        return refusal
    }

    /// Everything queued so far, in arrival order; the queue is empty afterwards.
    func takeAll() -> [Item] {
        state.withLock { state in
            defer { state.items.removeAll(keepingCapacity: true) }
            return state.items
        }
    }

    /// Wakes the loop without an item (something else is ready to commit).
    func wake() {
        signal.yield()
    }

    /// Refuses new items and ends ``signals`` once the loop has seen the last wake-up; items queued
    /// before are still there for the loop's last ``takeAll()``.
    func close() {
        state.withLock { $0.isOpen = false }
        signal.finish()
    }
}
