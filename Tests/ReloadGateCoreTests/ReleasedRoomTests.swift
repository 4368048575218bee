@testable import ReloadGateCore
import Testing

/// What the scheduler holds between ticks does not follow its largest tick: the next tick's deliveries
/// start with room for a quarter more than the last tick released, at most ``ReloadScheduler/deliveryRoom``,
/// and none after a tick that released none.
struct ReleasedRoomTests {
    @Test func theRoomHeldBetweenTicksIsBoundedAndFollowsTheLastTick() {
        var harness = SchedulerHarness()
        let herd = Int32(ReloadScheduler.deliveryRoom * 2 + 1)
        for instance in 1...herd { harness.register(instance, device: instance) }
        harness.push(Array(1...herd), atMinutes: 0)
        let output = harness.scheduler.tick(now: SchedulerHarness.at(minutes: 0))
        #expect(output.deliveries.count == Int(herd))
        let room = harness.scheduler.released.deliveries.capacity
        #expect(room >= ReloadScheduler.deliveryRoom)
        #expect(room < Int(herd))

        // Below the bound, a quarter more than the tick released: a next tick of a few more does not move them.
        let small = Int32(1_000)
        for instance in herd + 1...herd + small { harness.register(instance, device: instance) }
        harness.push(Array(herd + 1...herd + small), atMinutes: 0)
        #expect(harness.scheduler.tick(now: SchedulerHarness.at(minutes: 0)).deliveries.count == Int(small))
        #expect(harness.scheduler.released.deliveries.capacity >= Int(small) + Int(small) / 4)

        let quiet = harness.scheduler.tick(now: SchedulerHarness.at(minutes: 1))
        #expect(quiet.deliveries.isEmpty)
        #expect(harness.scheduler.released.deliveries.capacity == 0)
    }
}
