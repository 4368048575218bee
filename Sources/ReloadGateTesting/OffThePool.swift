import NIOCore
import NIOPosix
import ReloadGateServer
public import Testing

/// A test whose own work is long and CPU-bound (generated runs, property loops, documents parsed and
/// searched in a debug build): it runs on a thread of its own, shared by such tests only (their work runs
/// there one piece at a time, a synchronous test whole), instead of on the process's concurrency pool.
///
/// The pool has one thread per core, and every test of a run shares it. A test case that computes for
/// seconds without suspending holds one of its threads for that long, and two of them hold the whole pool:
/// meanwhile no other test's task runs, and a test that bounds an answer or races one of the gateway's
/// deadlines measures them instead (docs/TESTING.md, "Heavy tests"). On its own thread such a test shares
/// the cores through the kernel's scheduler, which slices in milliseconds, and the pool stays free.
///
/// Apply it to a suite (each of its test cases runs there) or to a test. The test runs with the thread as its
/// task's preferred executor: what it awaits that is not an actor's runs there too, and so do its child
/// tasks (`async let`, task groups), not a `Task { }` it starts. The task's locals (the test itself, where
/// its issues are recorded) go with it.
public struct OffThePool: TestCaseScoping {
    /// The one event loop these tests run on, for the process's life.
    private static let executor = EventLoopTaskExecutor(MultiThreadedEventLoopGroup(numberOfThreads: 1).next())

    /// Whether the caller runs on that loop's thread.
    public static var isCurrent: Bool { executor.eventLoop.inEventLoop }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(Self.executor) { try await function() }
    }
}

extension Trait where Self == OffThePool {
    /// The test's work is long and CPU-bound: it runs on a thread shared by such tests only, and leaves
    /// the concurrency pool to the other tests (``OffThePool``).
    public static var offThePool: Self { OffThePool() }
}
