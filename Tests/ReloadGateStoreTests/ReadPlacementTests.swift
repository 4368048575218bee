@testable import ReloadGateStore
import Testing

/// Where the SQLite store's reads wait for the disk (``ReadPlacement``), on instants the test sets, with a
/// read of 5 ms counting as slow for a second: on the asking thread while that leaves a thread of the pool
/// free or the disk is fast, on the store's threads once a read was slow within the last second, or while a
/// read running on its asking thread has taken 5 ms so far.
struct ReadPlacementTests {
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant {
        start.advanced(by: .milliseconds(milliseconds))
    }

    func id(_ place: ReadPlacement.Place) -> UInt64? {
        if case .inline(let id) = place { return id }
        return nil
    }

    @Test func readsStayOnTheirThreadsWhileTheDiskIsFast() throws {
        var placement = ReadPlacement(limit: 1, slow: .milliseconds(5), memory: .seconds(1))
        // Two at once, the second past the limit: the first began 1 ms ago, the disk is fast.
        let first = try #require(id(placement.place(at: at(0))))
        let second = try #require(id(placement.place(at: at(1))))
        placement.ended(first, started: at(0), at: at(2))
        placement.ended(second, started: at(1), at: at(3))
        // A third, long after: still on its thread.
        #expect(id(placement.place(at: at(1_000))) != nil)
    }

    @Test func aSlowReadSendsTheReadsPastTheLimitToTheStoresThreadsForASecond() throws {
        var placement = ReadPlacement(limit: 1, slow: .milliseconds(5), memory: .seconds(1))
        let slow = try #require(id(placement.place(at: at(0))))
        placement.ended(slow, started: at(0), at: at(6))  // 6 ms: slow until 1,006 ms
        // Within the limit a read stays on its thread, whatever the disk does.
        let within = try #require(id(placement.place(at: at(10))))
        // Past it, to the store's threads: the disk was slow 5 ms ago.
        #expect(placement.place(at: at(11)) == .threads)
        placement.ended(within, started: at(10), at: at(12))
        let later = try #require(id(placement.place(at: at(1_004))))
        #expect(placement.place(at: at(1_005)) == .threads, "slow until 1,006 ms")
        // A second after the slow read, fast again: a second read beside the one that began 2 ms ago.
        #expect(id(placement.place(at: at(1_006))) != nil)
        placement.ended(later, started: at(1_004), at: at(1_007))
    }

    @Test func aReadRunningLongOnItsThreadSendsTheNextOneToTheStoresThreads() throws {
        var placement = ReadPlacement(limit: 1, slow: .milliseconds(5), memory: .seconds(1))
        let long = try #require(id(placement.place(at: at(0))))
        // 5 ms into the first read: a second one would leave no thread of the pool free for long.
        #expect(placement.place(at: at(5)) == .threads)
        // Not itself slow yet: once it ends in time, reads stay where they are asked.
        placement.ended(long, started: at(0), at: at(4))
        let next = try #require(id(placement.place(at: at(6))))
        #expect(id(placement.place(at: at(7))) != nil, "the one running began 1 ms ago")
        placement.ended(next, started: at(6), at: at(8))
    }

    @Test func aSlowReadOnTheStoresThreadsCountsToo() throws {
        var placement = ReadPlacement(limit: 1, slow: .milliseconds(5), memory: .seconds(1))
        let first = try #require(id(placement.place(at: at(0))))
        placement.ended(nil, started: at(1), at: at(9))  // a read on the store's threads, 8 ms
        #expect(placement.place(at: at(10)) == .threads)
        placement.ended(first, started: at(0), at: at(11))
    }

    @Test func oneCoreHasNoReadsThatAlwaysStayOnTheirThread() throws {
        var placement = ReadPlacement(limit: 0, slow: .milliseconds(5), memory: .seconds(1))
        let fast = try #require(id(placement.place(at: at(0))), "a fast disk: on its thread")
        placement.ended(fast, started: at(0), at: at(7))
        #expect(placement.place(at: at(8)) == .threads, "the only thread of the pool is not given to a slow disk")
    }
}
