import ReloadGateCore
import Testing

/// The scheduling rules for WidgetKit controls (issue 29), with numbers computed by hand from the controls'
/// default policy (`SchedulingPolicy.controlsDefault`: 96 reloads a day, so one token per 86,400 s / 96 =
/// 15 minutes; a burst of 8; 60 s between two reloads). A control is its own token (its own device) with one
/// instance: nothing coalesces with it, and it has no timeline to absorb into.
struct ControlSchedulingTests {
    @Test func aControlHasTheControlsPolicyAndAWidgetOfTheSameKindKeepsTheWidgetsPolicy() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "garage", pushType: .controls)
        harness.register(2, device: 2, kind: "garage")
        // A minute apart: the control's interval (60 s) allows each; the widget's (300 s) does not.
        #expect(harness.push([1], atMinutes: 0).map(\.kind) == [.scheduled])
        #expect(harness.push([1], atMinutes: 1).map(\.kind) == [.scheduled])
        #expect(harness.push([2], atMinutes: 1).map(\.kind) == [.scheduled])
        let widget = harness.push([2], atMinutes: 2)
        #expect(widget.first?.reason == .waitingForInterval(until: SchedulerHarness.at(minutes: 6), lastReload: SchedulerHarness.at(minutes: 1), minimumInterval: 300))
    }

    // Rule 1 for a control: the burst of 8, then one token per 15 minutes.
    @Test func aControlsBudgetIsEightThenOneEveryFifteenMinutes() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "garage", pushType: .controls)
        for minute in 0..<8 {
            #expect(harness.push([1], atMinutes: Double(minute)).map(\.kind) == [.scheduled], "minute \(minute)")
        }
        // Eight charges at minutes 0-7 put the bucket's full time at 8 x 15 = 120 min; a token is there
        // again when it is at most (8 - 1) x 15 = 105 min ahead: at minute 15.
        let ninth = harness.push([1], atMinutes: 8)
        #expect(ninth.map(\.kind) == [.deferred])
        #expect(ninth.first?.reason == .waitingForBudget(until: SchedulerHarness.at(minutes: 15), dailyBudget: 96, burst: 8))
        harness.tick(toMinutes: 40)
        #expect(harness.deliveryMinutes == [0, 1, 2, 3, 4, 5, 6, 7, 15])
        // At minute 40: the bucket was full again at 135 min (120 + 15 for the ninth), 95 min ahead: 8 -
        // ceil(95 / 15) = 8 - 7 = 1 token.
        #expect(harness.scheduler.tokens(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: 40)) == 1)
    }

    // Rules 2 and 6: pushes within the minute merge into one pending reload, delivered once.
    @Test func pushesToAControlWithinItsIntervalMergeIntoOneReload() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "garage", pushType: .controls)
        harness.push([1], atMinutes: 0)
        let second = harness.push([1], atMinutes: 0.25)
        #expect(second.first?.kind == .deferred)
        #expect(second.first?.reason == .waitingForInterval(until: SchedulerHarness.at(minutes: 1), lastReload: SchedulerHarness.start, minimumInterval: 60))
        let third = harness.push([1], atMinutes: 0.5)
        #expect(third.first?.kind == .merged)
        #expect(third.first?.reason == .mergedIntoPending(due: SchedulerHarness.at(minutes: 1), requests: 2))
        harness.tick(toMinutes: 3)
        #expect(harness.deliveryMinutes == [0, 1])
        #expect(Set(harness.deliveries[1].requests) == [2, 3])
        #expect(harness.deliveries[1].reloaded.map(\.instance) == [InstanceHandle(1)])
    }

    // Rule 7: a push that must go now or never (`apns-expiration: 0`) within the interval expires.
    @Test func aNowOrNeverPushWithinTheIntervalExpires() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "garage", pushType: .controls)
        harness.push([1], atMinutes: 0)
        let late = harness.push([1], atMinutes: 0.5, expiration: SchedulerHarness.at(minutes: 0.5))
        #expect(late.first?.kind == .expired)
        #expect(late.first?.reason == .expired(earliest: SchedulerHarness.at(minutes: 1), expiration: SchedulerHarness.at(minutes: 0.5)))
    }

    // No coalescing across tokens: two controls (two tokens) due together leave as two pushes.
    @Test func twoControlsDueTogetherLeaveAsTwoPushes() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "garage", pushType: .controls)
        harness.register(2, device: 2, kind: "garage", pushType: .controls)
        harness.push([1, 2], atMinutes: 0)
        harness.tick(toMinutes: 1)
        #expect(harness.deliveries.count == 2)
        #expect(harness.deliveries.map(\.device).sorted() == [DeviceHandle(1), DeviceHandle(2)])
        #expect(harness.deliveries.allSatisfy { $0.reloaded.count == 1 })
    }

    // The per-kind configuration of controls (`scheduling.controls.kinds.<kind>`), apart from widgets'.
    @Test func aControlKindsOwnPolicyAppliesToThatKindOnly() {
        var fast = SchedulingPolicy.controlsDefault
        fast.minimumInterval = 10
        var configuration = SchedulerConfiguration()
        configuration[.controls].byKind = ["garage": fast]
        var harness = SchedulerHarness(configuration: configuration)
        harness.register(1, device: 1, kind: "garage", pushType: .controls)
        harness.register(2, device: 2, kind: "lights", pushType: .controls)
        harness.register(3, device: 3, kind: "garage")
        harness.push([1, 2, 3], atMinutes: 0)
        let decisions = harness.push([1, 2, 3], atMinutes: 0.05)
        #expect(decisions.map(\.due) == [SchedulerHarness.at(minutes: 10.0 / 60), SchedulerHarness.at(minutes: 1), SchedulerHarness.at(minutes: 5)])
    }

    @Test func theBudgetsOfControlsAreListedApartFromWidgets() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "garage", pushType: .controls)
        harness.register(2, device: 2, kind: "scores")
        harness.push([1, 2], atMinutes: 0)
        harness.tick(toMinutes: 0)
        let use = harness.scheduler.budgetUse(at: SchedulerHarness.at(minutes: 0), lowest: 5)
        #expect(use.policies.map(\.pushType) == [.widgets, .controls])
        #expect(use.policies.map(\.dailyBudget) == [40, 96])
        #expect(use.policies.map(\.tokens) == [5, 7])
        #expect(use.lowest.first { $0.instance == InstanceHandle(1) }?.pushType == .controls)
    }
}
