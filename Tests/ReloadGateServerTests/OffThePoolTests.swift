import NIOPosix
import ReloadGateTesting
import Testing

/// `.offThePool` runs a test on its own event loop's thread, before and after the test awaits, and leaves
/// the other tests on the concurrency pool.
struct OffThePoolTests {
    @Test(.offThePool) func aTestWithTheTraitRunsOnTheLoopAfterItsAwaitsToo() async throws {
        #expect(OffThePool.isCurrent)
        try await Task.sleep(for: .milliseconds(20))
        #expect(OffThePool.isCurrent)
        async let inChild = OffThePool.isCurrent
        #expect(await inChild, "a child task prefers the loop too")
    }

    @Test func aTestWithoutItRunsOnThePool() async {
        #expect(!OffThePool.isCurrent)
        await Task.yield()
        #expect(!OffThePool.isCurrent)
    }

    @Suite(.offThePool) struct ASuiteWithTheTrait {
        @Test(arguments: [1, 2]) func eachTestCaseRunsOnTheLoop(_ number: Int) {
            #expect(OffThePool.isCurrent)
        }
    }
}

/// `.onALoopOfItsOwn` runs each test case on an event loop made for it: neither the pool nor the
/// `.offThePool` loop, before and after the test awaits, and its child tasks there too.
struct OnALoopOfItsOwnTests {
    @Test(.onALoopOfItsOwn) func aTestWithTheTraitRunsOnALoopThatIsNotTheSharedOne() async throws {
        #expect(MultiThreadedEventLoopGroup.currentEventLoop != nil)
        #expect(!OffThePool.isCurrent)
        try await Task.sleep(for: .milliseconds(20))
        #expect(MultiThreadedEventLoopGroup.currentEventLoop != nil)
        async let inChild = MultiThreadedEventLoopGroup.currentEventLoop != nil
        #expect(await inChild, "a child task prefers the loop too")
    }

    @Test func aTestWithoutItRunsOnNoLoop() async {
        #expect(MultiThreadedEventLoopGroup.currentEventLoop == nil)
    }
}
