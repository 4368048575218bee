import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// A delivery's `sending` mark is written as an attempt in flight, without a change of the indexed state
/// (decision 0096). On both stores it reads as `sending` wherever a state is read: the delivery itself,
/// the unfinished deliveries a start or a takeover loads, the operator's statistics and the dashboard.
/// A row a gateway of the version before marked `sending` reads the same.
struct DeliveryInFlightTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func delivery(_ number: Int, device: Int64, instance: Int64, state: RecordedDelivery.State = .pending) -> RecordedDelivery {
        RecordedDelivery(
            apnsID: String(format: "00000000-0000-4000-8000-%012d", number), device: device,
            released: Timestamp(seconds: 1_790_000_000 + Int64(number)), instances: [instance], requests: [1],
            priority: .high, expiration: nil, state: state
        )
    }

    @Test(arguments: StoreImplementation.all) func anAttemptInFlightReadsAsSendingEverywhere(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with("in-flight", implementation, now: Self.now) { fixture in
            let store = fixture.store
            let (device, instance) = (fixture.registration.device, fixture.instances[0])
            var batch = LedgerBatch()
            batch.requests = [StoreFixture.request(1, app: fixture.app)]
            // 1: marked sending; 2: sending then sent in one batch; 3: left pending; 4: marked `sending` as a
            // gateway of the version before wrote it (the state column itself).
            batch.deliveries = [
                Self.delivery(1, device: device, instance: instance), Self.delivery(2, device: device, instance: instance),
                Self.delivery(3, device: device, instance: instance), Self.delivery(4, device: device, instance: instance, state: .sending),
            ]
            try await store.commit(batch)
            let ids = batch.deliveries.map(\.apnsID)
            try await store.setDeliveryStates([
                DeliveryStateChange(apnsID: ids[0], state: .sending),
                DeliveryStateChange(apnsID: ids[1], state: .sending),
                DeliveryStateChange(apnsID: ids[1], state: .sent),
            ], at: Self.now)

            #expect(try await store.deliveries(in: [.sending]).map(\.apnsID) == [ids[0], ids[3]])
            #expect(try await store.deliveries(in: [.pending]).map(\.apnsID) == [ids[2]])
            #expect(try await store.deliveries(in: [.pending, .sending]).map(\.apnsID) == [ids[0], ids[2], ids[3]])
            #expect(try await store.deliveries(in: [.sent]).map(\.apnsID) == [ids[1]])
            let first = try #require(try await store.delivery(apnsID: ids[0])?.delivery)
            #expect(first.state == .sending && first.history.attempts == 1)
            #expect(try await store.statistics().deliveriesByState == ["sending": 2, "sent": 1, "pending": 1])
            let figures = try await store.dashboardFigures(bundle: nil, now: Timestamp(Self.now))
            #expect(figures.deliveriesByState == ["sending": 2, "sent": 1, "pending": 1])

            // A start finds the attempt's outcome unknown: back to `pending`, then tried again and failed.
            try await store.setDeliveryStates([
                DeliveryStateChange(apnsID: ids[0], state: .pending, error: "the gateway stopped while sending it", unknownOutcome: true),
                DeliveryStateChange(apnsID: ids[3], state: .pending, error: "the gateway stopped while sending it", unknownOutcome: true),
            ], at: Self.now)
            #expect(try await store.deliveries(in: [.sending]).isEmpty)
            #expect(try await store.deliveries(in: [.pending]).map(\.apnsID) == [ids[0], ids[2], ids[3]])
            try await store.setDeliveryStates([DeliveryStateChange(apnsID: ids[0], state: .sending)], at: Self.now)
            #expect(try await store.deliveries(in: [.sending]).map(\.apnsID) == [ids[0]])
            try await store.setDeliveryStates([DeliveryStateChange(apnsID: ids[0], state: .failed, error: "BadDeviceToken")], at: Self.now)
            let failed = try #require(try await store.delivery(apnsID: ids[0])?.delivery)
            #expect(failed.state == .failed)
            #expect(failed.history.attempts == 2 && failed.history.unknownOutcomes == 1 && failed.history.lastError == "BadDeviceToken")
            #expect(try await store.statistics().deliveriesByState == ["failed": 1, "sent": 1, "pending": 2])
        }
    }
}
