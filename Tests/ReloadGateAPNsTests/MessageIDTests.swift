import Foundation
import Testing

@testable import ReloadGateAPNs

@Suite struct MessageIDTests {
    @Test func formatsBitsAsALowercaseVersion4UUID() {
        #expect(MessageID.format(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210) == "01234567-89ab-4def-bedc-ba9876543210")
        #expect(MessageID.format(high: 0, low: 0) == "00000000-0000-4000-8000-000000000000")
        #expect(MessageID.format(high: .max, low: .max) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
    }

    /// Every digit at every position: the same 128 bits (with the version and variant set) as Foundation
    /// writes them.
    @Test func formatsBitsAsFoundationWritesThem() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let (high, low) = (random.next() as UInt64, random.next() as UInt64)
            let versioned = (high & ~0xF000) | (4 << 12)
            let variant = (low & ~(0xC << 60)) | (0x8 << 60)
            var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &bytes) { raw in
                raw.storeBytes(of: versioned.bigEndian, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: variant.bigEndian, toByteOffset: 8, as: UInt64.self)
            }
            #expect(MessageID.format(high: high, low: low) == UUID(uuid: bytes).uuidString.lowercased())
        }
    }

    @Test func randomIDsAreCanonicalUniqueAndReadByFoundation() {
        var seen = Set<String>()
        for _ in 0..<10_000 {
            let id = MessageID.random()
            #expect(id.utf8.count == 36)
            #expect(id == id.lowercased())
            let parsed = UUID(uuidString: id)
            #expect(parsed?.uuidString.lowercased() == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"))
            #expect("89ab".utf8.contains(Array(id.utf8)[19]))
            seen.insert(id)
        }
        #expect(seen.count == 10_000)
    }

    @Test func aGeneratorsIDsAreCanonicalAndUniqueAcrossRefills() {
        var generator = MessageID.Generator()
        var seen = Set<String>()
        for _ in 0..<10_000 {  // 625 refills of 16 ids
            let id = generator.next()
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"))
            seen.insert(id)
        }
        #expect(seen.count == 10_000)
        var other = MessageID.Generator()
        #expect(!seen.contains(other.next()))
    }

    /// Deliveries' ids: canonical version-7 UUIDs that grow with time and, at one millisecond, with each
    /// id (the store appends them to its index); the time is the first 48 bits.
    @Test func orderedIDsAreCanonicalVersion7AndIncrease() {
        var ordered = MessageID.Ordered()
        var previous = ""
        var seen = Set<String>()
        for index in 0..<10_000 {
            let milliseconds: Int64 = 1_795_600_000_000 + Int64(index / 1000)
            let id = ordered.next(milliseconds: milliseconds)
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "7"))
            #expect("89ab".utf8.contains(Array(id.utf8)[19]))
            #expect(id > previous, "\(id) after \(previous)")
            let time = id.replacingOccurrences(of: "-", with: "").prefix(12)
            #expect(Int64(time, radix: 16) == milliseconds)
            previous = id
            seen.insert(id)
        }
        #expect(seen.count == 10_000)
        // A clock before 1970 or past 2^48 ms gives canonical ids all the same.
        #expect(UUID(uuidString: ordered.next(milliseconds: .min)) != nil)
        #expect(UUID(uuidString: ordered.next(milliseconds: .max)) != nil)
    }
}
