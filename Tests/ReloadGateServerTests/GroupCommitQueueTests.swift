import Testing

@testable import ReloadGateServer

/// The hand-over to a group commit: arrival order kept, a full queue and a closed one refuse with their
/// own reason (the engine answers 503 ServiceUnavailable and Shutdown from them), and closing ends the
/// loop's signals after what was queued.
struct GroupCommitQueueTests {
    @Test func itemsComeOutInOrderAFullOrClosedQueueRefusesAndClosingEndsTheSignals() async {
        let queue = GroupCommitQueue<Int>(limit: 3)
        #expect([1, 2, 3].map { queue.append($0) == nil } == [true, true, true])
        #expect(queue.append(4) == .full)
        #expect(queue.takeAll() == [1, 2, 3])
        #expect(queue.takeAll().isEmpty)
        #expect(queue.append(5) == nil)
        queue.close()
        #expect(queue.append(6) == .closed)
        #expect(queue.takeAll() == [5])
        // Many wake-ups were asked for; at most one is buffered, then the stream ends.
        var signals = 0
        for await _ in queue.signals { signals += 1 }
        #expect(signals <= 1)
    }

    /// The items are handed over whole, in order, and the queue starts a new array rather than keeping
    /// room for the largest batch it ever held.
    @Test func takingHandsTheArrayOverAndKeepsNoRoom() {
        let queue = GroupCommitQueue<Int>()
        for n in 0..<100_000 { _ = queue.append(n) }
        let taken = queue.takeAll()
        #expect(taken.count == 100_000 && taken.first == 0 && taken.last == 99_999)
        #expect(queue.room < 100_000, "the queue kept room for \(queue.room) items after its largest batch")
        #expect(queue.append(1) == nil)
        #expect(queue.takeAll() == [1])
    }

    /// While the loop's commit is in flight, items are queued without waking it; the commit's end wakes
    /// it once for all of them.
    @Test func heldWakeUpsQueueItemsSilentlyUntilResumed() async {
        let held = GroupCommitQueue<Int>()
        held.holdWakeUps()
        #expect([1, 2, 3].map { held.append($0) == nil } == [true, true, true])
        held.close()
        var signals = 0
        for await _ in held.signals { signals += 1 }
        #expect(signals == 0)
        #expect(held.takeAll() == [1, 2, 3])

        let resumed = GroupCommitQueue<Int>()
        resumed.holdWakeUps()
        #expect(resumed.append(1) == nil)
        resumed.resumeWakeUps()
        #expect(resumed.append(2) == nil)
        resumed.close()
        signals = 0
        for await _ in resumed.signals { signals += 1 }
        #expect(signals == 1)
        #expect(resumed.takeAll() == [1, 2])
    }
}
