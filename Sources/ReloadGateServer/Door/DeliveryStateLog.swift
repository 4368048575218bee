import Foundation
import Logging
import ReloadGateStore
import Synchronization

/// The delivery worker's bookkeeping (pending -> sending -> sent | failed), written in batches: one
/// transaction for all the state changes gathered while the previous one committed, instead of an fsync
/// per change.
///
/// A delivery is sent only once its `sending` mark is committed (``recordDurably(_:)``): after a crash,
/// `sending` then means "may have reached Apple" (sent again and counted as an unknown outcome) and
/// `pending` means "certainly not sent by the last run". The other marks do not wait.
final class DeliveryStateLog: Sendable {
    private typealias Waiter = CheckedContinuation<Void, any Error>

    private let store: any GatewayStore
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let queue = Mutex<(changes: [DeliveryStateChange], waiters: [Waiter], finished: Bool)>(([], [], false))
    private let signal: AsyncStream<Void>.Continuation
    private let signals: AsyncStream<Void>

    init(store: any GatewayStore, now: @escaping @Sendable () -> Date, logger: Logger) {
        self.store = store
        self.now = now
        self.logger = logger
        (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues a change; it is written with the next batch.
    func record(_ change: DeliveryStateChange) {
        queue.withLock { $0.changes.append(change) }
        signal.yield()
    }

    /// Queues a change and returns once the batch holding it is committed; throws when it could not be
    /// written (or the log has finished).
    func recordDurably(_ change: DeliveryStateChange) async throws {
        try await recordDurably(CollectionOfOne(change))
    }

    /// Queues changes and returns once the batch holding them is committed.
    func recordDurably(_ changes: some Collection<DeliveryStateChange> & Sendable) async throws {
        try await withCheckedThrowingContinuation { (waiter: Waiter) in
            let accepted = queue.withLock { queue -> Bool in
                guard !queue.finished else { return false }
                queue.changes.append(contentsOf: changes)
                queue.waiters.append(waiter)
                return true
            }
            if accepted {
                signal.yield()
            } else {
                waiter.resume(throwing: CancellationError())
            }
        }
    }

    /// Writes batches until ``finish()``, then what is left.
    func run() async {
        for await _ in signals { await flush() }
        await flush()
    }

    /// No more changes will come: `run` writes the rest and returns.
    func finish() {
        queue.withLock { $0.finished = true }
        signal.finish()
    }

    private func flush() async {
        while true {
            let (changes, waiters) = queue.withLock { queue -> ([DeliveryStateChange], [Waiter]) in
                defer {
                    queue.changes.removeAll(keepingCapacity: true)
                    queue.waiters.removeAll(keepingCapacity: true)
                }
                return (queue.changes, queue.waiters)
            }
            guard !changes.isEmpty else { return }
            do {
                try await store.setDeliveryStates(changes, at: now())
                for waiter in waiters { waiter.resume() }
            } catch {
                // The deliveries keep their earlier state and are sent again on start (at least once);
                // the ones waiting for their `sending` mark are not sent now.
                logger.error("cannot record deliveries' states", metadata: ["count": "\(changes.count)", "error": "\(error)"])
                for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }
}
