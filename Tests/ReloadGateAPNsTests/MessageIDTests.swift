import Foundation
import Testing

@testable import ReloadGateAPNs

@Suite struct MessageIDTests {
    @Test func formatsBitsAsALowercaseVersion4UUID() {
        #expect(MessageID.format(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210) == "01234567-89ab-4def-bedc-ba9876543210")
        #expect(MessageID.format(high: 0, low: 0) == "00000000-0000-4000-8000-000000000000")
        #expect(MessageID.format(high: .max, low: .max) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
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
}
