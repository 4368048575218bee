import ReloadGateCore
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
