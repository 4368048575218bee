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

    /// The queue in front of the heaps, which takes a timer due no later than every other: a long run of
    /// timers of one millisecond (pushes due now) popped past the point where the queue moves its remainder
    /// to the front, then filled again from the start of its slots once empty: every timer out once, in the
    /// order it came, the count right at every step.
    @Test func aLongQueueIsCompactedAndReusedWithoutLosingATimer() {
        var timers = Timers()
        let now: Int64 = 1_790_172_000_000
        for k in 0..<10_000 { timers.insert(.init(time: now, instance: Int32(k), kind: .pendingReload)) }
        for k in 0..<6_000 {
            #expect(timers.popTop()?.instance == Int32(k))
            #expect(timers.count == 10_000 - k - 1)
        }
        // Behind the 4,000 left, and then alone once they are gone.
        for k in 10_000..<10_500 { timers.insert(.init(time: now, instance: Int32(k), kind: .pendingReload)) }
        for k in 6_000..<10_500 {
            #expect(timers.popTop()?.instance == Int32(k))
            #expect(timers.count == 10_500 - k - 1)
        }
        for round in Int64(1)...3 {
            for k in 0..<3 { timers.insert(.init(time: now + round, instance: Int32(k), kind: .pendingReload)) }
            #expect(timers.count == 3)
            for k in 0..<3 { #expect(timers.popTop()?.instance == Int32(k)) }
            #expect(timers.popTop() == nil)
        }
    }
}
