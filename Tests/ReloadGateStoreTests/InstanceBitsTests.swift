@testable import ReloadGateStore
import Testing

/// `InstanceBits`: a set of instance ids, one bit each.
struct InstanceBitsTests {
    @Test func idsAreAddedOnceFoundAndRemoved() {
        var bits = InstanceBits()
        let added = [0, 63, 64, 1_000_003, 64].map { bits.insert($0) }
        #expect(added == [true, true, true, true, false])
        #expect([0, 63, 64, 1_000_003].allSatisfy(bits.contains))
        #expect(![1, 62, 65, 1_000_002, 5_000_000].contains(where: bits.contains))
        bits.remove(64)
        bits.remove(9_999_999)  // beyond the words: nothing to do
        #expect(!bits.contains(64) && bits.contains(63))
        let again = bits.insert(64)
        #expect(again)
    }

    /// Ids the bits cannot hold are never found, and removing one changes nothing.
    @Test func idsOutsideTheBitsAreNotHeld() {
        var bits = InstanceBits(roomFor: 100)
        for id in [-1, Int64.min, InstanceBits.limit, Int64.max] {
            #expect(!InstanceBits.holds(id))
            #expect(!bits.contains(id))
            bits.remove(id)
        }
        // The largest id held (not inserted here: its words would take 512 MiB).
        #expect(InstanceBits.holds(InstanceBits.limit - 1))
        #expect(!bits.contains(InstanceBits.limit - 1))
    }
}
