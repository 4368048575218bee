import Synchronization

/// The delivery worker's slots (`upstream.maxConcurrentRequests`): a delivery holds one from before its
/// first attempt until it ends. Taken in order of asking, given back from any task (a group's task gives
/// back the slots of the deliveries its first attempts ended; each retry gives back its own).
final class DeliverySlots: Sendable {
    private let state: Mutex<(free: Int, waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)])>
    private let capacity: Int

    init(_ capacity: Int) {
        self.capacity = max(1, capacity)
        state = Mutex((self.capacity, []))
    }

    /// Waits until `count` slots are free (and every earlier caller has had its own), then takes them.
    func acquire(_ count: Int) async {
        let count = min(count, capacity)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.waiters.isEmpty, state.free >= count {
                    state.free -= count
                    return true
                }
                state.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Gives back `count` slots and lets the waiters whose turn it is go.
    func release(_ count: Int) {
        guard count > 0 else { return }
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.free += count
            var ready: [CheckedContinuation<Void, Never>] = []
            while let first = state.waiters.first, state.free >= first.count {
                state.free -= first.count
                state.waiters.removeFirst()
                ready.append(first.continuation)
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }
}
