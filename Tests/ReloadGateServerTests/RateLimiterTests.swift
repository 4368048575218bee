@testable import ReloadGateServer
import Synchronization
import ReloadGateTesting
import Testing

/// `upstream.requestsPerSecond`: requests toward Apple are spaced to the rate after a burst of a tenth
/// of a second's worth, also when the process was stalled while they waited.
@Suite(.offThePool, .timeLimit(.minutes(5)))
struct RateLimiterTests {
    @Test func requestsBeyondTheBurstAreSpacedToTheRate() async throws {
        let limiter = RateLimiter.pacer(perSecond: 100)
        let start = ContinuousClock.now
        var slots: [Duration] = []
        for _ in 0..<40 {
            try await limiter.waitForSlot()
            slots.append(start.duration(to: .now))
        }
        // 100 per second with a burst of 10: the 40th request cannot go before 10 ms x (40 - 10 - 1).
        #expect(slots[39] >= .milliseconds(290), "\(slots[39])")
    }

    /// Ten requests at 10 a second (a burst of two) on a clock the test moves. Two go at once, eight
    /// wait; then the clock jumps two seconds, as it does for a process that could not run: the eight
    /// must still leave a tenth of a second apart (after one more burst), not together.
    @Test func aStallDoesNotReleaseTheWaitingRequestsTogether() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(perSecond: 10, burst: 2, clock: clock)
        let admitted = Admissions()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await limiter.waitForSlot()
                    let now = clock.now.offset
                    admitted.times.withLock { $0.append(now) }
                }
            }
            try await eventually { admitted.count == 2 && limiter.waiting == 8 }
            clock.advance(by: .seconds(2))
            try await eventually { admitted.count == 4 }
            for step in 1...6 {
                // Nobody goes before the clock moves on.
                try await Task.sleep(for: .milliseconds(20))
                #expect(admitted.count == 3 + step)
                clock.advance(by: .milliseconds(100))
                try await eventually { admitted.count == 4 + step }
            }
            try await group.waitForAll()
        }
        let times = admitted.times.withLock { $0 }
        #expect(times == [0, 0, 2000, 2000, 2100, 2200, 2300, 2400, 2500, 2600].map { Duration.milliseconds($0) })
    }

    @Test func aCancelledWaiterLeavesTheQueueAndTheOthersKeepTheirTurns() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(perSecond: 10, burst: 2, clock: clock)
        try await limiter.waitForSlot()
        try await limiter.waitForSlot()
        let cancelled = Task { try await limiter.waitForSlot() }
        try await eventually { limiter.waiting == 1 }
        let second = Task { try await limiter.waitForSlot() }
        try await eventually { limiter.waiting == 2 }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(limiter.waiting == 1)
        clock.advance(by: .milliseconds(100))
        try await second.value
        #expect(limiter.waiting == 0)
    }

    /// The per-key guard (docs/APNS.md's 429 per device token): each key has its own burst and rate; a request
    /// over it is refused at once and does not count; the clock gives it back.
    @Test func keysAreGuardedEachOnItsOwnAndRefusedRequestsDoNotCount() {
        let clock = ManualClock()
        let limiter = RateLimiter(perSecond: 1, burst: 2, clock: clock)
        #expect((0..<5).map { _ in limiter.allow("a") } == [true, true, false, false, false])
        #expect(limiter.allow("b"))
        clock.advance(by: .milliseconds(999))
        #expect(!limiter.allow("a"))
        clock.advance(by: .milliseconds(1))
        #expect(limiter.allow("a"))
        #expect(!limiter.allow("a"))
        clock.advance(by: .seconds(60))
        #expect((0..<3).map { _ in limiter.allow("a") } == [true, true, false])
    }

    /// Memory is bounded by the keys whose time has not come: at the limit, the others are dropped (they
    /// hold nothing) and a key still spaced out keeps its place, so a flood of new keys does not free it.
    @Test func aFullMapDropsOnlyTheKeysWhoseTimeHasCome() {
        let clock = ManualClock()
        let limiter = RateLimiter(every: .seconds(60), tolerance: .zero, clock: clock)
        // A flood of keys, each due again in 60 s; one key called later, due at 119 s.
        var admitted = 0
        for key in 1..<RateLimiter<ManualClock>.keyLimit where limiter.allow("k\(key)") { admitted += 1 }
        #expect(admitted == RateLimiter<ManualClock>.keyLimit - 1)
        clock.advance(by: .seconds(59))
        #expect(limiter.allow("spaced"))
        clock.advance(by: .seconds(2))
        #expect(limiter.allow("new") && limiter.allow("other"), "the map at its limit drops the keys whose time has come")
        #expect(!limiter.allow("spaced"), "a key whose time has not come keeps it")
        clock.advance(by: .seconds(58))
        #expect(limiter.allow("spaced"))
    }

    /// Polls `condition` (for at most five seconds of real time).
    private func eventually(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for _ in 0..<5_000 where !condition() {
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(condition(), sourceLocation: sourceLocation)
    }
}

/// The clock's readings when requests were admitted.
final class Admissions: Sendable {
    let times = Mutex<[Duration]>([])
    var count: Int { times.withLock(\.count) }
}

/// A clock that moves only when told to; sleepers wake when it passes their deadline. (pointfreeco's
/// swift-clocks has a `TestClock`, but its mirrored release 1.1.1 needs tools version 6.4 and a package
/// the mirror does not hold, swift-issue-reporting.)
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [(deadline: Instant, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    var now: Instant { state.withLock(\.now) }
    /// How many wait on the clock.
    var sleepers: Int { state.withLock(\.sleepers.count) }
    var minimumResolution: Duration { .zero }

    func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Does not wake early on cancellation (the limiter does not need it).
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if deadline <= state.now { return true }
                state.sleepers.append((deadline, continuation))
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}
