@testable import ReloadGateCore
import Testing

/// A tick's deliveries put in release order in place (``ReloadScheduler/putInReleaseOrder(_:)``) come out
/// as a stable sort by due time, at one time the highest priority first, would order them: for the few
/// pairs out of order of a busy tick, for a herd of one time whose priorities interleave (past the bound of
/// moves, sorted by ``ReloadScheduler/inReleaseOrder(_:)``), and for any order at all.
struct ReleaseOrderTests {
    /// Deliveries whose device is their position as released, so that the order among equals shows.
    static func deliveries(_ keys: [(at: Int64, priority: Priority)]) -> [Delivery] {
        keys.enumerated().map { position, key in
            Delivery(
                device: DeviceHandle(Int32(position)), at: Timestamp(milliseconds: key.at), reloaded: [.init(instance: InstanceHandle(Int32(position)), charged: true)],
                requests: [RequestID(position)], priority: key.priority, expiration: nil
            )
        }
    }

    /// The order a stable sort gives, by position: what the scheduler must release.
    static func expected(_ deliveries: [Delivery]) -> [Int32] {
        deliveries.indices.sorted { a, b in
            let (x, y) = (deliveries[a], deliveries[b])
            if x.at != y.at { return x.at < y.at }
            if x.priority != y.priority { return x.priority > y.priority }
            return a < b
        }.map { deliveries[$0].device.rawValue }
    }

    static func check(_ keys: [(at: Int64, priority: Priority)]) {
        let released = deliveries(keys)
        var ordered = released
        ReloadScheduler.putInReleaseOrder(&ordered)
        #expect(ordered.map(\.device.rawValue) == expected(released))
        // Every delivery once, whole: its lists moved with it.
        #expect(ordered.allSatisfy { $0.reloaded.first?.instance.rawValue == $0.device.rawValue && $0.requests.first == UInt64($0.device.rawValue) })
    }

    @Test func aBusyTicksFewPairsOfOneMillisecondAreReordered() {
        var random = SplitMix64(seed: 7)
        // 900 deliveries by time, one to three a millisecond, priorities at random.
        var at: Int64 = 1_000
        let keys = (0..<900).map { _ -> (at: Int64, priority: Priority) in
            if Int.random(in: 0..<3, using: &random) == 0 { at += 1 }
            return (at, Priority.allCases.randomElement(using: &random)!)
        }
        Self.check(keys)
        Self.check([])
        Self.check([(5, .low)])
        Self.check([(5, .low), (5, .high)])
    }

    @Test func aHerdOfOneTimeWithInterleavedPrioritiesIsSortedPastTheBound() {
        // 20,000 at one time, every other one high: moved one by one, 100 million moves.
        let keys = (0..<20_000).map { (at: Int64(7), priority: $0 % 2 == 0 ? Priority.low : .high) }
        Self.check(keys)
    }

    @Test func anyOrderComesOutSorted() {
        var random = SplitMix64(seed: 11)
        for _ in 0..<200 {
            let count = Int.random(in: 0..<300, using: &random)
            let keys = (0..<count).map { _ in (at: Int64.random(in: 0..<20, using: &random), priority: Priority.allCases.randomElement(using: &random)!) }
            Self.check(keys)
        }
    }
}
