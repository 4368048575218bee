import Testing

@testable import ReloadGateStore

/// ``LateTimer``: a timer that fires more than a second after its time (the process was paused) waits a
/// second more while what it bounds still runs, and only then. Timed only from below: a busy machine may
/// wake any sleep late, never early.
struct LateTimerTests {
    @Test func aTimerFiredAfterAPauseWaitsItsGraceWhileTheOperationRuns() async throws {
        let clock = ContinuousClock()
        // Due 2 s ago: the timer fires at once, late by 2 s, as it does when the process resumes.
        var waited = false
        let took = try await clock.measure {
            waited = try await LateTimer.sleep(until: .now.advanced(by: .seconds(-2))) { true }
        }
        #expect(waited)
        #expect(took >= LateTimer.grace, "\(took)")
        // The same, but the operation ended meanwhile: no further wait.
        #expect(try await LateTimer.sleep(until: .now.advanced(by: .seconds(-2))) { false } == false)
        // A timer is late only past its tolerance.
        #expect(LateTimer.firedAfterPause(due: .now.advanced(by: .seconds(-2))))
        #expect(!LateTimer.firedAfterPause(due: .now.advanced(by: .seconds(10))))
    }
}
