import ReloadGateCore
import Testing

/// Rule 7 as Apple means `apns-expiration` (docs/DESIGN.md; default policy: 40 a day, a burst of 6, 5
/// minutes between two reloads, a 5-minute absorb window; the harness starts at 14:00:00). Now or never
/// (`0`) goes in the tick that follows its decision or is `expired`, spending no token and never pending;
/// merged with a pending reload it takes that reload along at once or leaves it as it was; a date already
/// past behaves as `0`; a future date holds the reload until then and no later.
struct ExpirationRuleTests {
    let instance = InstanceHandle(1)

    func harness() -> SchedulerHarness {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        return harness
    }

    @Test func nowOrNeverThatCanGoNowIsReleasedAtOnceAndNeverLeftPending() {
        var harness = harness()
        let decided = harness.push([1], atMinutes: 0, expiration: .nowOrNever)
        #expect(decided.map(\.kind) == [.scheduled])
        #expect(decided.first?.due == SchedulerHarness.at(minutes: 0))
        // The tick of the same moment (the commit loop's, right after the decision) releases it.
        harness.tick(toMinutes: 0)
        #expect(harness.deliveryMinutes == [0])
        #expect(harness.deliveries.first?.expiration == .nowOrNever, "sent upstream as apns-expiration: 0")
        #expect(harness.scheduler.pendingReload(of: instance) == nil)
        #expect(harness.scheduler.tokens(of: instance, at: SchedulerHarness.at(minutes: 0)) == 5, "one of the burst of 6 spent")
    }

    @Test func nowOrNeverHeldByTheIntervalIsExpiredWithNoTokenSpent() {
        var harness = harness()
        harness.push([1], atMinutes: 0)
        harness.tick(toMinutes: 0)
        let tokens = harness.scheduler.tokens(of: instance, at: SchedulerHarness.at(minutes: 1))
        // 14:01: the last reload was at 14:00, the next is allowed at 14:05.
        let decided = harness.push([1], atMinutes: 1, expiration: .nowOrNever)
        #expect(decided.map(\.kind) == [.expired])
        #expect(decided.first?.reason.description == "expired: expiration 0 (now or never), and the earliest it could go is 14:05:00")
        #expect(harness.scheduler.pendingReload(of: instance) == nil)
        harness.tick(toMinutes: 30)
        #expect(harness.deliveryMinutes == [0], "nothing was held for it")
        #expect(harness.scheduler.tokens(of: instance, at: SchedulerHarness.at(minutes: 1)) == tokens)
    }

    @Test func nowOrNeverWithoutABudgetTokenIsExpired() {
        var harness = harness()
        // Six reloads five minutes apart spend the burst; at 14:30 the next token comes at 14:36.
        for minute in stride(from: 0.0, through: 25.0, by: 5.0) { harness.push([1], atMinutes: minute) }
        let decided = harness.push([1], atMinutes: 30, expiration: .nowOrNever)
        #expect(decided.map(\.kind) == [.expired])
        #expect(decided.first?.reason.description == "expired: expiration 0 (now or never), and the earliest it could go is 14:36:00")
        harness.tick(toMinutes: 60)
        #expect(harness.deliveries.count == 6)
    }

    @Test func nowOrNeverThatCanGoNowTakesThePendingReloadAlongAtOnce() {
        var harness = harness()
        // Priority 5 at 14:00, held until 14:05 with an expiration of 15:00.
        harness.push([1], atMinutes: 0, priority: .low, expiration: SchedulerHarness.at(minutes: 60))
        let decided = harness.push([1], atMinutes: 1, expiration: .nowOrNever)
        #expect(decided.map(\.kind) == [.merged])
        #expect(decided.first?.due == SchedulerHarness.at(minutes: 1))
        harness.tick(toMinutes: 1)
        #expect(harness.deliveryMinutes == [1])
        #expect(harness.deliveries.first?.requests == [1, 2])
        #expect(harness.deliveries.first?.expiration == SchedulerHarness.at(minutes: 60), "the merge keeps the latest expiration")
    }

    @Test func nowOrNeverThatCannotGoNowLeavesThePendingReloadAsItWas() {
        var harness = harness()
        harness.push([1], atMinutes: 0)
        harness.tick(toMinutes: 0)
        // 14:02: held for the interval until 14:05.
        harness.push([1], atMinutes: 2)
        let decided = harness.push([1], atMinutes: 3, expiration: .nowOrNever)
        #expect(decided.map(\.kind) == [.expired])
        let pending = harness.scheduler.pendingReload(of: instance)
        #expect(pending?.due == SchedulerHarness.at(minutes: 5))
        #expect(pending?.requests == [2], "the expired request did not join it")
        harness.tick(toMinutes: 10)
        #expect(harness.deliveryMinutes == [0, 5])
        #expect(harness.deliveries.last?.requests == [2])
    }

    @Test func aDatePastBehavesAsNowOrNever() {
        var harness = harness()
        // 14:09 received at 14:10: the door makes it now or never.
        let past = Timestamp.expiration(SchedulerHarness.at(minutes: 9), receivedAt: SchedulerHarness.at(minutes: 10))
        #expect(past == .nowOrNever)
        #expect(harness.push([1], atMinutes: 10, expiration: past).map(\.kind) == [.scheduled])
        // The scheduler itself reads a date past when it decides as now: it goes at once or not at all.
        #expect(harness.push([1], atMinutes: 11, expiration: SchedulerHarness.at(minutes: 9)).map(\.kind) == [.expired])
        harness.tick(toMinutes: 20)
        #expect(harness.deliveryMinutes == [10])
        var other = self.harness()
        #expect(other.push([1], atMinutes: 11, expiration: SchedulerHarness.at(minutes: 9)).map(\.kind) == [.scheduled])
        other.tick(toMinutes: 11)
        #expect(other.deliveryMinutes == [11])
    }

    @Test func aFutureDateHoldsUntilItAndNoLater() {
        var harness = harness()
        harness.push([1], atMinutes: 0)
        harness.tick(toMinutes: 0)
        // 14:01 with 14:10: held for the interval until 14:05, within it.
        let held = harness.push([1], atMinutes: 1, expiration: SchedulerHarness.at(minutes: 10))
        #expect(held.map(\.kind) == [.deferred])
        #expect(held.first?.due == SchedulerHarness.at(minutes: 5))
        harness.tick(toMinutes: 5)
        #expect(harness.deliveryMinutes == [0, 5])
        #expect(harness.deliveries.last?.expiration == SchedulerHarness.at(minutes: 10), "passed upstream unchanged")
        // 14:06 with 14:09: the next reload is allowed at 14:10, after it.
        let late = harness.push([1], atMinutes: 6, expiration: SchedulerHarness.at(minutes: 9))
        #expect(late.map(\.kind) == [.expired])
        #expect(late.first?.reason.description == "expired: earliest 14:10:00 > expiration 14:09:00")
        harness.tick(toMinutes: 20)
        #expect(harness.deliveryMinutes == [0, 5])
    }

    @Test func nowOrNeverIsNotAbsorbedByATimelineReloadToCome() {
        var harness = harness()
        // A timeline reload planned at 14:03, within the 5-minute absorb window of 14:00.
        harness.scheduler.setPlannedReload(instance, SchedulerHarness.at(minutes: 3))
        #expect(harness.push([1], atMinutes: 0).map(\.kind) == [.absorbed])
        let decided = harness.push([1], atMinutes: 0, expiration: .nowOrNever)
        #expect(decided.map(\.kind) == [.scheduled], "now, not at 14:03")
        harness.tick(toMinutes: 0)
        #expect(harness.deliveryMinutes == [0])
    }
}
