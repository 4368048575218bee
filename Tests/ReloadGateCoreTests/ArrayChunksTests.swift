import ReloadGateCore
import Testing

/// A batch cut into parts (statements, reads, groups in flight): every element once, in order, no part
/// larger than asked and none empty.
struct ArrayChunksTests {
    @Test(arguments: [(0, 3), (1, 3), (3, 3), (7, 3), (1_001, 1_000), (5, 1)])
    func everyElementOnceInOrderInPartsOfAtMostTheSize(count: Int, size: Int) {
        let items = Array(0..<count)
        let parts = items.chunks(of: size)
        #expect(parts.flatMap { $0 } == items)
        #expect(parts.allSatisfy { !$0.isEmpty && $0.count <= size })
        #expect(parts.count == (count + size - 1) / size)
    }
}
