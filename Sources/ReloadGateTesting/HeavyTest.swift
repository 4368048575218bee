import Foundation
import Synchronization
public import Testing

/// A test that runs a gateway (in the test process or as a child process), the mock of Apple, a database
/// cluster, a browser, or long CPU-bound loops: at most ``width`` such tests run at once in the test
/// process, and the others wait their turn in the order they asked.
///
/// Swift Testing starts every test of a run at once, and all of them share the process's concurrency pool
/// (one thread per core) and NIO's event loops (one per core). Unbounded, every gateway of the run shares
/// those threads with every other one, and an answer waits behind all of their jobs: a test that bounds an
/// answer, or races one of the gateway's deadlines, then measures the crowd rather than the gateway
/// (docs/TESTING.md, "Heavy tests"). Within the limit a heavy test shares the machine with a known number of
/// neighbours, and the margins of its bounds can say so.
///
/// Apply it to a suite (each of its test cases takes a turn, the suite itself none) or to a test.
/// ``TestGateway``'s `withRunning`, ``ReloadGateProcess``, ``PrivatePostgresCluster`` and the mock's `start`
/// record an issue when they run outside a turn, so a heavy test cannot join the crowd unnoticed. A turn is
/// held by the test case's task and the tasks it starts; a heavy scope nested in it takes no second turn.
public struct HeavyTest: TestCaseScoping {
    /// How many heavy tests run at once: `RG_TEST_HEAVY_WIDTH`, or three per core and at least four.
    public static let width: Int = {
        if let text = ProcessInfo.processInfo.environment["RG_TEST_HEAVY_WIDTH"], let width = Int(text), (1...1_000).contains(width) {
            return width
        }
        return max(4, 3 * ProcessInfo.processInfo.activeProcessorCount)
    }()

    /// The shortest time limit a heavy test may have (an issue is recorded for a shorter one): its wait for a
    /// turn counts toward its limit, and a heavy test may wait most of a run (docs/TESTING.md, "Heavy tests").
    static let shortestTimeLimit: Duration = .seconds(600)

    /// Set in the task of a test case that holds a turn (and inherited by the tasks it starts).
    @TaskLocal public static var holdsATurn = false

    private static let turns = Turns(width)

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !Self.holdsATurn else { return try await function() }
        if let limit = test.timeLimit, limit < Self.shortestTimeLimit {
            Issue.record("a heavy test's time limit counts its wait for a turn: give it at least \(Self.shortestTimeLimit) (it has \(limit))", sourceLocation: test.sourceLocation)
        }
        try await Self.turns.take()
        do {
            try await Self.$holdsATurn.withValue(true) { try await function() }
        } catch {
            Self.turns.give()
            throw error
        }
        Self.turns.give()
    }

    /// Records an issue, in the test that runs it, when the calling task holds no turn: `what` runs
    /// outside the limit.
    public static func expectTurn(_ what: String) {
        guard !holdsATurn else { return }
        Issue.record("\(what) runs outside the heavy tests' limit: add the trait .heavy to the test or its suite (HeavyTest)")
    }
}

extension Trait where Self == HeavyTest {
    /// The test runs a gateway, a child process, the mock, a database cluster, a browser or long loops:
    /// at most ``HeavyTest/width`` run at once (``HeavyTest``).
    public static var heavy: Self { HeavyTest() }
}

/// A counting semaphore whose waiters are served in the order they came; a cancelled waiter leaves the
/// queue with `CancellationError` and takes nothing.
final class Turns: Sendable {
    private struct State {
        var free: Int
        var nextID: UInt64 = 0
        var waiting: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    }

    private let state: Mutex<State>

    init(_ width: Int) {
        state = Mutex(State(free: width))
    }

    /// Waits for a free turn and takes it.
    func take() async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.free > 0, state.waiting.isEmpty {
                        state.free -= 1
                        return .success(())
                    }
                    state.waiting.append((id, continuation))
                    return nil
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiting.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Gives a turn back: to the first waiter, or to the free ones.
    func give() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst().continuation
        }
        next?.resume()
    }
}
