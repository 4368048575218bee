import Foundation
import GRDB
import NIOPosix
public import ReloadGateCore
import Synchronization

/// The store's reads and writes as the server calls them (through ``GatewayStore`` and ``SchedulingStore``):
/// off the caller's thread.
///
/// A synchronous write waits for SQLite's write lock up to the store's deadline (`store.deadline`, 5 s) when
/// another process holds it (an operator's `sqlite3` shell, a backup, a command of another gateway
/// version), and a read waits for the disk. Called from a task, either would hold one of the Swift
/// concurrency pool's threads, as many as the machine has cores, for that long: two writes waiting for a
/// locked file, or two reads waiting for a slow disk, stop every task of a 2-core gateway, `/health` and the
/// answers of other connections included (docs/DECISIONS.md, "The store's reads and writes wait on threads
/// of its own"). Here each write waits on the store's own queue, and each read that could hold a thread the
/// rest of the gateway needs waits on a thread of the store's own (``ReadPlacement``); the task that asked
/// is suspended meanwhile. The synchronous forms stay for the operator's commands and the tests.
extension SQLiteStore {
    /// Runs `write` (a synchronous write of this store) on the store's write queue; the caller's task is
    /// suspended until it is done.
    func offThread<T: Sendable>(_ write: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            writeQueue.async { continuation.resume(with: Result { try write() }) }
        }
    }

}

/// Where the store's reads wait for the disk (``SQLiteStore/offThreadRead(_:)``): on the asking thread while
/// that cannot stop the gateway, else on threads of the store's own (``ReadPlacement`` decides), as many as
/// GRDB keeps readers, started by the first read that needs them and shut down when the store closes or goes
/// away.
final class ReadThreads: Sendable {
    private enum State {
        case idle
        case running(NIOThreadPool)
        case closed
    }

    private let state = Mutex(State.idle)
    private let placement: Mutex<ReadPlacement>
    private let count: Int

    init(count: Int) {
        self.count = count
        placement = Mutex(ReadPlacement(limit: max(0, ProcessInfo.processInfo.activeProcessorCount - 1)))
    }

    /// Runs `body` on the calling thread, or on one of the threads with the caller's task suspended.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let asked = ContinuousClock.now
        switch placement.withLock({ $0.place(at: asked) }) {
        case .inline(let id):
            return try measured(id, started: asked, body)
        case .threads:
            // Its time is its own, from when it starts on a thread, not its wait for one.
            return try await threads().runIfActive { [self] in try measured(nil, started: .now, body) }
        }
    }

    /// Runs `body` and tells the placement how long it took.
    private func measured<T>(_ id: UInt64?, started: ContinuousClock.Instant, _ body: () throws -> T) rethrows -> T {
        defer { placement.withLock { $0.ended(id, started: started, at: .now) } }
        return try body()
    }

    private func threads() throws -> NIOThreadPool {
        try state.withLock { state -> NIOThreadPool in
            switch state {
            case .running(let pool):
                return pool
            case .idle:
                let pool = NIOThreadPool(numberOfThreads: count)
                pool.start()
                state = .running(pool)
                return pool
            case .closed:
                throw StoreError.unavailable(reason: "the store is closed")
            }
        }
    }

    /// Lets the threads go once the reads running on them end; reads asked afterwards find the store closed.
    func close() {
        let pool = state.withLock { state -> NIOThreadPool? in
            defer { state = .closed }
            if case .running(let pool) = state { return pool }
            return nil
        }
        pool?.shutdownGracefully { _ in }
    }

    deinit {
        close()
    }
}

extension SQLiteStore {
    /// Runs `read` (a synchronous read of this store) where ``ReadPlacement`` says: on the calling thread
    /// while that cannot stop the gateway, else on a thread of the store's own with the caller's task
    /// suspended.
    func offThreadRead<T: Sendable>(_ read: @escaping @Sendable () throws -> T) async throws -> T {
        try await readThreads.run(read)
    }

    public func keptAnswers(requests: [RequestID]) async throws -> [RequestID: IdempotentAnswer] {
        try await offThreadRead { try self.keptAnswers(requests: requests) }
    }

    public func lastExpiry(ofTableKeysPrefixed prefix: String, after now: Timestamp, notAfter limit: Timestamp) async throws
        -> Timestamp?
    {
        try await offThreadRead { try self.lastExpiry(ofTableKeysPrefixed: prefix, after: now, notAfter: limit) }
    }

    public func keptAnswerKeys(unexpiredAt now: Timestamp, window: Int64) async throws -> [KeptAnswerKey] {
        try await offThreadRead { try self.keptAnswerKeys(unexpiredAt: now, window: window) }
    }
}
