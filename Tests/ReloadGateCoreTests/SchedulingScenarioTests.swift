import ReloadGateCore
import Testing

/// The seeds' scenarios, end to end through the state machine.
struct SchedulingScenarioTests {
    @Test func atEndTimelineOfFourHourlyEntriesAbsorbsAPushJustBeforeAndSchedulesOneAfter() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        let entries = (0..<4).map { SchedulerHarness.at(minutes: Double($0) * 60) }
        harness.scheduler.setTimeline(InstanceHandle(1), Timeline(entries: entries, policy: .atEnd))
        // Planned reload: the last entry, 17:00.
        #expect(harness.push([1], atMinutes: 178).map(\.kind) == [.absorbed])
        #expect(harness.push([1], atMinutes: 210).map(\.kind) == [.scheduled])
        harness.tick(toMinutes: 240)
        #expect(harness.timelineReloads.map(\.at) == [SchedulerHarness.at(minutes: 180)])
        #expect(harness.deliveryMinutes == [210])
    }

    @Test func aHundredPushesInAnHourGetExactlyTheReloadsTheBucketAllows() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        for push in 0..<100 {
            harness.push([1], atMinutes: Double(push) * 0.6)
        }
        harness.tick(toMinutes: 24 * 60)
        // Burst 6 every 5 minutes, then a token every 36 minutes (40 a day): 36 and 72 minutes.
        #expect(harness.deliveryMinutes == [0, 5, 10, 15, 20, 25, 36, 72])
        let gaps = zip(harness.deliveryMinutes, harness.deliveryMinutes.dropFirst()).map { $1 - $0 }
        #expect(gaps.allSatisfy { $0 >= 5 })
        #expect(Set(harness.deliveries.flatMap(\.requests)).count == 100)
    }

    @Test func aNeverInstanceReloadsOnlyOnPushes() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.scheduler.setTimeline(InstanceHandle(1), Timeline(entries: [SchedulerHarness.at(minutes: 10)], policy: .never))
        harness.tick(toMinutes: 24 * 60)
        #expect(harness.timelineReloads.isEmpty)
        #expect(harness.deliveries.isEmpty)
        #expect(harness.push([1], atMinutes: 24 * 60 + 1).map(\.kind) == [.scheduled])
        harness.tick(toMinutes: 24 * 60 + 2)
        #expect(harness.deliveries.count == 1)
    }

    @Test func priority5WaitsLowPriorityDelay() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.push([1], atMinutes: 0, priority: .low)
        harness.tick(toMinutes: 4.99)
        #expect(harness.deliveries.isEmpty)
        harness.tick(toMinutes: 5)
        #expect(harness.deliveryMinutes == [5])
    }
}
