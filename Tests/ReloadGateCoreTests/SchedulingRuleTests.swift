import ReloadGateCore
import Testing

/// One test (at least) per scheduling rule of docs/DESIGN.md and per decision kind, on a fake clock.
struct SchedulingRuleTests {
    // Rule 1 and decision `deferred`.
    @Test func theBudgetBucketAllowsTheBurstThenOneTokenPerRefill() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        for minute in stride(from: 0.0, through: 25.0, by: 5.0) {
            #expect(harness.push([1], atMinutes: minute).map(\.kind) == [.scheduled])
        }
        // Six reloads spent the burst; the seventh waits for a token: 86400 s / 40 = 36 min after the first.
        let decision = harness.push([1], atMinutes: 30)
        #expect(decision.map(\.kind) == [.deferred])
        #expect(decision.first?.due == SchedulerHarness.at(minutes: 36))
        #expect(decision.first?.reason == .waitingForBudget(until: SchedulerHarness.at(minutes: 36), dailyBudget: 40, burst: 6))
        harness.tick(toMinutes: 40)
        #expect(harness.deliveryMinutes == [0, 5, 10, 15, 20, 25, 36])
        #expect(harness.deliveries.allSatisfy { $0.reloaded.allSatisfy(\.charged) })
    }

    // Rule 2.
    @Test func twoReloadsOfOneInstanceAreAtLeastTheMinimumIntervalApart() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.push([1], atMinutes: 0)
        let second = harness.push([1], atMinutes: 1)
        #expect(second.first?.kind == .deferred)
        #expect(second.first?.reason == .waitingForInterval(until: SchedulerHarness.at(minutes: 5), lastReload: SchedulerHarness.start, minimumInterval: 300))
        harness.tick(toMinutes: 10)
        #expect(harness.deliveryMinutes == [0, 5])
    }

    // Rule 3 and decision `absorbed`.
    @Test func aRequestJustBeforeThePlannedReloadIsAbsorbedAndThePlannedReloadIsCharged() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.scheduler.setTimeline(InstanceHandle(1), Timeline(entries: [SchedulerHarness.at(minutes: 4)], policy: .atEnd))
        let decision = harness.push([1], atMinutes: 0)
        #expect(decision.map(\.kind) == [.absorbed])
        #expect(decision.first?.reason.description == "absorbed by timeline reload at 14:04:00")
        harness.tick(toMinutes: 10)
        #expect(harness.deliveries.isEmpty)
        #expect(harness.timelineReloads.map(\.at) == [SchedulerHarness.at(minutes: 4)])
        #expect(harness.timelineReloads.first?.charged == true)
        #expect(harness.scheduler.tokens(of: InstanceHandle(1), at: SchedulerHarness.at(minutes: 10)) == 5)
        // The planned reload is used up: the next request goes as a push (after the interval).
        #expect(harness.push([1], atMinutes: 20).map(\.kind) == [.scheduled])
    }

    // Rule 4: exempt requests skip the budget, not the interval; rule 9: they are not charged.
    @Test func exemptRequestsSkipTheBudgetButNotTheIntervalAndAreNotCharged() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        for minute in stride(from: 0.0, through: 25.0, by: 5.0) { harness.push([1], atMinutes: minute) }
        #expect(harness.push([1], atMinutes: 30, exempt: true).map(\.kind) == [.scheduled])
        let tooSoon = harness.push([1], atMinutes: 31, exempt: true)
        #expect(tooSoon.first?.kind == .deferred)
        #expect(tooSoon.first?.due == SchedulerHarness.at(minutes: 35))
        harness.tick(toMinutes: 35)
        #expect(harness.deliveryMinutes.suffix(2) == [30, 35])
        #expect(harness.deliveries.suffix(2).allSatisfy { $0.reloaded.allSatisfy { !$0.charged } })
    }

    // Rule 5.
    @Test func priority5WaitsTheLowPriorityDelayAndPriority1AnHour() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.register(2, device: 2)
        let low = harness.push([1], atMinutes: 0, priority: .low)
        #expect(low.first?.kind == .deferred)
        #expect(low.first?.reason == .lowPriority(until: SchedulerHarness.at(minutes: 5), delay: 300))
        let background = harness.push([2], atMinutes: 0, priority: .background)
        #expect(background.first?.due == SchedulerHarness.at(minutes: 60))
        harness.tick(toMinutes: 61)
        #expect(harness.deliveryMinutes == [5, 60])
    }

    @Test func priority1RidesAlongWithAnyDeliveryToItsDevice() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.register(2, device: 1)
        harness.push([1], atMinutes: 0, priority: .background)
        harness.push([2], atMinutes: 10)
        harness.tick(toMinutes: 61)
        #expect(harness.deliveries.count == 1)
        #expect(harness.deliveries.first?.reloaded.map(\.instance) == [InstanceHandle(2), InstanceHandle(1)])
        #expect(harness.deliveries.first?.priority == .high)
    }

    // Rule 6 and decision `merged`.
    @Test func aSecondRequestMergesTakingTheEarlierDueHigherPriorityAndLaterExpiration() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        _ = harness.push([1], atMinutes: 0, priority: .low, expiration: SchedulerHarness.at(minutes: 10))
        let merged = harness.push([1], atMinutes: 1, expiration: SchedulerHarness.at(minutes: 20))
        #expect(merged.first?.kind == .merged)
        #expect(merged.first?.due == SchedulerHarness.at(minutes: 1))
        #expect(merged.first?.reason == .mergedIntoPending(due: SchedulerHarness.at(minutes: 1), requests: 2))
        harness.tick(toMinutes: 2)
        #expect(harness.deliveries.count == 1)
        #expect(harness.deliveries.first?.requests == [1, 2])
        #expect(harness.deliveries.first?.priority == .high)
        #expect(harness.deliveries.first?.expiration == SchedulerHarness.at(minutes: 20))
    }

    @Test func theSameCollapseIDReplacesThePendingAttributes() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.push([1], atMinutes: 0)
        // Pending, waiting for the interval, with a collapse id.
        harness.push([1], atMinutes: 1, priority: .high, collapseID: "score")
        let replaced = harness.push([1], atMinutes: 2, priority: .background, collapseID: "score")
        #expect(replaced.first?.kind == .merged)
        #expect(replaced.first?.due == SchedulerHarness.at(minutes: 62))
        harness.tick(toMinutes: 70)
        #expect(harness.deliveryMinutes == [0, 62])
        #expect(harness.deliveries.last?.priority == .background)
    }

    // Rule 7 and decision `expired` (more in ExpirationRuleTests).
    @Test func expirationZeroForAnInstanceWithoutTokenExpires() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        for minute in stride(from: 0.0, through: 25.0, by: 5.0) { harness.push([1], atMinutes: minute) }
        let decision = harness.push([1], atMinutes: 30, expiration: .nowOrNever)
        #expect(decision.map(\.kind) == [.expired])
        #expect(decision.first?.reason.description == "expired: expiration 0 (now or never), and the earliest it could go is 14:36:00")
        harness.tick(toMinutes: 60)
        #expect(harness.deliveries.count == 6)
    }

    @Test func anExpirationOfTheDecisionsOwnMomentIsADateThatCanGoNow() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        #expect(harness.push([1], atMinutes: 10, expiration: SchedulerHarness.at(minutes: 10)).map(\.kind) == [.scheduled])
    }

    // Rule 8.
    @Test func twoInstancesOfADeviceDue40SecondsApartLeaveAsOneDelivery() {
        var harness = SchedulerHarness()
        harness.register(1, device: 7)
        harness.register(2, device: 7)
        harness.register(3, device: 8)
        // Instance 2: priority 5 at 14:00:40, due 14:05:40. Instance 1: due 14:05:00 after its interval.
        harness.push([1], atMinutes: 0)
        harness.push([2], atMinutes: 40.0 / 60, priority: .low)
        harness.push([1], atMinutes: 1)
        harness.push([3], atMinutes: 5)
        harness.tick(toMinutes: 10)
        let toDevice7 = harness.deliveries.filter { $0.device == DeviceHandle(7) }
        #expect(toDevice7.map(\.at) == [SchedulerHarness.at(minutes: 0), SchedulerHarness.at(minutes: 5)])
        #expect(toDevice7.last?.reloaded.map(\.instance).sorted() == [InstanceHandle(1), InstanceHandle(2)])
        #expect(harness.deliveries.filter { $0.device == DeviceHandle(8) }.count == 1)
    }

    // Rule 6, bounded: a widget pushed thousands of times while its reload waits.
    @Test func aPendingReloadListsItsFirst100RequestsAndCountsAll() {
        var harness = SchedulerHarness()
        harness.register(1, device: 7)
        harness.push([1], atMinutes: 0)  // delivered at once; the next ones wait for the interval
        for index in 0..<150 {
            let decisions = harness.push([1], atMinutes: 1 + Double(index) / 100)
            #expect(decisions.map(\.kind) == [index == 0 ? .deferred : .merged])
        }
        let snapshot = harness.scheduler.snapshot(of: InstanceHandle(1))?.pending
        #expect(snapshot?.requests.count == 100)
        #expect(snapshot?.requestCount == 150)
        harness.tick(toMinutes: 10)
        let last = harness.deliveries.last
        #expect(last.map { Array($0.requests) } == Array(2...101).map(RequestID.init))
        #expect(last?.requestCount == 150)

        // A restored scheduler keeps the count.
        var restored = SchedulerHarness()
        restored.register(1, device: 7)
        restored.scheduler.restore(InstanceHandle(1), InstanceSnapshot(
            bucketFullAt: nil, lastReload: nil, plannedReload: nil,
            pending: snapshot
        ))
        restored.tick(toMinutes: 10)
        #expect(restored.deliveries.first?.requestCount == 150)
    }

    @Test func aRiderThatIsNotAllowedYetStaysPending() {
        var harness = SchedulerHarness()
        harness.register(1, device: 7)
        harness.register(2, device: 7)
        harness.push([2], atMinutes: 0)
        harness.push([2], atMinutes: 3)  // due 5:00 (interval)
        harness.push([1], atMinutes: 4)  // due now; instance 2 is not allowed until 5:00
        harness.tick(toMinutes: 6)
        #expect(harness.deliveryMinutes == [0, 4, 5])
    }

    // Decision `no-match`.
    @Test func aRequestWithoutRegisteredTargetsIsNoMatch() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        let decisions = harness.push([42], atMinutes: 0)
        #expect(decisions.map(\.kind) == [.noMatch])
        #expect(decisions.first?.instance == nil)
        #expect(harness.push([], atMinutes: 0).map(\.kind) == [.noMatch])
    }

    // Rule 10: every reason reads with its numbers.
    @Test func reasonsExplainThemselvesWithNumbers() {
        let at = SchedulerHarness.at(minutes: 36)
        #expect(DecisionReason.waitingForBudget(until: at, dailyBudget: 40, burst: 6).description == "deferred: no budget token until 14:36:00 (daily 40, burst 6)")
        #expect(DecisionReason.waitingForInterval(until: at, lastReload: SchedulerHarness.at(minutes: 31), minimumInterval: 300).description == "deferred: last reload at 14:31:00, next allowed at 14:36:00 (minimum interval 300 s)")
        #expect(DecisionReason.lowPriority(until: at, delay: 300).description == "deferred: priority 5 waits 300 s, until 14:36:00")
        #expect(DecisionReason.mergedIntoPending(due: at, requests: 3).description == "merged: pending reload due 14:36:00 now serves 3 requests")
    }

    // Per-kind overrides.
    @Test func aKindCanHaveItsOwnPolicy() {
        var news = SchedulingPolicy()
        news.minimumInterval = 60
        var harness = SchedulerHarness(configuration: SchedulerConfiguration(policiesByKind: ["news": news]))
        harness.register(1, device: 1, kind: "news")
        harness.register(2, device: 2, kind: "scores")
        harness.push([1, 2], atMinutes: 0)
        let second = harness.push([1, 2], atMinutes: 1)
        #expect(second.map(\.kind) == [.scheduled, .deferred])
    }

    @Test func removingAnInstanceDropsItsPendingReload() {
        var harness = SchedulerHarness()
        harness.register(1, device: 1)
        harness.push([1], atMinutes: 0)
        harness.push([1], atMinutes: 1)
        #expect(harness.scheduler.remove(InstanceHandle(1)) == [2])
        harness.tick(toMinutes: 10)
        #expect(harness.deliveryMinutes == [0])
        #expect(harness.push([1], atMinutes: 11).map(\.kind) == [.noMatch])
    }
}
