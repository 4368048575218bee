@testable import ReloadGateServer
import Testing

/// `upstream.requestsPerSecond`: requests toward Apple are spaced to the rate after a burst of a tenth
/// of a second's worth. Only a lower bound on the time is checked (a busy machine makes it longer).
@Suite(.timeLimit(.minutes(5)))
struct RequestRateLimiterTests {
    @Test func requestsBeyondTheBurstAreSpacedToTheRate() async throws {
        let limiter = RequestRateLimiter(perSecond: 100)
        let start = ContinuousClock.now
        var slots: [Duration] = []
        for _ in 0..<40 {
            try await limiter.waitForSlot()
            slots.append(start.duration(to: .now))
        }
        // 100 per second with a burst of 10: the 40th request cannot go before 10 ms x (40 - 10 - 1).
        #expect(slots[39] >= .milliseconds(290), "\(slots[39])")
    }
}
