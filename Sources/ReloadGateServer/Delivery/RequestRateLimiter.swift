import Synchronization

/// Spaces requests toward the push service to at most `perSecond` (`upstream.requestsPerSecond`), with a
/// burst of a tenth of a second's worth: each caller reserves the next free slot and sleeps until it.
final class RequestRateLimiter: Sendable {
    private let interval: Duration
    private let burst: Duration
    private let nextSlot: Mutex<ContinuousClock.Instant>

    /// `perSecond` must be positive.
    init(perSecond: Int) {
        precondition(perSecond > 0)
        interval = .seconds(1) / perSecond
        burst = .milliseconds(100)
        nextSlot = Mutex(.now)
    }

    /// Returns when the caller may send (at once while under the rate).
    func waitForSlot() async throws {
        let now = ContinuousClock.now
        let slot = nextSlot.withLock { next in
            let slot = max(next, now - burst)
            next = slot.advanced(by: interval)
            return slot
        }
        if slot > now {
            try await Task.sleep(until: slot, clock: .continuous)
        }
    }
}
