import ReloadGateCore
import ReloadGateStore
import Testing

@testable import ReloadGateServer

/// What the delivery worker holds: a delivery handed over again under the same lease epoch is not taken
/// twice; one of a newer epoch is, and the older copy's end does not release it.
struct HeldDeliveriesTests {
    static func delivery(_ id: String, epoch: Int64?) -> RecordedDelivery {
        var delivery = RecordedDelivery(
            apnsID: id, device: 1, released: Timestamp(milliseconds: 0), instances: [1], requests: [1], priority: .high,
            expiration: nil, state: .pending
        )
        delivery.leaseEpoch = epoch
        return delivery
    }

    @Test func aDeliveryHeldIsNotTakenAgainUnderTheSameEpoch() {
        let held = HeldDeliveries()
        #expect(held.take([Self.delivery("a", epoch: 3), Self.delivery("b", epoch: 3)]).map(\.apnsID) == ["a", "b"])
        #expect(held.take([Self.delivery("a", epoch: 3)]).isEmpty)
        #expect(held.take([Self.delivery("c", epoch: nil), Self.delivery("c", epoch: nil)]).count == 1)
        held.release([Self.delivery("a", epoch: 3)])
        #expect(held.take([Self.delivery("a", epoch: 3)]).count == 1)
    }

    @Test func aNewerEpochIsTakenAndTheOlderCopyReleasesNothing() {
        let held = HeldDeliveries()
        _ = held.take([Self.delivery("a", epoch: 3)])
        #expect(held.take([Self.delivery("a", epoch: 5)]).count == 1)
        // The copy of epoch 3 is left behind when its turn comes: the newer copy stays held.
        held.release([Self.delivery("a", epoch: 3)])
        #expect(held.take([Self.delivery("a", epoch: 5)]).isEmpty)
        held.release([Self.delivery("a", epoch: 5)])
        #expect(held.count == 0)
    }
}
