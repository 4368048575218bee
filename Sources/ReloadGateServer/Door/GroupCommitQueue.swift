import Synchronization

/// The hand-over to a group commit: items arrive from any thread (event loops, tasks) without a task or
/// an actor hop each, and one commit loop takes all that gathered while the previous commit ran, so one
/// transaction (one fsync) serves them all. The door's scheduler engine queues requests here and the
/// delivery state log queues state changes; each loop decides what a commit of its items is.
///
/// The loop waits on ``signals``: at most one wake-up is buffered, however many items arrived. While
/// the loop has a commit in flight it may hold the wake-ups of new items (``holdWakeUps()``): they
/// could not commit before that commit ends anyway, and the end wakes the loop (``resumeWakeUps()``),
/// which then takes everything that gathered in one turn instead of one turn per item.
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
        /// Whether a new item wakes the loop (not while a commit it waits for is in flight).
        var appendWakes = true
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
        let (refusal, wakes) = state.withLock { state -> (Refusal?, Bool) in
            guard state.isOpen else { return (.closed, false) }
            guard state.items.count < limit else { return (.full, false) }
            state.items.append(item)
            return (nil, state.appendWakes)
        }
        if wakes { signal.yield() }
        return refusal
    }

    /// New items stop waking the loop until ``resumeWakeUps()``: the loop has started a commit, and its
    /// end will wake it.
    func holdWakeUps() {
        state.withLock { $0.appendWakes = false }
    }

    /// New items wake the loop again, and the loop is woken now (for what gathered meanwhile).
    func resumeWakeUps() {
        state.withLock { $0.appendWakes = true }
        signal.yield()
    }

    /// Everything queued so far, in arrival order; the queue is empty afterwards. The array is handed
    /// over whole and the queue starts a new one: emptying it in place while the caller's copy shares it
    /// would allocate, at every commit, a new array with room for the largest batch ever queued.
    func takeAll() -> [Item] {
        state.withLock { state in
            var taken: [Item] = []
            swap(&taken, &state.items)
            return taken
        }
    }

    /// The items the queue has room for before it grows (tests).
    var room: Int { state.withLock { $0.items.capacity } }

    /// Wakes the loop without an item (something else is ready to commit).
    func wake() {
        signal.yield()
    }

    /// Refuses new items and ends ``signals`` once the loop has seen the last wake-up; items queued
    /// before are still there for the loop's last ``takeAll()``.
    func close() {
        state.withLock { state in
            state.isOpen = false
            state.appendWakes = true
        }
        signal.finish()
    }
}
