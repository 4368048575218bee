import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// What the delivery worker holds: a delivery handed over again under the same lease epoch is not taken
/// twice; one of a newer epoch is, and the older copy's end does not release it.
@Suite(.offThePool)
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

    /// A device holds several deliveries at once: each is taken, replaced by a newer epoch and released on
    /// its own, in any order, and the device is forgotten with its last one.
    @Test func oneDeviceHoldsSeveralDeliveries() {
        let held = HeldDeliveries()
        #expect(held.take(["a", "b", "c", "d"].map { Self.delivery($0, epoch: 1) }).count == 4)
        #expect(held.count == 4 && held.deviceCount == 1)
        // A copy of another epoch releases nothing; a copy of its own epoch does, first or not.
        held.release([Self.delivery("c", epoch: 2)])
        #expect(held.count == 4)
        held.release([Self.delivery("c", epoch: 1), Self.delivery("a", epoch: 1)])
        #expect(held.count == 2 && held.deviceCount == 1)
        #expect(held.take([Self.delivery("b", epoch: 1), Self.delivery("d", epoch: 1)]).isEmpty)
        #expect(held.take([Self.delivery("d", epoch: 2), Self.delivery("a", epoch: 1)]).map(\.apnsID) == ["d", "a"])
        #expect(held.count == 3)
        held.release([Self.delivery("b", epoch: 1), Self.delivery("d", epoch: 1), Self.delivery("a", epoch: 1)])
        #expect(held.count == 1 && held.deviceCount == 1)
        held.release([Self.delivery("d", epoch: 2)])
        #expect(held.count == 0 && held.deviceCount == 0)
    }

    /// A burst ends when nothing is held and no batch is being handed out, whichever comes last; it
    /// counts the deliveries released since the last one ended.
    @Test func aBurstEndsWhenNothingIsHeldAndNoBatchIsHandedOut() {
        let held = HeldDeliveries()
        _ = held.take([Self.delivery("a", epoch: nil), Self.delivery("b", epoch: nil)])
        #expect(held.release([Self.delivery("a", epoch: nil)]) == nil)
        _ = held.take([Self.delivery("c", epoch: nil)])
        #expect(held.release([Self.delivery("b", epoch: nil)]) == nil)
        #expect(held.release([Self.delivery("c", epoch: nil)]) == 3)
        // Counted afresh from there; a copy of an earlier epoch released nothing and counts nothing.
        _ = held.take([Self.delivery("d", epoch: 5)])
        #expect(held.release([Self.delivery("d", epoch: 4)]) == nil)
        #expect(held.release([Self.delivery("d", epoch: 5)]) == 1)
        // While a batch is handed out, nothing held is not the end: its end is.
        held.beginHandingOut()
        _ = held.take([Self.delivery("e", epoch: nil)])
        #expect(held.release([Self.delivery("e", epoch: nil)]) == nil)
        _ = held.take([Self.delivery("f", epoch: nil)])
        #expect(held.release([Self.delivery("f", epoch: nil)]) == nil)
        #expect(held.endHandingOut() == 2)
        // Handed out with one still held: the release ends it.
        held.beginHandingOut()
        _ = held.take([Self.delivery("g", epoch: nil)])
        #expect(held.endHandingOut() == nil)
        #expect(held.release([Self.delivery("g", epoch: nil)]) == 1)
        // Nothing released: no burst.
        held.beginHandingOut()
        #expect(held.endHandingOut() == nil)
    }

    /// After a herd, the storage follows what is held, not the most ever held: 200,000 deliveries to as
    /// many devices taken at once and released in batches leave room for a few thousand. (Swift keeps a
    /// dictionary's room when entries leave: without the rebuild, room for over 200,000 stayed.)
    @Test func theRoomKeptFollowsWhatIsHeldAfterAHerd() {
        let held = HeldDeliveries()
        let herd = (0..<200_000).map { n in
            var delivery = Self.delivery("herd-\(n)", epoch: nil)
            delivery.device = Int64(n)
            return delivery
        }
        #expect(held.take(herd).count == herd.count)
        #expect(held.capacity >= herd.count)
        // Ended in batches of 256, as the worker's groups end; the last 100 are still held.
        for start in stride(from: 0, to: herd.count - 100, by: 256) {
            held.release(herd[start..<min(start + 256, herd.count - 100)])
        }
        #expect(held.count == 100 && held.deviceCount == 100)
        let kept = held.capacity
        #expect(kept <= HeldDeliveries.keptRoom, "room for \(kept) devices kept, 100 known")
        // What is still held is still held: taken again, not twice.
        #expect(held.take(Array(herd.suffix(100))).isEmpty)
        held.release(herd.suffix(100))
        #expect(held.count == 0 && held.deviceCount == 0)
    }

    /// A device's last turn ending gives its room back too (an activity's deliveries end through turns).
    @Test func turnsEndingGiveTheRoomBack() {
        let held = HeldDeliveries()
        for device in 0..<100_000 { #expect(held.tryTurn(device: Int64(device), timestamp: 1) == .go) }
        #expect(held.capacity >= 100_000)
        for device in 0..<100_000 { held.endTurn(device: Int64(device), reached: 1) }
        #expect(held.deviceCount == 0)
        #expect(held.capacity <= HeldDeliveries.keptRoom, "room for \(held.capacity) devices kept, none known")
    }
}
