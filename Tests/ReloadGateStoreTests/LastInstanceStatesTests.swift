import ReloadGateCore
@testable import ReloadGateStore
import Testing

/// The one rule both stores write a batch's instance states by: each instance's last state, in the order of
/// those last states.
struct LastInstanceStatesTests {
    func state(_ bucket: Int64) -> InstanceSnapshot {
        InstanceSnapshot(bucketFullAt: bucket, lastReload: nil, plannedReload: nil, pending: nil)
    }

    func written(_ states: [(instance: Int64, snapshot: InstanceSnapshot?)]) -> [(instance: Int64, snapshot: InstanceSnapshot?)] {
        var batch = LedgerBatch()
        batch.instanceStates = states
        var written: [(instance: Int64, snapshot: InstanceSnapshot?)] = []
        batch.lastInstanceStates.forEach { written.append(($0, $1)) }
        return written
    }

    /// A small batch (instances remembered in a set) and a fan-out's (a bit per id), each with an instance
    /// written twice, one removed and written again, one written and removed.
    @Test(arguments: [10, 5_000]) func eachInstanceIsWrittenOnceWithItsLastState(_ size: Int) {
        var states: [(instance: Int64, snapshot: InstanceSnapshot?)] = (0..<Int64(size)).map { ($0, state($0)) }
        states += [(3, state(1_003)), (5, nil), (5, state(1_005)), (7, state(1_007)), (7, nil)]
        let written = written(states)

        var expected: [(instance: Int64, snapshot: InstanceSnapshot?)] = (0..<Int64(size)).filter { ![3, 5, 7].contains($0) }.map { ($0, state($0)) }
        expected += [(3, state(1_003)), (5, state(1_005)), (7, nil)]
        // The first difference alone, rather than two lists of thousands.
        let difference = zip(written, expected).enumerated().first { $1.0.instance != $1.1.instance || $1.0.snapshot != $1.1.snapshot }?.offset
        #expect(written.count == expected.count)
        #expect(difference == nil)
    }

    /// Ids too sparse for bits, and negative ones, are remembered in a set: nothing is lost or repeated.
    @Test func sparseAndNegativeIdsAreEachWrittenOnce() {
        var states: [(instance: Int64, snapshot: InstanceSnapshot?)] = (0..<5_000).map { (Int64($0) * 1_000_003, state(Int64($0))) }
        states += [(-1, state(1)), (0, state(2)), (-1, nil)]
        let written = written(states)
        #expect(written.count == 5_001)
        #expect(written.first?.instance == 1_000_003)
        #expect(written.suffix(2).map(\.instance) == [0, -1])
        #expect(written.suffix(2).map(\.snapshot) == [state(2), nil])
    }
}
