import ReloadGateCore
import Testing

struct CompactListTests {
    @Test func behavesLikeAnArrayOfItsElements() {
        var list = CompactList<Int>()
        #expect(list.isEmpty)
        #expect(Array(list) == [])
        list.append(7)
        #expect(list.count == 1)
        #expect(list == [7])
        list.append(8)
        list.append(9)
        #expect(Array(list) == [7, 8, 9])
        #expect(list[2] == 9)
        #expect(list.reversed() == [9, 8, 7])

        var joined: CompactList<Int> = [1]
        joined.append(contentsOf: list)
        joined.append(contentsOf: CompactList())
        #expect(Array(joined) == [1, 7, 8, 9])
        var empty = CompactList<Int>()
        empty.append(contentsOf: [4, 5])
        #expect(empty == CompactList([4, 5]))
        #expect(empty != [4])
        #expect(Set([empty, CompactList([4, 5])]).count == 1)
    }
}
