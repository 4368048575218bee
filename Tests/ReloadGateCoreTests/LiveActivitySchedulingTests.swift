import ReloadGateCore
import Testing

/// The scheduling rules of Live Activities (issue 45), with numbers computed by hand from the default
/// policy (`SchedulingPolicy.liveActivityDefault`: 240 priority-10 updates a day, so one token per
/// 86,400 s / 240 = 6 minutes; a burst of 12; 5 s between two deliveries; priority 5 neither charged nor
/// delayed) and the push-to-start one (`pushToStartDefault`: 12 a day, one token per 2 hours, a burst of 3).
/// Times are in seconds after the harness's start.
struct LiveActivitySchedulingTests {
    static func update(_ timestamp: Int64, alert: Bool = false) -> ActivityContent {
        ActivityContent(event: .update, timestamp: timestamp, hasAlert: alert)
    }

    static func seconds(_ value: Double) -> Double { value / 60 }

    @Test func threeUpdatesWithinTheMinimumIntervalDeliverOnlyTheNewestContent() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "score", pushType: .liveactivity)
        #expect(harness.push([1], atMinutes: Self.seconds(0), activity: Self.update(100)).map(\.kind) == [.scheduled])
        // Within 5 s of the delivery at 0 s: the first waits for the interval, the next two merge; the
        // newest timestamp (103, request 3) arrived second of the three.
        let second = harness.push([1], atMinutes: Self.seconds(1), activity: Self.update(101))
        #expect(second.map(\.kind) == [.deferred])
        #expect(second.first?.reason == .waitingForInterval(until: SchedulerHarness.at(minutes: Self.seconds(5)), lastReload: SchedulerHarness.start, minimumInterval: 5))
        #expect(harness.push([1], atMinutes: Self.seconds(2), activity: Self.update(103, alert: true)).map(\.kind) == [.merged])
        #expect(harness.push([1], atMinutes: Self.seconds(3), activity: Self.update(102)).map(\.kind) == [.merged])
        #expect(harness.scheduler.activity(of: InstanceHandle(1))?.content == ContentStamp(timestamp: 103, request: 3))
        #expect(harness.scheduler.activity(of: InstanceHandle(1))?.alert == ContentStamp(timestamp: 103, request: 3))
        harness.tick(toMinutes: Self.seconds(10))
        #expect(harness.deliveries.map { $0.at.milliseconds - SchedulerHarness.start.milliseconds } == [0, 5_000])
        #expect(Set(harness.deliveries[1].requests) == [2, 3, 4])
        let state = harness.scheduler.activity(of: InstanceHandle(1))
        #expect(state?.delivered == ContentStamp(timestamp: 103, request: 3))
        #expect(state?.content == nil)
        // The written state says so too (a restart restores it).
        #expect(harness.written[1]??.activity?.delivered == ContentStamp(timestamp: 103, request: 3))
    }

    @Test func anUpdateOlderThanTheDeliveredOneIsDroppedAndAnEqualOneIsNot() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "score", pushType: .liveactivity)
        harness.push([1], atMinutes: 0, activity: Self.update(200))
        harness.tick(toMinutes: Self.seconds(1))
        let older = harness.push([1], atMinutes: Self.seconds(10), activity: Self.update(199))
        #expect(older.map(\.kind) == [.outdated])
        #expect(older.first?.reason == .outdated(timestamp: 199, delivered: 200))
        #expect(older.first?.reason.description == "outdated: timestamp 199 is older than 200, the content the activity was sent already")
        #expect(harness.scheduler.pendingReload(of: InstanceHandle(1)) == nil)
        #expect(harness.push([1], atMinutes: Self.seconds(20), activity: Self.update(200)).map(\.kind) == [.scheduled])
    }

    @Test func anEndIsDeliveredPastAnEmptyBudgetAndNothingAfterIt() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "score", pushType: .liveactivity)
        // Twelve updates 10 s apart take the burst: the bucket is full again at 12 x 360 s = 4,320 s.
        for n in 0..<12 {
            #expect(harness.push([1], atMinutes: Self.seconds(Double(n * 10)), activity: Self.update(Int64(n))).map(\.kind) == [.scheduled])
        }
        // At 120 s a token is there when 4,320 - t <= 11 x 360 = 3,960: at 360 s.
        let thirteenth = harness.push([1], atMinutes: Self.seconds(120), activity: Self.update(12))
        #expect(thirteenth.first?.reason == .waitingForBudget(until: SchedulerHarness.at(minutes: 6), dailyBudget: 240, burst: 12))
        // The end merges the waiting update and goes at once (its interval allows it), uncharged.
        let end = harness.push([1], atMinutes: Self.seconds(130), activity: ActivityContent(event: .end, timestamp: 13, hasAlert: false))
        #expect(end.map(\.kind) == [.merged])
        #expect(end.first?.due == SchedulerHarness.at(minutes: Self.seconds(130)))
        harness.tick(toMinutes: Self.seconds(131))
        #expect(harness.deliveries.count == 13)
        #expect(Set(harness.deliveries[12].requests) == [13, 14])
        #expect(harness.deliveries[12].reloaded.map(\.charged) == [false])
        #expect(harness.scheduler.activity(of: InstanceHandle(1))?.ended == true)
        let after = harness.push([1], atMinutes: Self.seconds(140), activity: Self.update(14))
        #expect(after.map(\.kind) == [.afterEnd])
        #expect(after.first?.reason == .activityEnded)
    }

    @Test func priorityFiveIsNotChargedAndPriorityTenIs() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "score", pushType: .liveactivity)
        let low = harness.push([1], atMinutes: 0, priority: .low, activity: Self.update(1))
        #expect(low.map(\.kind) == [.scheduled])
        harness.tick(toMinutes: Self.seconds(1))
        #expect(harness.deliveries.first?.reloaded.map(\.charged) == [false])
        #expect(harness.deliveries.first?.priority == .low)
        #expect(harness.scheduler.tokens(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: Self.seconds(1))) == 12)
        harness.push([1], atMinutes: Self.seconds(10), activity: Self.update(2))
        harness.tick(toMinutes: Self.seconds(11))
        #expect(harness.deliveries.last?.reloaded.map(\.charged) == [true])
        #expect(harness.scheduler.tokens(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: Self.seconds(11))) == 11)
    }

    @Test func pushToStartRunsOutOfItsOwnBudget() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: PushTypeDescriptor.pushToStartKind, pushType: .liveactivity)
        let start = { (t: Int64) in ActivityContent(event: .start, timestamp: t, hasAlert: true) }
        for n in 0..<3 {
            #expect(harness.push([1], atMinutes: Self.seconds(Double(n)), activity: start(Int64(n))).map(\.kind) == [.scheduled])
        }
        // Three charges put the bucket's full time at 3 x 7,200 s; a token again when 21,600 - t <= 2 x
        // 7,200: at 7,200 s, two hours.
        let fourth = harness.push([1], atMinutes: Self.seconds(3), activity: start(3))
        #expect(fourth.first?.reason == .waitingForBudget(until: SchedulerHarness.at(minutes: 120), dailyBudget: 12, burst: 3))
    }

    @Test func frequentUpdatesRaiseTheBudget() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "score", pushType: .liveactivity)
        harness.register(2, device: 2, kind: "score", pushType: .liveactivity, frequentUpdates: true)
        for n in 0..<12 {
            harness.push([1, 2], atMinutes: Self.seconds(Double(n * 10)), activity: Self.update(Int64(n)))
        }
        // The thirteenth: the plain activity's burst of 12 is spent; the frequent one has 4 x 12 = 48.
        let thirteenth = harness.push([1, 2], atMinutes: Self.seconds(120), activity: Self.update(12))
        #expect(thirteenth.map(\.kind) == [.deferred, .scheduled])
        // Once delivered: 13 charges of 86,400 s / 960 = 90 s put the bucket's full time at 1,170 s; at
        // 121 s that is 1,049 s ahead, ceil(1,049 / 90) = 12 tokens short of 48.
        harness.tick(toMinutes: Self.seconds(121))
        #expect(harness.scheduler.tokens(of: InstanceHandle(2), at: SchedulerHarness.at(minutes: Self.seconds(121))) == 36)
    }

    @Test func theStoredFormRoundTrips() {
        let state = ActivitySnapshot(
            delivered: ContentStamp(timestamp: 5, request: 9), ended: true, content: ContentStamp(timestamp: 7, request: 12),
            alert: ContentStamp(timestamp: 6, request: 11), ending: true
        )
        #expect(state.text == "delivered=5:9;ended;content=7:12;alert=6:11;ending")
        #expect(ActivitySnapshot(text: state.text) == state)
        #expect(ActivitySnapshot(text: "") == ActivitySnapshot())
        #expect(ActivitySnapshot(text: "delivered=x:1") == nil)
    }

    /// What the store writes for an activity brings its rules back after a restart: an update older than
    /// the delivered content is still outdated, and the end still holds.
    @Test func aRestoredActivityKeepsWhatItWasSent() throws {
        var harness = SchedulerHarness()
        harness.register(1, device: 1, kind: "score", pushType: .liveactivity)
        harness.push([1], atMinutes: 0, activity: Self.update(300))
        harness.tick(toMinutes: Self.seconds(1))
        let written = try #require(harness.written[1] ?? nil)
        var restarted = ReloadScheduler()
        restarted.register(InstanceHandle(1), device: DeviceHandle(1), kind: "score", pushType: .liveactivity)
        restarted.restore(InstanceHandle(1), written)
        let older = restarted.receive(ReloadRequest(
            id: 9, targets: [InstanceHandle(1)], received: SchedulerHarness.at(minutes: 1), activity: Self.update(299)
        ))
        #expect(older.map(\.kind) == [.outdated])
        var ended = written
        ended.activity?.ended = true
        restarted.restore(InstanceHandle(1), ended)
        let after = restarted.receive(ReloadRequest(
            id: 10, targets: [InstanceHandle(1)], received: SchedulerHarness.at(minutes: 2), activity: Self.update(301)
        ))
        #expect(after.map(\.kind) == [.afterEnd])
    }
}
