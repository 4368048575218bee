import Dispatch
import ReloadGateStore
import Synchronization
import Testing

/// `abandoning(after:timedOut:returnOnCancel:_:)` with an operation that does not end on cancellation (as a
/// database client's query that is already sent): the wait still ends at its deadline, or at once when
/// the caller is cancelled and may return; a write's caller waits for it. (The operations take a minute, so
/// that the bounds hold on a machine busy with the whole suite.)
@Suite(.timeLimit(.minutes(1)))
struct AbandoningTests {
    struct TimedOut: Error {}

    final class Flag: Sendable {
        let value = Mutex(false)
    }

    /// Ends after `seconds` whatever happens (no cancellation reaches it), and says so in `ended`.
    static func uncancellable(_ seconds: Double, ended: Flag? = nil) async -> Int {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                ended?.value.withLock { $0 = true }
                continuation.resume(returning: 7)
            }
        }
    }

    @Test func theDeadlineEndsTheWaitForAnOperationThatIgnoresCancellation() async {
        let started = ContinuousClock.now
        await #expect(throws: TimedOut.self) {
            try await abandoning(after: .milliseconds(100), timedOut: { TimedOut() }) { await Self.uncancellable(60) }
        }
        #expect(started.duration(to: .now) < .seconds(30), "waited for the operation (60 s)")
    }

    @Test func anOperationThatEndsInTimeGivesItsResult() async throws {
        #expect(try await abandoning(after: .seconds(30), timedOut: { TimedOut() }) { await Self.uncancellable(0.01) } == 7)
        await #expect(throws: TimedOut.self) {
            try await abandoning(after: .seconds(30), timedOut: { CancellationError() }) { throw TimedOut() }
        }
    }

    @Test func aCancelledCallerReturnsAtOnceUnlessItWaitsForAWrite() async throws {
        let started = ContinuousClock.now
        let reading = Task { try await abandoning(after: nil, timedOut: { TimedOut() }) { await Self.uncancellable(60) } }
        reading.cancel()
        await #expect(throws: CancellationError.self) { try await reading.value }
        #expect(started.duration(to: .now) < .seconds(30), "waited for the operation (60 s)")

        let ended = Flag()
        let writing = Task {
            try await abandoning(after: .seconds(30), timedOut: { TimedOut() }, returnOnCancel: false) {
                await Self.uncancellable(0.3, ended: ended)
            }
        }
        writing.cancel()
        #expect(try await writing.value == 7)
        #expect(ended.value.withLock { $0 }, "the write's caller went on before its write ended")
    }
}
