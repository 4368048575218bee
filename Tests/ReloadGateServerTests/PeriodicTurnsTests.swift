import Logging
@testable import ReloadGateServer
import ServiceLifecycle
import Synchronization
import Testing

/// A periodic service's turn that never ends (a store read whose reply was lost: it ends neither by itself
/// nor on cancellation) holds neither the next turns nor the gateway's shutdown.
@Suite(.timeLimit(.minutes(2)))
struct PeriodicTurnsTests {
    /// A turn that never ends, whatever is asked of it.
    static func forever() async {
        await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
    }

    final class Count: Sendable {
        let value = Atomic(0)
    }

    struct Turning: Service {
        let turns: PeriodicTurns
        let started: Count

        func run() async throws {
            await turns.run { [started] in
                started.value.add(1, ordering: .relaxed)
                await PeriodicTurnsTests.forever()
            }
        }
    }

    @Test func aTurnThatNeverEndsIsAbandonedAtItsDeadlineAndAtTheShutdown() async throws {
        let logger = Logger(label: "periodic-turns")
        let started = Count()
        let service = Turning(
            turns: PeriodicTurns(interval: .milliseconds(10), deadline: .milliseconds(200), logger: logger, failure: "turn failed"), started: started
        )
        let group = ServiceGroup(configuration: .init(services: [service], logger: logger))
        let clock = ContinuousClock()
        let running = Task { try await group.run() }
        // Past each deadline the next turn starts.
        while started.value.load(ordering: .relaxed) < 3 { try await Task.sleep(for: .milliseconds(20)) }
        let stopping = clock.now
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(stopping.duration(to: clock.now) < .seconds(5), "the shutdown waited for the turn")
    }
}
