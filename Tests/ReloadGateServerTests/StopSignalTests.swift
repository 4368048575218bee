import Testing

@testable import ReloadGateServer

/// A sleep on the gateway's stop (``StopSignal``) ends at the raise, or at once after it; without one it
/// lasts its duration; a cancelled one ends at once; and every sleep waiting is woken by one raise. The
/// sleeps are 30 s and "ended" means before 25 s: a loaded full run can hold the test's own tasks for ten
/// seconds and more, and what fails is a sleep that ran its 30 s.
@Suite(.timeLimit(.minutes(2)))
struct StopSignalTests {
    let clock = ContinuousClock()
    let ended: Duration = .seconds(25)

    @Test func aSleepWithoutTheStopLastsItsDuration() async {
        let stop = StopSignal()
        let start = clock.now
        let slept = await stop.sleep(for: .milliseconds(200), on: clock)
        #expect(slept, "a sleep without a stop said it was cut short")
        #expect(start.duration(to: clock.now) >= .milliseconds(200), "a sleep without a stop ended early")
        #expect(!stop.isRaised)
    }

    @Test func theRaiseEndsEverySleepInProgress() async throws {
        let stop = StopSignal()
        let start = clock.now
        let sleeps = (0..<3).map { _ in Task { [clock] in await stop.sleep(for: .seconds(30), on: clock) } }
        try await Task.sleep(for: .milliseconds(100))
        stop.raise()
        for sleep in sleeps {
            #expect(await sleep.value == false, "a sleep cut short by the stop said it lasted")
        }
        #expect(start.duration(to: clock.now) < ended, "the raise did not end the sleeps in progress")
        #expect(stop.isRaised)
    }

    @Test func aSleepAfterTheRaiseEndsAtOnce() async {
        let stop = StopSignal()
        stop.raise()
        let start = clock.now
        #expect(await stop.sleep(for: .seconds(30), on: clock) == false)
        #expect(start.duration(to: clock.now) < ended, "a sleep begun after the raise waited")
    }

    @Test func aCancelledSleepEndsAtOnceAndLeavesNoWaiter() async throws {
        let stop = StopSignal()
        let start = clock.now
        let cancelled = Task { [clock] in await stop.sleep(for: .seconds(30), on: clock) }
        try await Task.sleep(for: .milliseconds(100))
        cancelled.cancel()
        #expect(await cancelled.value == false)
        #expect(start.duration(to: clock.now) < ended, "a cancelled sleep went on")
        #expect(stop.waiting == 0, "the cancelled sleep's waiter was kept")
        // The raise still reaches a sleep that comes after.
        let later = Task { [clock] in await stop.sleep(for: .seconds(30), on: clock) }
        try await Task.sleep(for: .milliseconds(100))
        stop.raise()
        #expect(await later.value == false)
        #expect(start.duration(to: clock.now) < ended)
    }
}
