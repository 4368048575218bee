import Foundation
import Logging
import ReloadGateStore

/// The delivery worker's bookkeeping (pending -> sending -> sent | failed), written in batches: one
/// transaction for all the state changes gathered while the previous one committed, instead of an fsync
/// per change.
///
/// A delivery is sent only once its `sending` mark is committed (``recordDurably(_:)``): after a crash,
/// `sending` then means "may have reached Apple" (sent again and counted as an unknown outcome) and
/// `pending` means "certainly not sent by the last run". The other marks do not wait.
final class DeliveryStateLog: Sendable {
    private typealias Waiter = CheckedContinuation<Void, any Error>

    /// Changes, and for durable ones the caller waiting for their commit.
    private struct Entry: Sendable {
        var changes: [DeliveryStateChange]
        var waiter: Waiter?
    }

    private let store: any GatewayStore
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let queue = GroupCommitQueue<Entry>()

    init(store: any GatewayStore, now: @escaping @Sendable () -> Date, logger: Logger) {
        self.store = store
        self.now = now
        self.logger = logger
    }

    /// Queues a change; it is written with the next batch.
    func record(_ change: DeliveryStateChange) {
        _ = queue.append(Entry(changes: [change], waiter: nil))
    }

    /// Queues changes and returns once the batch holding them is committed; throws when they could not be
    /// written (or the log has finished).
    func recordDurably(_ changes: [DeliveryStateChange]) async throws {
        try await withCheckedThrowingContinuation { (waiter: Waiter) in
            if queue.append(Entry(changes: changes, waiter: waiter)) != nil {
                waiter.resume(throwing: CancellationError())
            }
        }
    }

    /// Writes batches until ``finish()``, then what is left.
    func run() async {
        for await _ in queue.signals { await flush() }
        await flush()
    }

    /// No more changes will come: `run` writes the rest and returns.
    func finish() {
        queue.close()
    }

    private func flush() async {
        while true {
            let entries = queue.takeAll()
            guard !entries.isEmpty else { return }
            let changes = entries.flatMap(\.changes)
            let waiters = entries.compactMap(\.waiter)
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
