import NIOCore
import NIOPosix
import ReloadGateServer
public import Testing

/// A test that is light but races one of the gateway's waits beside a loop it turns itself
/// (`HandBackWaitTests` turns the engine's commit loop while a hand-back waits for a commit): each test
/// case runs on an event loop made for it and shut down after it. On the ``OffThePool`` loop such a test's
/// jobs would wait behind other tests' seconds of CPU-bound work, and on the concurrency pool behind the
/// run's crowd (docs/TESTING.md, "Heavy tests, and what a test may time").
///
/// As with ``OffThePool``, the loop is the test task's preferred executor: what it awaits that is not an
/// actor's runs there, and so do its child tasks, not a `Task { }` it starts.
public struct OnALoopOfItsOwn: TestCaseScoping {
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let result: Result<Void, any Error>
        do {
            try await withTaskExecutorPreference(EventLoopTaskExecutor(group.next())) { try await function() }
            result = .success(())
        } catch {
            result = .failure(error)
        }
        try await group.shutdownGracefully()
        try result.get()
    }
}

extension Trait where Self == OnALoopOfItsOwn {
    /// The test races a wait of the gateway's beside a loop it turns itself: each test case runs on an
    /// event loop of its own (``OnALoopOfItsOwn``).
    public static var onALoopOfItsOwn: Self { OnALoopOfItsOwn() }
}
