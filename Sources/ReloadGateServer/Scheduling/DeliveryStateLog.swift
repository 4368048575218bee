import Logging
import ReloadGateStore
import Synchronization

/// The delivery worker's bookkeeping (pending -> sending -> sent | failed), written in batches: one
/// transaction for all the state changes gathered while the previous one committed, instead of two
/// fsyncs per delivery. Sending does not wait for its `sending` mark: a delivery still `pending` after a
/// crash is sent again just like a `sending` one (at least once), so only the order of the marks matters,
/// and a batch keeps it.
final class DeliveryStateLog: Sendable {
    typealias Change = (apnsID: String, state: RecordedDelivery.State, error: String?)

    private let store: SQLiteStore
    private let logger: Logger
    private let queue = Mutex<[Change]>([])
    private let signal: AsyncStream<Void>.Continuation
    private let signals: AsyncStream<Void>

    init(store: SQLiteStore, logger: Logger) {
        self.store = store
        self.logger = logger
        (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues a change; it is written with the next batch.
    func record(_ apnsID: String, _ state: RecordedDelivery.State, error: String?) {
        queue.withLock { $0.append((apnsID, state, error)) }
        signal.yield()
    }

    /// Writes batches until ``finish()``, then what is left.
    func run() async {
        for await _ in signals { await flush() }
        await flush()
    }

    /// No more changes will come: `run` writes the rest and returns.
    func finish() {
        signal.finish()
    }

    private func flush() async {
        while true {
            let changes = queue.withLock { queue -> [Change] in
                defer { queue.removeAll(keepingCapacity: true) }
                return queue
            }
            guard !changes.isEmpty else { return }
            do {
                try await store.setDeliveryStates(changes)
            } catch {
                // The deliveries keep their earlier state and are sent again on start (at least once).
                logger.error("cannot record deliveries' states", metadata: ["count": "\(changes.count)", "error": "\(error)"])
            }
        }
    }
}
