import Foundation
import Logging
import ReloadGateCore
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
    private let registryCache: RegistryCache
    private let now: @Sendable () -> Date
    private let logger: Logger

    init(
        store: any GatewayStore,
        engine: SchedulerEngine,
        registryCache: RegistryCache,
        now: @escaping @Sendable () -> Date,
        logger: Logger
    ) {
        self.store = store
        self.engine = engine
        self.registryCache = registryCache
        self.now = now
        self.logger = logger
    }

    /// Writes `write` with the next batch and returns what it wrote, once it is applied everywhere.
    func write(_ write: RegistryWrite) async throws -> RegistryWritten {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(write) { continuation.resume(with: $0) }
        }
    }

    /// Hands `write` over from any thread (an event loop) without waiting: `reply` is called once it is
    /// applied everywhere, or refused.
    func enqueue(_ write: RegistryWrite, reply: @escaping @Sendable (Result<RegistryWritten, any Error>) -> Void) {
        switch queue.append(Entry(write: write, reply: reply)) {
        case nil: break
        case .full: reply(.failure(SchedulerOverloaded()))
        case .closed: reply(.failure(SchedulerUnavailable()))
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
            // An engine that takes no change (stopping, or degraded until it reloads its state) would refuse
            // the batch after its commit: it is refused before, with nothing written.
            do {
                try await engine.checkAccepting()
            } catch {
                for entry in entries { entry.reply(.failure(error)) }
                continue
            }
            let results: [Result<RegistryWritten, RegistryError>]
            do {
                results = try await store.writeRegistry(entries.map(\.write), now: now())
            } catch {
                logger.error("cannot write registry changes", metadata: ["count": "\(entries.count)", "error": "\(error)"])
                for entry in entries { entry.reply(.failure(error)) }
                if let error = error as? StoreError, error.isStoreAway {
                    // The store cannot write now (a lock held past the deadline, a full disk): the engine
                    // says so on `/ready` and rebuilds once it can. What queued meanwhile would wait one
                    // more deadline each batch for the same answer: it is refused with this one.
                    await engine.storeFailed(error)
                    for entry in queue.takeAll() { entry.reply(.failure(error)) }
                }
                continue
            }
            var written: [(RegistryWrite, RegistryWritten)] = []
            for (entry, result) in zip(entries, results) {
                if case .success(let value) = result { written.append((entry.write, value)) }
            }
            // (On a shared store, the other gateways were told the registrations' tokens by the
            // transaction's commit: ``RegistryWrite/announced(_:)``.)
            var changedTokens: [String] = []
            for (write, value) in written {
                switch value {
                case .device: break
                case .adopted(let device): if !device.instanceAdded { continue }
                case .timeline: continue
                }
                changedTokens += write.tokens.map(\.hex)
            }
            if !changedTokens.isEmpty { registryCache.forget(tokens: changedTokens) }
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
                    switch (result, failure) {
                    case (.failure(let error), _): entry.reply(.failure(error))
                    case (.success(let value), nil): entry.reply(.success(value))
                    // An adoption's push is refused with the engine's error: the push was not decided.
                    case (.success(.adopted), let failure?): entry.reply(.failure(failure))
                    // The change is committed, the scheduler has not taken it: not "nothing was accepted".
                    case (.success, let failure?): entry.reply(.failure(RegistryNotApplied(cause: failure)))
                    }
                }
            }
        }
    }
}

/// A registry change the store committed that the scheduler did not take (the engine became degraded or
/// began stopping after the batch's check, a shared store's read back failed, or the commit after it
/// failed): answered `503 registry-not-applied`. The same request sent again writes the same rows and is
/// taken once the engine accepts; a degraded engine's reload, or the inbox notice on a shared store, also
/// brings the scheduler in line.
struct RegistryNotApplied: Error, CustomStringConvertible {
    var cause: any Error

    var description: String { "the change is stored, but the scheduler has not taken it (\(cause))" }
}
