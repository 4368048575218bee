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

    @Test func numbersThatDoNotFitAreLeftOutAndSpacesAreSkipped() {
        #expect(IntegerList.parse("[ 1, 2 ,3 ]") == [1, 2, 3])
        #expect(IntegerList.parse("[9223372036854775808,5]") == [5])
        #expect(IntegerList.parse("[-9223372036854775809,5]") == [5])
        #expect(IntegerList.parse("[99999999999999999999,7]") == [7])
        #expect(IntegerList.parse("[1e300,8]") == [1, 300, 8])   // not a list the stores write; read without a trap
    }
}
