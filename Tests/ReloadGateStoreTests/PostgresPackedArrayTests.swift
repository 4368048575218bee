import NIOCore
import PostgresNIO
@testable import ReloadGateStore
import Testing

/// The group commit's arrays, written in one pass (decision 0099): an array without NULLs is byte for byte
/// what postgres-nio's own `[Element]` binding writes, and one with NULLs follows PostgreSQL's `array_send`
/// layout (has-NULLs set, length -1 for each NULL). A PostgreSQL server reads them back in the store tests.
struct PostgresPackedArrayTests {
    static func packed<Slot: PostgresPackedSlot>(_ elements: [Slot]) -> [UInt8] {
        var buffer = ByteBuffer()
        PostgresPackedArray(elements).encode(into: &buffer, context: .default)
        return Array(buffer.readableBytesView)
    }

    static func library<Element: PostgresArrayEncodable>(_ elements: [Element]) throws -> [UInt8] {
        var buffer = ByteBuffer()
        try elements.encode(into: &buffer, context: .default)
        return Array(buffer.readableBytesView)
    }

    @Test func anArrayWithoutNullsIsWhatPostgresNIOWrites() throws {
        #expect(Self.packed([Int64.min, -1, 0, 1, Int64.max]) == (try Self.library([Int64.min, -1, 0, 1, Int64.max])))
        #expect(Self.packed([Int32.min, 7, Int32.max]) == (try Self.library([Int32.min, 7, Int32.max])))
        #expect(Self.packed([true, false, true]) == (try Self.library([true, false, true])))
        let texts = ["", "scheduled", "déjà vu ☕️", String(repeating: "x", count: 5000), "a\u{0}b"]
        #expect(Self.packed(texts) == (try Self.library(texts)))
        #expect(Self.packed([Int64]()) == (try Self.library([Int64]())))
        #expect(Self.packed([String]()) == (try Self.library([String]())))
        // Optional elements without a NULL among them: the same bytes.
        #expect(Self.packed([Int64?]([3, 4])) == (try Self.library([Int64(3), 4])))
        #expect(Self.packed([String?](["a", "bc"])) == (try Self.library(["a", "bc"])))
    }

    @Test func nullsAreFlaggedAndWrittenAsLengthMinusOne() throws {
        let bytes = Self.packed([Int64?]([5, nil, -2]))
        var expected = ByteBuffer()
        expected.writeInteger(1, as: Int32.self)  // dimensions
        expected.writeInteger(1, as: Int32.self)  // has NULLs
        expected.writeInteger(Int64.psqlType.rawValue)
        expected.writeInteger(3, as: Int32.self)  // length
        expected.writeInteger(1, as: Int32.self)  // lower bound
        expected.writeInteger(8, as: Int32.self)
        expected.writeInteger(5, as: Int64.self)
        expected.writeInteger(-1, as: Int32.self)
        expected.writeInteger(8, as: Int32.self)
        expected.writeInteger(-2, as: Int64.self)
        #expect(bytes == Array(expected.readableBytesView))

        let texts = Self.packed([String?]([nil, "é"]))
        var expectedTexts = ByteBuffer()
        expectedTexts.writeInteger(1, as: Int32.self)
        expectedTexts.writeInteger(1, as: Int32.self)
        expectedTexts.writeInteger(String.psqlType.rawValue)
        expectedTexts.writeInteger(2, as: Int32.self)
        expectedTexts.writeInteger(1, as: Int32.self)
        expectedTexts.writeInteger(-1, as: Int32.self)
        expectedTexts.writeInteger(2, as: Int32.self)
        expectedTexts.writeBytes([0xC3, 0xA9])
        #expect(texts == Array(expectedTexts.readableBytesView))
    }

    @Test func anIntegerListIsBoundAsItsStoredText() throws {
        let lists: [[Int64]] = [[], [0], [1, 2, 3], [Int64.min, -1, 9, 10, 99, 100, Int64.max], (0..<100).map { $0 * 1_000_003 - 7 }]
        #expect(Self.packed(lists.map(PackedIntegerList.init)) == (try Self.library(lists.map(IntegerList.text))))
        for list in lists {
            #expect(IntegerList.textLength(list) == IntegerList.text(list).utf8.count, "\(list)")
        }
        var alone = ByteBuffer()
        PackedIntegerList([4, -5]).encode(into: &alone, context: .default)
        #expect(alone.readString(length: alone.readableBytes) == "[4,-5]")
    }

    @Test func thePackedArrayAppendsAfterWhatTheBufferHolds() throws {
        var buffer = ByteBuffer()
        buffer.writeString("prefix")
        PostgresPackedArray([Int64(9)]).encode(into: &buffer, context: .default)
        #expect(buffer.readString(length: 6) == "prefix")
        #expect(Array(buffer.readableBytesView) == (try Self.library([Int64(9)])))
        #expect(PostgresPackedArray<Int64?>.psqlType == [Int64].psqlType)
        #expect(PostgresPackedArray<String>.psqlType == [String].psqlType)
    }
}
