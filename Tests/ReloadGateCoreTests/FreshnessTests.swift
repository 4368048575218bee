@testable import ReloadGateCore
import Testing

/// Freshness with numbers worked out by hand: the real scheduler decides, the tracker follows each
/// request to the reload that serves it, the book keeps the waits in ten-minute slots.
struct FreshnessTests {
    /// 2026-09-23T14:00:00Z, the start of a ten-minute slot.
    static let start = Timestamp(seconds: 1_790_172_000)
    static func at(_ seconds: Int64) -> Timestamp { start.adding(seconds: seconds) }
    static let key = FreshnessBook.Key(bundle: "com.example.scores", kind: "scores")
    /// 90% within 4 minutes.
    static let objective = FreshnessObjective(quantile: 0.9, within: 240_000)

    /// Widget w (device 0) and widget x (device 1, its timeline reloads at 60 min); the default policy:
    /// minimum interval 5 min, absorb window 5 min, daily 40, burst 6.
    ///
    /// - A at 0 s to w: scheduled, delivered at 0, taken by the push service at 1 s: 1 s, within.
    /// - B at 10 s to w: deferred by the interval to 300 s. C at 20 s: merged into that reload. The
    ///   delivery at 300 s is taken at 301 s: B waited 291 s and C its whole 281 s (not the 0 s of the
    ///   delivery after its merge): both misses, both of the interval (C takes the cause of B's reload).
    /// - E at 400 s to w with `apns-expiration: 0`: the earliest it could go is 600 s: expired, a miss.
    /// - D at 3,400 s to x: the timeline reload at 3,600 s is within the absorb window: absorbed, served
    ///   by that reload: 200 s, within.
    ///
    /// The day: 5 requests, 2 within (A, D), share 0.4, below the objective's 0.9; served waits 1, 200,
    /// 281, 291 s: p50 (rank 2) in the bucket up to 300 s, which holds the longest, 291 s; misses: interval
    /// 2, expired 1. The hour to 4,300 s holds the slots from 700 s on: D alone, share 1.
    @Test func waitsCountFromArrivalToTheReloadThatServes() throws {
        var scheduler = ReloadScheduler()
        var tracker = FreshnessTracker()
        let (w, x) = (InstanceHandle(0), InstanceHandle(1))
        scheduler.register(w, device: DeviceHandle(0), kind: "scores")
        scheduler.register(x, device: DeviceHandle(1), kind: "scores")
        scheduler.setTimeline(x, Timeline(entries: [], policy: .after(Self.at(3600))))
        for instance in [w, x] { tracker.register(instance, key: Self.key, objective: Self.objective) }
        var nextID: RequestID = 1
        func push(_ instance: InstanceHandle, at seconds: Int64, expiration: Timestamp? = nil) -> DecisionKind? {
            let request = ReloadRequest(id: nextID, targets: [instance], expiration: expiration, received: Self.at(seconds))
            nextID += 1
            let decisions = scheduler.receive(request)
            tracker.decided(decisions, received: request.received)
            return decisions.first?.kind
        }
        func tick(_ seconds: Int64, takenAfter delay: Int64 = 1) {
            let output = scheduler.tick(now: Self.at(seconds))
            for delivery in output.deliveries {
                tracker.delivered(delivery.reloaded.map(\.instance), at: delivery.at.adding(seconds: delay))
            }
            for reload in output.timelineReloads { tracker.timelineReloaded(reload.instance, at: reload.at) }
            for expired in output.expired { tracker.pendingExpired(expired.instance, at: Self.at(seconds)) }
        }

        #expect(push(w, at: 0) == .scheduled)
        tick(0)
        #expect(push(w, at: 10) == .deferred)
        #expect(push(w, at: 20) == .merged)
        tick(300)
        #expect(push(w, at: 400, expiration: .nowOrNever) == .expired)
        #expect(push(x, at: 3400) == .absorbed)
        tick(3600)
        #expect(tracker.waitingCount == 0, "every request served or missed")

        let day = tracker.book.summary(Self.key, window: 86_400_000, now: Self.at(3600))
        #expect(day.requests == 5)
        #expect(day.served == 4)
        #expect(day.within == 2)
        #expect(day.share == 0.4)
        #expect(day.meets(Self.objective) == false)
        #expect(day.p50 == 291_000)
        #expect(day.p90 == 291_000)
        #expect(day.misses == [.interval: 2, .expired: 1])

        let hour = tracker.book.summary(Self.key, window: 3_600_000, now: Self.at(4300))
        #expect(hour.requests == 1)
        #expect(hour.share == 1)
        #expect(hour.meets(Self.objective) == true)
        #expect(hour.p50 == 200_000)
        #expect(tracker.book.summary(FreshnessBook.Key(bundle: "com.example.scores", kind: "news"), window: 86_400_000, now: Self.at(3600)).share == nil)
    }

    /// A pending reload dropped is a miss for each request it served (`cancelled`); one that expired while
    /// waiting is `expired`, and an absorbed request of the same widget still waits for the timeline.
    @Test func droppedAndExpiredPendingReloadsAreMissesWithTheirCause() {
        var tracker = FreshnessTracker()
        let w = InstanceHandle(0)
        tracker.register(w, key: Self.key, objective: Self.objective)
        let deferred = Decision(request: 1, instance: w, kind: .deferred, due: Self.at(300), reason: .waitingForBudget(until: Self.at(300), dailyBudget: 40, burst: 6))
        tracker.decided([deferred], received: Self.at(0))
        tracker.decided([Decision(request: 2, instance: w, kind: .absorbed, due: nil, reason: .absorbedByTimeline(plannedReload: Self.at(500)))], received: Self.at(10))
        tracker.pendingExpired(w, at: Self.at(100))
        #expect(tracker.waitingCount == 1, "the absorbed request waits for the timeline")
        tracker.timelineReloaded(w, at: Self.at(500))
        tracker.decided([deferred], received: Self.at(520))
        tracker.pendingDropped(w, at: Self.at(530))
        let day = tracker.book.summary(Self.key, window: 86_400_000, now: Self.at(600))
        #expect(day.requests == 3)
        #expect(day.misses == [.expired: 1, .timeline: 1, .cancelled: 1], "the absorbed one waited 490 s for its timeline")
        #expect(tracker.waitingCount == 0)
    }

    /// A tracker whose instance `w` was pushed once a second from 0 s, `count` times: the first deferred by
    /// the interval to 300 s, the others merged into its pending reload.
    static func oneRequestASecond(_ count: Int, to w: InstanceHandle) -> FreshnessTracker {
        var tracker = FreshnessTracker()
        tracker.register(w, key: key, objective: objective)
        for second in 0..<count {
            let kind: DecisionKind = second == 0 ? .deferred : .merged
            tracker.decided([Decision(request: RequestID(second + 1), instance: w, kind: kind, due: at(300), reason: .waitingForInterval(until: at(300), lastReload: at(0), minimumInterval: 300))], received: at(Int64(second)))
        }
        return tracker
    }

    /// Past ``FreshnessTracker/listed`` requests on one widget, the rest count with the last kept one's
    /// arrival: at most its wait (theirs is no longer), and memory stays at 100 a widget.
    @Test func requestsPastTheListedOnesCountWithTheLastKept() {
        let w = InstanceHandle(0)
        var tracker = Self.oneRequestASecond(150, to: w)
        #expect(tracker.waitingCount == 100)
        tracker.delivered([w], at: Self.at(300))
        let day = tracker.book.summary(Self.key, window: 86_400_000, now: Self.at(300))
        // Waits 300 s down to 201 s for the 100 kept (arrivals 0-99 s), 201 s for the other 50.
        #expect(day.served == 150)
        #expect(day.within == 50 + 40, "arrivals 60-99 s waited at most 240 s, and the 50 counted as 201 s")
        #expect(day.misses == [.interval: 60])
    }

    /// The unlisted requests stay with the last listed one when a delivery leaves it waiting alone: 150
    /// requests at 0-149 s (100 listed, the last at 99 s; 50 counted as it), a delivery released at 98 s
    /// serves 99 of them; the one at 99 s and the 50 wait for the next, which serves all 51 with a wait of
    /// 201 s each.
    @Test func unlistedRequestsWaitWithTheLastListedOneLeftAlone() {
        let w = InstanceHandle(0)
        var tracker = Self.oneRequestASecond(150, to: w)
        tracker.delivered([w], released: Self.at(98), at: Self.at(100))
        #expect(tracker.book.summary(Self.key, window: 86_400_000, now: Self.at(100)).served == 99)
        #expect(tracker.waitingCount == 1)
        tracker.delivered([w], at: Self.at(300))
        let day = tracker.book.summary(Self.key, window: 86_400_000, now: Self.at(300))
        #expect(day.served == 150, "the 50 unlisted served with the last listed one")
        #expect(tracker.waitingCount == 0)
    }

    /// An instance the tracker knows is 16 bytes (decision 0104: a fan-out's million instances are held
    /// while they wait); a field more would double it unseen.
    @Test func anInstanceIsSixteenBytes() {
        #expect(MemoryLayout<FreshnessTracker.Instance>.stride == 16)
    }

    /// A delivery serves the requests that arrived by its release, not one deferred while it was on its way
    /// (that one waits for the instance's next reload): by hand, the first waits 2 s, the deferred one
    /// 9.5 s (arrived at 1 s, its reload released at 10 s and taken at 10.5 s). A failed delivery drops only
    /// what it carried too.
    @Test func aDeliveryServesOnlyWhatArrivedByItsRelease() {
        var tracker = FreshnessTracker()
        let w = InstanceHandle(0)
        tracker.register(w, key: Self.key, objective: FreshnessObjective(quantile: 0.9, within: 5000))
        tracker.decided([Decision(request: 1, instance: w, kind: .scheduled, due: Self.at(0), reason: .dueNow)], received: Self.at(0))
        let interval = DecisionReason.waitingForInterval(until: Self.at(10), lastReload: Self.at(0), minimumInterval: 10)
        tracker.decided([Decision(request: 2, instance: w, kind: .deferred, due: Self.at(10), reason: interval)], received: Self.at(1))
        tracker.delivered([w], released: Self.at(0), at: Self.at(2))
        #expect(tracker.waitingCount == 1, "the deferred one waits for its own reload")
        tracker.delivered([w], released: Self.at(10), at: Timestamp(milliseconds: Self.at(10).milliseconds + 500))
        let day = tracker.book.summary(Self.key, window: 86_400_000, now: Self.at(11))
        #expect(day.served == 2)
        #expect(tracker.waitingCount == 0)
        #expect(day.within == 1 && day.misses == [.interval: 1], "2 s is within 5 s; the deferred one's 9.5 s is not (served with the first, it would have been 1 s)")

        tracker.decided([Decision(request: 3, instance: w, kind: .scheduled, due: Self.at(20), reason: .dueNow)], received: Self.at(20))
        tracker.decided([Decision(request: 4, instance: w, kind: .deferred, due: Self.at(30), reason: interval)], received: Self.at(21))
        tracker.failed([w], released: Self.at(20), at: Self.at(22))
        #expect(tracker.waitingCount == 1)
        #expect(tracker.book.summary(Self.key, window: 86_400_000, now: Self.at(22)).misses[.upstream] == 1)
    }

    /// Slots a day old start again: what the book holds is a day of slots per app and kind, whatever the
    /// traffic.
    @Test func theBookKeepsADayOfSlots() {
        var book = FreshnessBook()
        book.served(Self.key, wait: 1000, at: Self.at(0), objective: Self.objective, cause: nil)
        book.served(Self.key, wait: 1000, at: Self.at(86_400), objective: Self.objective, cause: nil)
        #expect(book.summary(Self.key, window: 86_400_000, now: Self.at(86_400)).requests == 1)
        // An event older than the slot's day is not counted over a newer one.
        book.served(Self.key, wait: 1000, at: Self.at(0), objective: Self.objective, cause: nil)
        #expect(book.summary(Self.key, window: 86_400_000, now: Self.at(86_400)).requests == 1)
        #expect(book.keys == [Self.key])
    }
}
