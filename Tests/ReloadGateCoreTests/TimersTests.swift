@testable import ReloadGateCore
import ReloadGateHostileInput
import Testing

/// The scheduler's timers against a sorted list: whatever is inserted, interleaved with pops, comes out
/// earliest first and complete, across the planned and pending heaps and the queue in front of them.
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

/// The pending reloads' radix queue against a sorted list: entries come out earliest first with their
/// instances, also when an entry is earlier than the time taken last (a restore or an operator's flush can
/// insert one), and a copy taken midway is not changed by what the original does after it.
struct RadixTimerQueueTests {

    @Test(arguments: 0..<20)
    func entriesComeOutEarliestFirstWhateverTheOrderTheyCameIn(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var queue = RadixTimerQueue(kind: .pendingReload)
        var expected: [(time: Int64, instance: Int32)] = []
        var clock: Int64 = 1_790_172_000_000
        var copy: (queue: RadixTimerQueue, expected: [(time: Int64, instance: Int32)])?
        for step in 0..<5_000 {
            if Int.random(in: 0..<3, using: &random) < 2 {
                let time: Int64 =
                    switch Int.random(in: 0..<7, using: &random) {
                    case 0: clock
                    case 1: clock + Int64.random(in: 0..<5_000, using: &random)
                    case 2: clock + Int64.random(in: 0..<600_000, using: &random)
                    case 3: clock + Int64.random(in: 1_000_000..<20_000_000, using: &random)
                    // Before the time taken last.
                    case 4: clock - Int64.random(in: 1..<600_000, using: &random)
                    // Across the sign: the keys' order is the times' order.
                    case 5: Int64.random(in: -5_000...5_000, using: &random)
                    default: expected.randomElement(using: &random)?.time ?? clock
                    }
                queue.insert(.init(time: time, instance: Int32(step), kind: .pendingReload))
                expected.append((time, Int32(step)))
            } else if let top = queue.topTime {
                let entry = queue.popTop()
                #expect(entry?.time == top)
                #expect(top == expected.map(\.time).min())
                let index = expected.firstIndex { $0.time == entry?.time && $0.instance == entry?.instance }
                #expect(index != nil, "seed \(seed): popped an entry never inserted")
                if let index { expected.remove(at: index) }
                clock = max(clock, top)
            }
            #expect(queue.count == expected.count)
            #expect(queue.topTime == expected.map(\.time).min())
            #expect(queue.top?.time == expected.map(\.time).min())
            if step == 2_500 { copy = (queue, expected) }
        }
        var popped: [Int64] = []
        while let entry = queue.popTop() { popped.append(entry.time) }
        #expect(popped == expected.map(\.time).sorted())
        guard var (copied, copiedExpected) = copy else { return }
        var fromCopy: [(time: Int64, instance: Int32)] = []
        while let entry = copied.popTop() { fromCopy.append((entry.time, entry.instance)) }
        #expect(fromCopy.map(\.time) == copiedExpected.map(\.time).sorted())
        #expect(Set(fromCopy.map(\.instance)) == Set(copiedExpected.map(\.instance)))
        copiedExpected.removeAll()
    }
}
