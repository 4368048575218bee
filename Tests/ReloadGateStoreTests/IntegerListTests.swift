import ReloadGateCore
import Testing

@testable import ReloadGateStore

/// The stored integer lists (`[1,2,3]`): what the stores write reads back the same, to the extremes; what
/// does not fit an Int64 is left out, never a trap (the lists are read back from a database that anyone
/// with access could have edited).
@Suite struct IntegerListTests {
    @Test func writtenListsReadBackTheSameToTheExtremes() {
        let values: [Int64] = [0, 1, -1, 42, 1_000_000_007, .max, .min, .min + 1]
        #expect(IntegerList.text(values) == "[0,1,-1,42,1000000007,9223372036854775807,-9223372036854775808,-9223372036854775807]")
        #expect(IntegerList.parse(IntegerList.text(values)) == values)
        #expect(IntegerList.text([]) == "[]")
        #expect(IntegerList.parse("[]") == [])
        #expect(IntegerList.parse("") == [])
    }

    /// The bytes a group commit binds (``IntegerList/withText(_:count:_:)``, written into a temporary
    /// buffer) are the text of the plain spelling, for lists of every length up to the longest numbers,
    /// and the buffer is never too small: a list of the longest numbers fills it to the last byte but one
    /// comma.
    @Test func theBoundBytesAreThePlainSpelling() {
        var random = SplitMix64(seed: 49)
        for length in [0, 1, 2, 3, 17, 100, 257] {
            let values: [Int64] = (0..<length).map { index in
                switch index % 4 {
                case 0: Int64(bitPattern: random.next())
                case 1: Int64(bitPattern: random.next()) >> 40
                case 2: index % 8 == 2 ? .min : .max
                default: 0
                }
            }
            let plain = "[" + values.map(String.init).joined(separator: ",") + "]"
            #expect(IntegerList.withText(values, count: values.count) { String(decoding: $0, as: UTF8.self) } == plain)
            #expect(IntegerList.text(values) == plain)
        }
        let longest = [Int64](repeating: .min, count: 50)
        let bytes = IntegerList.withText(longest, count: longest.count) { $0.count }
        #expect(bytes == IntegerList.maximumLength(count: 50) - 1)
        // A sequence longer than it said is cut at its count, within the buffer.
        #expect(IntegerList.withText([Int64](repeating: .min, count: 9), count: 2) { String(decoding: $0, as: UTF8.self) } == "[-9223372036854775808,-9223372036854775808]")
    }

    @Test func numbersThatDoNotFitAreLeftOutAndSpacesAreSkipped() {
        #expect(IntegerList.parse("[ 1, 2 ,3 ]") == [1, 2, 3])
        #expect(IntegerList.parse("[9223372036854775808,5]") == [5])
        #expect(IntegerList.parse("[-9223372036854775809,5]") == [5])
        #expect(IntegerList.parse("[99999999999999999999,7]") == [7])
        #expect(IntegerList.parse("[1e300,8]") == [1, 300, 8])   // not a list the stores write; read without a trap
    }
}
