import Foundation
import HTTPTypes
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The door's timer loop sleeps until the next timer, and a commit that sets an earlier one wakes it
/// (``TimerNudge``): with the loop's bound at a minute, a reload due a second after the push still leaves
/// a second after it, not when the loop would have looked at the clock by itself.
@Suite(.timeLimit(.minutes(2)))
struct TimerLoopTests {
    static let devicePath = "/v1/apps/\(RouterTier.bundle)/devices/\(RouterTier.token)"

    @Test func aTimerSetWhileTheLoopSleepsWakesIt() async throws {
        var policy = SchedulingPolicy()
        policy.lowPriorityDelay = 1
        policy.absorbWindow = 0
        try await RouterTier.with(scheduling: SchedulerConfiguration(defaultPolicy: policy), timerResolution: .seconds(60)) { tier in
            let outbox = tier.directory.path("data/outbox.jsonl")
            @Sendable func lines() -> Int {
                ((try? String(contentsOfFile: outbox, encoding: .utf8)) ?? "").split(separator: "\n").count
            }
            try await tier.api { client in
                let widget = #"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall"}]}"#
                #expect(try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: widget).status == .ok)
                // The loop has planned its sleep (nothing was due): a minute.
                try await Task.sleep(for: .milliseconds(200))
                let pushed = ContinuousClock.now
                let reload = try await client.webhook(RouterTier.bundle, body: #"{"priority":5}"#, secret: tier.credentials.webhookSecret)
                #expect(reload.status == .accepted, "\(reload.text)")
                #expect((reload.json["decisions"] as? [String: Int])?["deferred"] == 1, "\(reload.text)")
                #expect(lines() == 0)
                // Due one second after the push: written then (20 s for a loaded machine, a third of the bound).
                let written = try await eventually(within: .seconds(20), every: .milliseconds(20)) { lines() == 1 }
                #expect(written, "the reload due in a second was not sent within 20 s: the loop slept towards its bound")
                let took = pushed.duration(to: .now)
                #expect(took >= .milliseconds(900), "sent before it was due: \(took)")
            }
        }
    }

    /// A nudge ends the wait in progress, or the next one when none is (it is not lost between the loop's
    /// planning and its wait); without one a wait lasts its duration; a cancelled wait ends at once.
    /// The waits are 30 s and "ended" means before 25 s: a loaded full run can hold the test's own tasks
    /// for ten seconds and more, and what fails is a wait that ran its 30 s.
    @Test func aNudgeEndsTheWaitInProgressOrTheNext() async throws {
        let nudge = TimerNudge()
        let clock = ContinuousClock()
        let ended: Duration = .seconds(25)
        nudge.nudge()
        var start = clock.now
        await nudge.wait(for: .seconds(30), on: clock)
        #expect(start.duration(to: clock.now) < ended, "a nudge given before the wait was lost")

        start = clock.now
        async let waited: Void = nudge.wait(for: .seconds(30), on: clock)
        try await Task.sleep(for: .milliseconds(100))
        nudge.nudge()
        await waited
        #expect(start.duration(to: clock.now) < ended, "a nudge during the wait did not end it")

        start = clock.now
        await nudge.wait(for: .milliseconds(200), on: clock)
        #expect(start.duration(to: clock.now) >= .milliseconds(200), "a wait without a nudge ended early")

        start = clock.now
        let cancelled = Task { await nudge.wait(for: .seconds(30), on: clock) }
        try await Task.sleep(for: .milliseconds(100))
        cancelled.cancel()
        await cancelled.value
        #expect(start.duration(to: clock.now) < ended, "a cancelled wait went on")
    }
}
