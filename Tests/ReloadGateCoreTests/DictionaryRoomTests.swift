@testable import ReloadGateCore
import ReloadGateTesting
import Testing

/// A dictionary that a burst filled gives its room back once most entries have left, and only then: the
/// scheduler's Live Activities, and the helper they and the delivery worker share.
@Suite(.offThePool)
struct DictionaryRoomTests {
    @Test func aDictionaryMostlyEmptiedKeepsRoomForWhatItHolds() {
        var entries: [Int: Int] = [:]
        for key in 0..<100_000 { entries[key] = key }
        let full = entries.capacity
        // Still above an eighth of its room: left as it is (a rebuild would copy most of it).
        for key in 0..<70_000 { entries[key] = nil }
        #expect(entries.count > full / 8)
        entries.giveBackSpareRoom(keeping: 1_024)
        #expect(entries.capacity == full)
        for key in 70_000..<99_990 { entries[key] = nil }
        entries.giveBackSpareRoom(keeping: 1_024)
        #expect(entries.count == 10)
        #expect(entries.capacity < 1_024)
        #expect(entries == Dictionary(uniqueKeysWithValues: (99_990..<100_000).map { ($0, $0) }))
    }

    @Test func aSmallDictionaryIsLeftAlone() {
        var entries: [Int: Int] = [:]
        for key in 0..<1_000 { entries[key] = key }
        let room = entries.capacity
        for key in 0..<999 { entries[key] = nil }
        entries.giveBackSpareRoom(keeping: 2_048)
        #expect(entries.capacity == room)
        #expect(entries == [999: 999])
    }

    /// A game's activities end together: what the scheduler keeps for them follows the ones still live.
    @Test func theSchedulersActivitiesGiveBackTheRoomOfThoseRemoved() {
        var harness = SchedulerHarness()
        let burst: Int32 = 40_000
        for instance in 1...burst { harness.register(instance, device: instance, kind: "score", pushType: .liveactivity) }
        #expect(harness.scheduler.activities.count == Int(burst))
        #expect(harness.scheduler.activities.capacity >= Int(burst))
        for instance in 1...(burst - 100) { harness.scheduler.remove(InstanceHandle(instance)) }
        #expect(harness.scheduler.activities.count == 100)
        #expect(harness.scheduler.activities.capacity <= ReloadScheduler.keptActivityRoom)
        // The ones left are untouched and still scheduled as activities.
        let last = InstanceHandle(burst)
        #expect(harness.scheduler.activity(of: last) == ActivitySnapshot())
        #expect(harness.push([burst], atMinutes: 0, activity: LiveActivitySchedulingTests.update(100)).map(\.kind) == [.scheduled])
    }
}
