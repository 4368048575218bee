import Foundation
import GRDB
import GRDBSQLite
import ReloadGateCore
import Synchronization

extension SQLiteStore {
    /// Above this many WAL pages (64 MiB) the writer checkpoints after its commit, as SQLite does by
    /// default at 1,000; below it, ``checkpointWAL()`` keeps the database file up to date.
    static let writerCheckpointPages = 16_384

    /// Copies the committed pages of the WAL into the database file (a passive checkpoint) from a
    /// connection of its own, so that group commits do not wait for it.
    ///
    /// With SQLite's default the writer checkpoints every 1,000 pages inside the commit that crosses the
    /// mark: under a steady load of pushes that is a 5-9 ms stall of every push in flight about twenty
    /// times a second (docs/DECISIONS.md, "WAL checkpoints off the commit path"). The server calls this
    /// periodically (``StoreService``); the writer still checkpoints past ``writerCheckpointPages``, which
    /// bounds the WAL when this falls behind. Safe beside the writer and readers: a passive checkpoint
    /// waits for no one.
    /// - Returns: the WAL's frames and how many of them are in the database file now.
    /// - Parameter truncating: also truncate the WAL file to nothing once it is all copied (after a full
    ///   disk: the file keeps its size, and so the disk's space, until then).
    ///   - waiting: how long a truncating checkpoint waits for another writer (`nil`: 10 s).
    @discardableResult
    public func checkpointWAL(truncating: Bool = false, waiting: Duration? = nil) throws -> (walFrames: Int, checkpointed: Int) {
        try checkpointer.withLock { connection in
            let queue: DatabaseQueue
            switch connection {
            case .open(let open):
                queue = open
            case .notOpened:
                var configuration = Configuration()
                configuration.label = "reloadgate-checkpoint"
                configuration.busyMode = .timeout(Self.checkpointWait.seconds)
                queue = try DatabaseQueue(path: path, configuration: configuration)
                connection = .open(queue)
            case .closed:
                // Not opened again: a checkpoint that a stopping gateway's periodic task asks for late
                // would leave a connection (and a WAL file) open beside the closed store.
                throw StoreError.unavailable(reason: "the store is closed")
            }
            let result = try queue.writeWithoutTransaction { db in
                guard let waiting else { return try db.checkpoint(truncating ? .truncate : .passive) }
                return try db.waitingForLocks(waiting, thenBack: Self.checkpointWait) {
                    try db.checkpoint(truncating ? .truncate : .passive)
                }
            }
            return (result.walFrameCount, result.checkpointedFrameCount)
        }
    }

    /// How long the checkpoint connection waits for another writer by default.
    static let checkpointWait: Duration = .seconds(10)
}

/// ``SQLiteStore/checkpointer``: the checkpoint connection, opened on the first checkpoint, never again
/// once the store is closed.
enum CheckpointConnection {
    case notOpened
    case open(DatabaseQueue)
    case closed
}

extension SQLiteStore {
    /// `error` as the gateway answers it when it says the disk cannot take the write now (full, failing,
    /// or the file locked by another writer past the deadline): ``StoreError/unavailable(reason:)``, a
    /// `503`; `nil` for any other error.
    static func unavailable(_ error: any Error) -> StoreError? {
        guard let error = error as? DatabaseError else { return nil }
        switch error.resultCode {
        case .SQLITE_FULL: return .unavailable(reason: "the disk is full (\(error.message ?? "SQLITE_FULL"))")
        case .SQLITE_IOERR: return .unavailable(reason: "the disk failed a write (\(error.message ?? "SQLITE_IOERR"))")
        case .SQLITE_BUSY, .SQLITE_LOCKED: return .unavailable(reason: "the database file is locked (\(error.message ?? "SQLITE_BUSY"))")
        default: return nil
        }
    }

    /// Runs a write, answering what ``unavailable(_:)`` recognises as ``StoreError/unavailable(reason:)``.
    func writeOrUnavailable<T>(_ write: () async throws -> T) async throws -> T {
        do {
            return try await write()
        } catch {
            throw Self.unavailable(error) ?? error
        }
    }

    /// The same for a write on the caller's thread.
    static func orUnavailable<T>(_ write: () throws -> T) throws -> T {
        do {
            return try write()
        } catch {
            throw unavailable(error) ?? error
        }
    }

    /// Gives the WAL's space back to the disk (a checkpoint that truncates it: after a full disk the
    /// WAL would otherwise keep the space freed since), then writes and syncs 256 KiB in `store_info`,
    /// more than a group commit of a few requests takes: a tiny write can fit into the WAL's pages that a
    /// failed commit left free while the next commit still fails. The value is shortened again at once.
    public func commitProbe(within timeout: Duration) async -> String? {
        // The checkpoint and the probe wait for another writer's lock `timeout` at most, not the store's
        // deadline (nor the checkpoint's 10 s): a degraded engine probes once a second, and its commit loop
        // (with the requests it refuses meanwhile) waits for the probe. The checkpoint runs on the store's
        // write queue, not the caller's thread (SQLiteStore+OffThread.swift).
        _ = try? await offThread { try self.checkpointWAL(truncating: true, waiting: timeout) }
        let deadline = self.deadline
        do {
            for statement in [
                "INSERT OR REPLACE INTO store_info (key, value) VALUES ('probe', printf('%.*c', 262144, 'x'))",
                "UPDATE store_info SET value = '\(Date().storedMilliseconds)' WHERE key = 'probe'",
            ] {
                try await writer.writeWithoutTransaction { db in
                    try db.waitingForLocks(timeout, thenBack: deadline) {
                        try db.inTransaction(.immediate) {
                            try db.execute(sql: statement)
                            return .commit
                        }
                    }
                }
            }
            return nil
        } catch {
            return Self.unavailable(error)?.description ?? "\(error)"
        }
    }
}
