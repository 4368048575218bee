import Foundation
import Logging
@testable import ReloadGateServer
import ServiceLifecycle
import Synchronization
import Testing

/// A periodic service's turn that does not end (a store read whose reply was lost: it ends neither by
/// itself nor on cancellation) holds neither the gateway's shutdown nor memory: no other turn starts
/// until it ends, and then the turns go on.
@Suite(.timeLimit(.minutes(2)))
struct PeriodicTurnsTests {
    final class Count: Sendable {
        let value = Atomic(0)
        var now: Int { value.load(ordering: .relaxed) }
    }

    /// Waits `duration` whatever is asked of it (cancellation included).
    static func ignoringCancellation(_ duration: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
                continuation.resume()
            }
        }
    }

    struct Turning: Service {
        let turns: PeriodicTurns
        let started: Count
        /// How long each turn takes (the first one's, the others').
        let first: Duration
        let others: Duration

        func run() async throws {
            await turns.run { [started, first, others] in
                let number = started.value.add(1, ordering: .relaxed).newValue
                await PeriodicTurnsTests.ignoringCancellation(number == 1 ? first : others)
            }
        }
    }

    static let logger = Logger(label: "periodic-turns")

    /// A first turn that takes 5 s against a 100 ms deadline: no turn starts before it ends, then they
    /// go on every 10 ms.
    @Test func noTurnStartsWhileAnAbandonedOneRuns() async throws {
        let started = Count()
        let service = Turning(
            turns: PeriodicTurns(interval: .milliseconds(10), deadline: .milliseconds(100), logger: Self.logger, failure: "turn failed"),
            started: started, first: .seconds(5), others: .zero
        )
        let group = ServiceGroup(configuration: .init(services: [service], logger: Self.logger))
        let running = Task { try await group.run() }
        while started.now < 1 { try await Task.sleep(for: .milliseconds(10)) }
        // Ten deadlines and intervals later the slow turn still runs (it takes 5 s) and no other started.
        try await Task.sleep(for: .seconds(1))
        #expect(started.now == 1, "a turn started while the abandoned one ran")
        for _ in 0..<1000 where started.now < 3 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(started.now >= 3, "the turns did not go on after the slow one ended")
        await group.triggerGracefulShutdown()
        try await running.value
    }

    /// The shutdown does not wait for a turn that has not ended. The turn takes a minute, so that a shutdown
    /// that waited for it is told apart from one slowed by a loaded machine (7.2 s was seen in CI's
    /// parallel tests).
    @Test func theShutdownDoesNotWaitForATurn() async throws {
        let started = Count()
        let service = Turning(
            turns: PeriodicTurns(interval: .milliseconds(10), deadline: .seconds(120), logger: Self.logger, failure: "turn failed"),
            started: started, first: .seconds(60), others: .zero
        )
        let group = ServiceGroup(configuration: .init(services: [service], logger: Self.logger))
        let running = Task { try await group.run() }
        while started.now < 1 { try await Task.sleep(for: .milliseconds(10)) }
        let clock = ContinuousClock()
        let stopping = clock.now
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(stopping.duration(to: clock.now) < .seconds(30), "the shutdown waited for the turn")
    }
}
