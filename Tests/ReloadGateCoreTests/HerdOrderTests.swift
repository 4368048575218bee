import ReloadGateCore
import ReloadGateTesting
import Testing

/// A herd: many pending reloads falling due at one moment (here a flush of all of them) leave in due
/// order, and at one due time the highest priority first, whatever order their timers had.
struct HerdOrderTests {
    @Test func reloadsDueTogetherLeaveByPriorityThenInTheOrderTheyFellDue() {
        var harness = SchedulerHarness()
        // Devices 1-9, one instance each; registered so that the priorities interleave.
        let priorities: [Int32: Priority] = [1: .background, 2: .high, 3: .low, 4: .background, 5: .high, 6: .low, 7: .background, 8: .high, 9: .low]
        for instance in Int32(1)...9 { harness.register(instance, device: instance) }
        // The high ones are reloaded at minute 0, so their next request waits for the interval.
        let high = priorities.filter { $0.value == .high }.keys.sorted()
        harness.push(high, atMinutes: 0)
        for instance in Int32(1)...9 { harness.push([instance], atMinutes: 1, priority: priorities[instance]!) }
        harness.tick(toMinutes: 1.5)
        let before = harness.deliveries.count
        #expect(before == high.count)
        // All nine due at minute 2.
        let flushed = harness.scheduler.flushPending((1...9).map(InstanceHandle.init), at: SchedulerHarness.at(minutes: 2), ignoringBudget: true)
        #expect(flushed.count == 9)
        let output = harness.scheduler.tick(now: SchedulerHarness.at(minutes: 2))
        #expect(output.deliveries.count == 9)
        #expect(output.deliveries.map(\.priority) == [.high, .high, .high, .low, .low, .low, .background, .background, .background])
        #expect(Set(output.deliveries.map(\.at)) == [SchedulerHarness.at(minutes: 2)])
        // At one priority, in the order they fell due (device order here: the flush's order).
        #expect(output.deliveries.map(\.device.rawValue) == [2, 5, 8, 3, 6, 9, 1, 4, 7])
    }
}

/// No timer storm: a herd due at one moment is one wake-up. The scheduler's next wake-up is that moment
/// (the timer loop sleeps until it), nothing leaves a millisecond before, one tick at it releases every
/// reload, and no timer of the herd is left behind at or before it.
@Suite(.offThePool)
struct HerdWakeUpTests {
    @Test func aHerdDueAtOneMomentIsReleasedByOneTick() {
        var harness = SchedulerHarness()
        let herd = Int32(10_000)
        for instance in 1...herd { harness.register(instance, device: instance) }
        // Minute 0: every instance is reloaded at once; minute 1: pushed again, so each waits for the
        // 5-minute interval and all fall due at minute 5.
        harness.push(Array(1...herd), atMinutes: 0)
        #expect(harness.deliveries.count == 0)
        harness.tick(toMinutes: 0)
        let first = harness.scheduler.tick(now: SchedulerHarness.at(minutes: 0))
        #expect(harness.deliveries.count + first.deliveries.count == Int(herd))
        for instance in 1...herd { harness.push([instance], atMinutes: 1) }
        let due = SchedulerHarness.at(minutes: 5)
        #expect(harness.scheduler.nextWakeUp == due)
        let early = harness.scheduler.tick(now: due.adding(milliseconds: -1))
        #expect(early.deliveries.isEmpty)
        #expect(harness.scheduler.pendingCount == Int(herd))
        let output = harness.scheduler.tick(now: due)
        #expect(output.deliveries.count == Int(herd))
        #expect(harness.scheduler.pendingCount == 0)
        #expect(harness.scheduler.nextWakeUp.map { $0 > due } ?? true)
    }
}
