import Foundation
import Logging
import ReloadGateStore

/// The registry's group commit: device registrations and timelines gathered while the previous batch
/// committed are written in one transaction (one sync), then applied to the caches and the scheduler in
/// their order, and each caller is answered once everything its write changed is committed.
///
/// An app with millions of installs re-registers after every release: one transaction per registration
/// was the limit (about 1,500 a second on this machine, docs/benchmarks-history.md). A write refused for what it
/// asks (a ``RegistryError``: an unknown device or widget) is refused alone; a transaction that fails
/// refuses its whole batch, and nothing of it is written.
final class RegistryLog: Sendable {
    private struct Entry: Sendable {
        var write: RegistryWrite
        var reply: @Sendable (Result<RegistryWritten, any Error>) -> Void
    }

    private let queue = GroupCommitQueue<Entry>(limit: 50_000)
    private let store: any GatewayStore
    private let engine: SchedulerEngine
    private let pushDevices: PushDeviceCache
    /// Tells other gateways of a shared store that devices changed.
    private let publishDevices: @Sendable () async -> Void
    private let now: @Sendable () -> Date
    private let logger: Logger

    init(
        store: any GatewayStore,
        engine: SchedulerEngine,
        pushDevices: PushDeviceCache,
        publishDevices: @escaping @Sendable () async -> Void,
        now: @escaping @Sendable () -> Date,
        logger: Logger
    ) {
        self.store = store
        self.engine = engine
        self.pushDevices = pushDevices
        self.publishDevices = publishDevices
        self.now = now
        self.logger = logger
    }

    /// Writes `write` with the next batch and returns what it wrote, once it is applied everywhere.
    func write(_ write: RegistryWrite) async throws -> RegistryWritten {
        try await withCheckedThrowingContinuation { continuation in
            let refusal = queue.append(Entry(write: write) { continuation.resume(with: $0) })
            switch refusal {
            case nil: break
            case .full: continuation.resume(throwing: SchedulerOverloaded())
            case .closed: continuation.resume(throwing: SchedulerUnavailable())
            }
        }
    }

    /// Writes batches until ``finish()``, then what is left.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await _ in queue.signals { await flush(group: &group) }
            await flush(group: &group)
        }
    }

    /// No more writes: `run` writes the rest and returns.
    func finish() {
        queue.close()
    }

    /// One batch: written, applied to the caches and the scheduler (in order), answered after the
    /// scheduler's commit (awaited in a child task, so that the next batch is written meanwhile).
    private func flush(group: inout DiscardingTaskGroup) async {
        while true {
            let entries = queue.takeAll()
            guard !entries.isEmpty else { return }
            let results: [Result<RegistryWritten, RegistryError>]
            do {
                results = try await store.writeRegistry(entries.map(\.write), now: now())
            } catch {
                logger.error("cannot write registry changes", metadata: ["count": "\(entries.count)", "error": "\(error)"])
                for entry in entries { entry.reply(.failure(error)) }
                continue
            }
            var written: [(RegistryWrite, RegistryWritten)] = []
            for (entry, result) in zip(entries, results) {
                if case .success(let value) = result { written.append((entry.write, value)) }
            }
            if written.contains(where: { if case .device = $0.1 { true } else { false } }) {
                pushDevices.invalidate()
                await publishDevices()
            }
            // The scheduler takes the batch now, in order; its commit is awaited beside the next batch.
            var failure: (any Error)?
            var needsCommit = false
            do {
                needsCommit = try await engine.applyWithoutWaiting(written)
            } catch {
                failure = error
            }
            let engine = engine
            group.addTask { [failure] in
                var failure = failure
                if failure == nil, needsCommit {
                    do {
                        try await engine.waitForCommit()
                    } catch {
                        failure = error
                    }
                }
                for (entry, result) in zip(entries, results) {
                    switch result {
                    case .failure(let error): entry.reply(.failure(error))
                    case .success(let value): entry.reply(failure.map { .failure($0) } ?? .success(value))
                    }
                }
            }
        }
    }
}
