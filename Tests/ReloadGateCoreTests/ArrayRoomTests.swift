import ReloadGateCore
import Testing

/// `reserveRoom(for:)`: a large batch gets its room in one allocation, and many small batches grow the
/// array as appending would, not once per call.
struct ArrayRoomTests {
    /// The address of the array's storage: it changes when, and only when, the array is reallocated.
    private func storage(_ array: [Int]) -> UnsafeRawPointer? {
        array.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func aLargeBatchIsAppendedWithoutReallocating() {
        var array = Array(0..<10)
        array.reserveRoom(for: 1_000_000)
        #expect(array.capacity >= 1_000_010)
        let before = storage(array)
        for value in 0..<1_000_000 { array.append(value) }
        #expect(storage(array) == before)
        #expect(array.count == 1_000_010)
        #expect(array[10] == 0 && array.last == 999_999)
    }

    @Test func roomAlreadyThereChangesNothing() {
        var array = [Int]()
        array.reserveCapacity(100)
        array.append(contentsOf: 0..<50)
        let capacity = array.capacity
        let before = storage(array)
        array.reserveRoom(for: capacity - 50)
        #expect(array.capacity == capacity)
        #expect(storage(array) == before)
    }

    /// Asked for one more element 100,000 times, the array is reallocated about as often as by appending
    /// (each time at least twice as large), not 100,000 times.
    @Test func smallBatchesGrowTheArrayGeometrically() {
        var array = [Int]()
        var reallocations = 0
        var last = storage(array)
        for value in 0..<100_000 {
            array.reserveRoom(for: 1)
            array.append(value)
            let now = storage(array)
            if now != last { reallocations += 1 }
            last = now
        }
        #expect(array.count == 100_000)
        #expect(reallocations <= 20, "reallocated \(reallocations) times")
    }
}
