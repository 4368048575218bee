import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The dashboard's figures, the same on both stores: decisions in all and by the hour of their requests,
/// deliveries by state with retries and failures, pending reloads by the hour they fall due, devices
/// unregistered, one app's figures apart from another's.
struct DashboardFiguresTests {
    static let now = Timestamp(seconds: 1_790_006_400)  // 10:40 of a day, UTC

    @Test(arguments: StoreImplementation.all) func figuresCountTheLedgerByAppAndHour(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with("dashboard", implementation, now: Date(timeIntervalSince1970: 1_790_000_000)) { fixture in
            let (w1, w2) = (fixture.instances[0], fixture.instances[1])
            func request(_ id: RequestID, at seconds: Int64) -> RecordedRequest {
                var request = StoreFixture.request(id, app: fixture.app)
                request.received = Timestamp(seconds: seconds)
                return request
            }
            var batch = LedgerBatch()
            // Request 1 two hours ago (scheduled, then cancelled), request 2 now (merged), request 3 a day
            // and more ago (no-match: in the totals, not in the 24 hours).
            batch.requests = [request(1, at: Self.now.milliseconds / 1000 - 7200), request(2, at: Self.now.milliseconds / 1000), request(3, at: 1_789_900_000)]
            batch.decisions = [
                Decision(request: 1, instance: InstanceHandle(Int32(w1)), kind: .scheduled, due: Self.now, reason: .dueNow),
                Decision(request: 1, instance: InstanceHandle(Int32(w1)), kind: .cancelled, due: nil, reason: .cancelledByOperator),
                Decision(request: 2, instance: InstanceHandle(Int32(w2)), kind: .merged, due: Self.now, reason: .mergedIntoPending(due: Self.now, requests: 2)),
                Decision(request: 3, instance: nil, kind: .noMatch, due: nil, reason: .noMatchingWidget),
            ]
            func pending(_ due: Int64) -> InstanceSnapshot {
                InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: nil, pending: PendingSnapshot(
                    due: Timestamp(milliseconds: due), priority: .high, expiration: nil, requests: [2], collapseID: nil, team: nil, exempt: false
                ))
            }
            // w1 due a minute ago (due now), w2 due in 90 minutes (bucket 1).
            batch.instanceStates = [(w1, pending(Self.now.milliseconds - 60_000)), (w2, pending(Self.now.milliseconds + 5_400_000))]
            batch.deliveries = [
                RecordedDelivery(
                    apnsID: "00000000-0000-4000-8000-0000000000d1", device: fixture.registration.device, released: Self.now,
                    instances: [w1], requests: [1], priority: .high, expiration: nil, state: .pending
                )
            ]
            try await fixture.store.commit(batch)
            // Three attempts, the last one failed with Apple's reason.
            let apnsID = batch.deliveries[0].apnsID
            try await fixture.store.setDeliveryStates([
                DeliveryStateChange(apnsID: apnsID, state: .sending), DeliveryStateChange(apnsID: apnsID, state: .sending),
                DeliveryStateChange(apnsID: apnsID, state: .failed, error: "BadDeviceToken"),
            ], at: Date())
            _ = try await fixture.store.markDeviceInvalid(device: fixture.registration.device, since: Date(timeIntervalSince1970: 1_790_003_000))

            let figures = try await fixture.store.dashboardFigures(bundle: nil, now: Self.now)
            #expect(figures.decisionsByKind == ["scheduled": 1, "cancelled": 1, "merged": 1, "no-match": 1])
            #expect(figures.decisionsByHour[21] == ["scheduled": 1, "cancelled": 1], "two hours before the current one")
            #expect(figures.decisionsByHour[23] == ["merged": 1])
            #expect(figures.decisionsByHour.map { $0.values.reduce(0, +) }.reduce(0, +) == 3)
            #expect(figures.deliveriesByState == ["failed": 1])
            #expect(figures.failuresByReason == ["BadDeviceToken": 1])
            let history = try await fixture.store.delivery(apnsID: apnsID)?.delivery.history
            #expect(figures.retries == max(0, (history?.attempts ?? 0) - 1))
            #expect(figures.pendingReloads == 2 && figures.pendingDueNow == 1 && figures.pendingByHour[1] == 1 && figures.pendingLater == 0)
            #expect(figures.unregisteredDevices == 1)
            #expect(figures.recentlyUnregistered.map(\.token) == [StoreFixture.token])
            #expect(figures.bundles == ["com.example.scores"])
            #expect(try await fixture.store.dashboardFigures(bundle: "com.example.scores", now: Self.now) == figures)
            let other = try await fixture.store.dashboardFigures(bundle: "com.example.other", now: Self.now)
            #expect(other.decisionsByKind.isEmpty && other.pendingReloads == 0 && other.unregisteredDevices == 0)
            #expect(try await fixture.store.instanceDescriptions([w2, 999_999]).map(\.widgetID) == ["w2"])
        }
    }
}
