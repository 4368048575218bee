@testable import ReloadGateCore
import ReloadGateHostileInput
import ReloadGateTesting
import Testing

/// The scheduler's timers against a sorted list: whatever is inserted, interleaved with pops, comes out
/// earliest first and complete, across the planned and pending heaps and the queue in front of them.
@Suite(.offThePool)
struct TimersTests {

    @Test(arguments: 0..<20)
    func timersComeOutEarliestFirstAndNoneIsLost(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var timers = Timers()
        var expected: [Int64] = []
        var clock: Int64 = 1_790_172_000_000
        var popped: [Int64] = []
        for step in 0..<5_000 {
            if Int.random(in: 0..<3, using: &random) < 2 {
                // Due now, within seconds, minutes, past the wheel (hours), or exactly at a time already used.
                let offset: Int64 =
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0: 0
                    case 1: Int64.random(in: 0..<5_000, using: &random)
                    case 2: Int64.random(in: 0..<600_000, using: &random)
                    case 3: Int64.random(in: 1_000_000..<20_000_000, using: &random)
                    default: expected.randomElement(using: &random).map { max(0, $0 - clock) } ?? 0
                    }
                let kind: TimerHeap.Kind = Int.random(in: 0..<4, using: &random) == 0 ? .plannedReload : .pendingReload
                timers.insert(.init(time: clock + offset, instance: Int32(step), kind: kind))
                expected.append(clock + offset)
            } else if let top = timers.top {
                #expect(timers.popTop()?.time == top.time)
                popped.append(top.time)
                expected.remove(at: expected.firstIndex(of: top.time)!)
                // As the scheduler does: time moves to what fell due, never back.
                clock = max(clock, top.time)
            }
            #expect(timers.count == expected.count)
            #expect(timers.top?.time == expected.min())
        }
        while let entry = timers.popTop() { popped.append(entry.time) }
        #expect(zip(popped, popped.dropFirst()).allSatisfy { $0 <= $1 } || popped.count < 2)
        #expect(timers.count == 0)
    }
}
