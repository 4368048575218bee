import Synchronization

/// The gateway's one rate limiter, by the generic cell rate algorithm on an injected clock: a request is
/// admitted when the clock has reached the theoretical arrival time less the burst tolerance, which then
/// moves one interval past the later of itself and now. It is used two ways:
///
/// - ``waitForSlot()`` paces: callers wait for their turn, in order (`upstream.requestsPerSecond`, a burst
///   of a tenth of a second's worth). Slots are never reserved ahead: a process stalled for a while (a
///   busy machine, a long pause) lets at most a burst go when it resumes, not every request whose
///   reserved time passed during the stall.
/// - ``allow(_:)`` guards: each key (a device token: docs/APNS.md's `429 TooManyRequests`) has its own
///   theoretical arrival time; a request over its key's rate is refused at once, never queued.
final class RateLimiter<C: Clock>: Sendable where C.Duration == Duration {
    private enum Turn {
        /// Queued; its task has not suspended yet.
        case announced
        case waiting(CheckedContinuation<Void, any Error>)
        /// Admitted before its task suspended: it returns at once.
        case admitted
    }

    private enum TurnStart {
        case suspend(startAdmitting: Bool)
        case admitted
        case cancelled
    }

    private struct State {
        var theoreticalArrival: C.Instant
        var turns: [UInt64: Turn] = [:]
        /// Turn ids in arrival order; ids no longer in `turns` (cancelled) are skipped.
        var order: [UInt64] = []
        var head = 0
        var nextID: UInt64 = 0
        var admitting = false

        mutating func popFirst() -> (UInt64, Turn)? {
            while head < order.count {
                let id = order[head]
                head += 1
                if let turn = turns.removeValue(forKey: id) {
                    compact()
                    return (id, turn)
                }
            }
            compact()
            return nil
        }

        var firstLive: UInt64? {
            order[head...].first { turns[$0] != nil }
        }

        private mutating func compact() {
            if head == order.count {
                order.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 64 && head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
        }
    }

    private let clock: C
    private let interval: Duration
    private let tolerance: Duration
    private let state: Mutex<State>
    /// ``allow(_:)``'s theoretical arrival time per key.
    private let keys = Mutex<[String: C.Instant]>([:])
    /// Keys kept at most (bounded memory): past it, the keys whose time has come are dropped (a key whose
    /// theoretical arrival is not after now is the same as no key), and if that is not enough the map
    /// starts again.
    static var keyLimit: Int { 200_000 }

    /// `perSecond` must be positive; a request may go `tolerance` before its theoretical arrival time.
    convenience init(perSecond: Int, tolerance: Duration, clock: C) {
        precondition(perSecond > 0)
        self.init(every: .seconds(1) / perSecond, tolerance: tolerance, clock: clock)
    }

    /// One request each `interval` (positive), a request may go `tolerance` before its time.
    init(every interval: Duration, tolerance: Duration, clock: C) {
        precondition(interval > .zero)
        self.clock = clock
        self.interval = interval
        self.tolerance = max(.zero, tolerance)
        state = Mutex(State(theoreticalArrival: clock.now))
    }

    /// `burst` requests go at once before the rate applies (at least one).
    convenience init(perSecond: Int, burst: Int, clock: C) {
        self.init(perSecond: perSecond, tolerance: .seconds(1) / perSecond * max(0, burst - 1), clock: clock)
    }

    /// Whether a request of `key` is within its rate now; if it is, it counts.
    func allow(_ key: String) -> Bool {
        wait(for: key) == nil
    }

    /// Admits a request of `key` (`nil`), or says how long until one would be admitted (nothing changes).
    func wait(for key: String) -> Duration? {
        let now = clock.now
        return keys.withLock { keys in
            if keys.count >= Self.keyLimit {
                keys = keys.filter { $0.value > now }
                if keys.count >= Self.keyLimit / 2 { keys.removeAll(keepingCapacity: true) }
            }
            let arrival = keys[key] ?? now
            guard admits(arrival, at: now) else { return now.duration(to: arrival.advanced(by: .zero - tolerance)) }
            keys[key] = max(arrival, now).advanced(by: interval)
            return nil
        }
    }

    /// Requests waiting for their turn (for tests).
    var waiting: Int { state.withLock { $0.turns.count } }

    /// Returns when the caller may send: at once while under the rate and nobody waits, otherwise when
    /// its turn comes. Throws `CancellationError` if the task is cancelled while it waits.
    func waitForSlot() async throws {
        let now = clock.now
        let ticket: UInt64? = state.withLock { state in
            if state.turns.isEmpty, admits(state.theoreticalArrival, at: now) {
                state.theoreticalArrival = max(state.theoreticalArrival, now).advanced(by: interval)
                return nil
            }
            state.nextID &+= 1
            state.turns[state.nextID] = .announced
            state.order.append(state.nextID)
            return state.nextID
        }
        guard let ticket else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let next: TurnStart = state.withLock { state in
                    switch state.turns[ticket] {
                    case .announced:
                        state.turns[ticket] = .waiting(continuation)
                        defer { state.admitting = true }
                        return .suspend(startAdmitting: !state.admitting)
                    case .admitted:
                        state.turns[ticket] = nil
                        return .admitted
                    case .waiting, nil:
                        return .cancelled
                    }
                }
                switch next {
                case .suspend(let startAdmitting):
                    if startAdmitting { Task { await self.admitInTurn() } }
                case .admitted:
                    continuation.resume()
                case .cancelled:
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let turn = state.withLock { state -> Turn? in
                guard case .admitted? = state.turns[ticket] else { return state.turns.removeValue(forKey: ticket) }
                return nil
            }
            if case .waiting(let continuation)? = turn { continuation.resume(throwing: CancellationError()) }
        }
    }

    private func admits(_ theoreticalArrival: C.Instant, at now: C.Instant) -> Bool {
        theoreticalArrival.advanced(by: .zero - tolerance) <= now
    }

    /// Admits queued requests as their turns come; ends when none is left.
    private func admitInTurn() async {
        while true {
            var resumed: [CheckedContinuation<Void, any Error>] = []
            let now = clock.now
            let wake: C.Instant? = state.withLock { state in
                while state.firstLive != nil {
                    guard admits(state.theoreticalArrival, at: now) else {
                        return state.theoreticalArrival.advanced(by: .zero - tolerance)
                    }
                    guard let (id, turn) = state.popFirst() else { break }
                    state.theoreticalArrival = max(state.theoreticalArrival, now).advanced(by: interval)
                    switch turn {
                    case .waiting(let continuation): resumed.append(continuation)
                    case .announced: state.turns[id] = .admitted
                    case .admitted: break
                    }
                }
                state.admitting = false
                return nil
            }
            for continuation in resumed { continuation.resume() }
            guard let wake else { return }
            try? await clock.sleep(until: wake, tolerance: nil)
        }
    }
}

extension RateLimiter where C == ContinuousClock {
    /// The upstream's pacer (`upstream.requestsPerSecond`): a burst of a tenth of a second's worth.
    static func pacer(perSecond: Int) -> RateLimiter {
        RateLimiter(perSecond: perSecond, tolerance: .milliseconds(100), clock: ContinuousClock())
    }

    /// The APNs listener's guard per device token (`ingress.requestsPerSecondPerToken`): a burst of two
    /// seconds' worth, generous since merging makes repeated pushes cheap.
    static func tokenGuard(perSecond: Int) -> RateLimiter {
        RateLimiter(perSecond: perSecond, burst: 2 * perSecond, clock: ContinuousClock())
    }
}
