import ReloadGateCore
import Testing

/// The operator's view and commands on the state machine: why a pending reload waits, the budget,
/// cancel and flush (with and without the budget override).
struct SchedulingOperatorTests {
    @Test func aPendingReloadSaysWhatItWaitsFor() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.register(2, device: 2)
        harness.register(3, device: 3)
        harness.push([1], atMinutes: 0)
        harness.push([1], atMinutes: 1)  // interval: due at 5
        harness.push([2], atMinutes: 1, priority: .low)  // waits 5 minutes
        harness.push([3], atMinutes: 1, priority: .background)
        let now = SchedulerHarness.at(minutes: 1)
        #expect(harness.scheduler.pendingWait(of: InstanceHandle(1), at: now) == .interval)
        #expect(harness.scheduler.pendingWait(of: InstanceHandle(2), at: now) == .lowPriority)
        #expect(harness.scheduler.pendingWait(of: InstanceHandle(3), at: now) == .background)
        #expect(harness.scheduler.pendingWait(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: 5)) == .due)
        #expect(harness.scheduler.pendingWait(of: InstanceHandle(9), at: now) == nil)

        // Six reloads spend the burst; the seventh waits for budget.
        var budget = SchedulerHarness()
        budget.register(1, device: 1)
        for minute in stride(from: 0.0, through: 25.0, by: 5.0) { budget.push([1], atMinutes: minute) }
        budget.push([1], atMinutes: 30)
        #expect(budget.scheduler.pendingWait(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: 30)) == .budget)
        let view = budget.scheduler.budget(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: 30))
        #expect(view?.tokens == 0)
        #expect(view?.burst == 6 && view?.dailyBudget == 40)
        #expect(view?.nextToken == SchedulerHarness.at(minutes: 36))
        #expect(view?.lastReload == SchedulerHarness.at(minutes: 25))
        #expect(view?.earliestReload == SchedulerHarness.at(minutes: 36))
        #expect(view?.pending?.requestCount == 1)
    }

    @Test func cancelDropsThePendingReloadAndNothingIsDelivered() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.push([1], atMinutes: 0)
        harness.push([1], atMinutes: 1)
        harness.push([1], atMinutes: 2)
        let cancelled = harness.scheduler.cancelPending(InstanceHandle(1))
        let again = harness.scheduler.cancelPending(InstanceHandle(1))
        #expect(cancelled == [2, 3])
        #expect(again == nil)
        harness.tick(toMinutes: 30)
        #expect(harness.deliveryMinutes == [0])
        #expect(harness.scheduler.pendingCount == 0)
    }

    @Test func flushMakesItDueButKeepsTheRulesUnlessTheBudgetIsIgnored() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.register(2, device: 2)
        harness.push([1], atMinutes: 0)
        harness.push([1], atMinutes: 1)  // interval: due at 5
        harness.push([2], atMinutes: 1, priority: .low)  // due at 6
        // Flushed without the override: the low-priority wait ends now, the interval still holds.
        let flushed = harness.scheduler.flushPending([InstanceHandle(1), InstanceHandle(2)], at: SchedulerHarness.at(minutes: 2), ignoringBudget: false)
        #expect(flushed == [InstanceHandle(1), InstanceHandle(2)])
        harness.tick(toMinutes: 2)
        #expect(harness.deliveryMinutes == [0, 2])
        #expect(harness.deliveries.last?.device == DeviceHandle(2))
        #expect(harness.scheduler.pendingWait(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: 2)) == .interval)
        // With the override it goes now, exempt and not charged.
        let forced = harness.scheduler.flushPending([InstanceHandle(1)], at: SchedulerHarness.at(minutes: 3), ignoringBudget: true)
        #expect(forced == [InstanceHandle(1)])
        harness.tick(toMinutes: 3)
        #expect(harness.deliveryMinutes == [0, 2, 3])
        #expect(harness.deliveries.last?.reloaded.map(\.charged) == [false])
        #expect(harness.deliveries.last?.requests == [2])
        let nothing = harness.scheduler.flushPending([InstanceHandle(1)], at: SchedulerHarness.at(minutes: 4), ignoringBudget: true)
        #expect(nothing.isEmpty)
    }

    /// `flush --ignore-budget` on a device with several pending widgets: one push for the device (rule 8),
    /// every widget in it, each request listed once (a push to the device targets all its widgets).
    @Test func aFlushIgnoringTheBudgetSendsOnePushPerDeviceListingEachRequestOnce() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.register(2, device: 1)
        harness.register(3, device: 2)
        harness.push([1, 2], atMinutes: 0)  // delivered: one push for both
        harness.push([1, 2], atMinutes: 1)  // interval: pending on both, request 2 in both lists
        harness.push([2], atMinutes: 1.5)  // merged into widget 2's
        harness.push([3], atMinutes: 1, priority: .low)
        #expect(harness.deliveryMinutes == [0])
        let flushed = harness.scheduler.flushPending(
            [InstanceHandle(1), InstanceHandle(2), InstanceHandle(3), InstanceHandle(2)], at: SchedulerHarness.at(minutes: 2), ignoringBudget: true
        )
        #expect(flushed == [InstanceHandle(1), InstanceHandle(2), InstanceHandle(3)])
        harness.tick(toMinutes: 2)
        #expect(harness.deliveryMinutes == [0, 2, 2], "one push per device")
        let first = harness.deliveries[1]
        #expect(first.device == DeviceHandle(1))
        #expect(first.reloaded.map(\.instance) == [InstanceHandle(1), InstanceHandle(2)])
        #expect(first.reloaded.map(\.charged) == [false, false])
        #expect(Array(first.requests) == [2, 3], "request 2 once")
        #expect(first.requestCount == 2)
        #expect(harness.deliveries[2].device == DeviceHandle(2))
        #expect(harness.scheduler.pendingCount == 0)
    }

    /// Coalescing (rule 8) lists a request that targeted two widgets of the device once.
    @Test func aCoalescedPushListsARequestOnce() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.register(2, device: 1)
        harness.push([1, 2], atMinutes: 0)
        harness.tick(toMinutes: 0)
        #expect(harness.deliveries.count == 1)
        #expect(Array(harness.deliveries[0].requests) == [1])
        #expect(harness.deliveries[0].requestCount == 1)
        #expect(harness.deliveries[0].reloaded.count == 2)
    }
}
