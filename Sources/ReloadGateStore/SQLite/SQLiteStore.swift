import CReloadGateSQLite
import Foundation
import GRDB
public import ReloadGateCore
import Synchronization

/// The embedded store: one SQLite file in WAL mode under the data directory, opened with GRDB.
///
/// Opening runs the named migrations of ``SQLiteStore/migrator``, so a data directory written by an older
/// ReloadGate is brought up to date and a new one is created. Several processes may open the same file
/// (the server and operator commands such as `reloadgate apps add`); SQLite's locking and a busy timeout
/// serialise their writes.
public final class SQLiteStore: Sendable {
    /// The file name of the database inside the data directory.
    public static let fileName = "reloadgate.sqlite"

    /// The database file.
    public let path: String
    /// The environment the store was created for.
    public let environment: DeploymentEnvironment
    let writer: DatabasePool
    let sealer: SecretSealer
    /// The connection of ``checkpointWAL()``, opened on its first call; `closed` once the store is.
    let checkpointer = Mutex<CheckpointConnection>(.notOpened)
    /// The instances whose pending-reload rows a commit may have to delete.
    let storedPending = StoredPendingRows()
    /// Where the server's synchronous writes wait for the write lock, instead of a task's thread
    /// (SQLiteStore+OffThread.swift).
    let writeQueue = DispatchQueue(label: "reloadgate.sqlite.writes")
    /// How long a write waits for another writer's lock (`store.deadline`).
    let deadline: Duration
    /// Where the server's reads wait for the disk, instead of a task's thread (SQLiteStore+OffThread.swift):
    /// as many threads as GRDB keeps readers.
    let readThreads = ReadThreads(count: SQLiteStore.readers)
    /// GRDB's readers of the pool (its default).
    static let readers = Configuration().maximumReaderCount
    /// Whether SQLite keeps no memory statistics in this process: turned off when the process is loaded
    /// (CReloadGateSQLite, decision 0089), since they cost a process-wide mutex around every allocation
    /// inside SQLite and nothing reads them.
    static let keepsNoMemoryStatistics = reloadgate_sqlite_memory_statistics_setting() == 0
    /// Whether SQLite keeps a statement journal in memory up to 128 KiB (64 KiB by default), set when the
    /// process was loaded (CReloadGateSQLite, decision 0105): the group commit's multi-row statements journal
    /// the pages they change, up to about 120 KB each, which past SQLite's 64 KiB would go to a temporary
    /// file, two system calls a page.
    static let keepsStatementJournalsInMemory = reloadgate_sqlite_statement_journal_setting() == 0

    /// Opens (creating if needed) `reloadgate.sqlite` in `directory`.
    /// - Parameters:
    ///   - directory: the data directory; created with mode 0700 when missing.
    ///   - environment: the environment of this gateway. A new store records it; an existing store created
    ///     for the other environment is refused, because its device tokens would be wrong for this one.
    ///   - now: the time recorded as the store's creation time.
    /// - Throws: ``StoreError``.
    ///   - deadline: how long a write waits for another writer (an operator command) before it is refused
    ///     as unavailable (`store.deadline`).
    public init(directory: String, environment: DeploymentEnvironment, now: Date, deadline: Duration = .seconds(5)) throws(StoreError) {
        let path = URL(fileURLWithPath: directory, isDirectory: true)
            .appendingPathComponent(Self.fileName).standardizedFileURL.path
        do {
            try FileManager.default.createDirectory(
                atPath: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw .cannotOpen(path: path, reason: "cannot create the data directory: \(error.localizedDescription)")
        }
        var configuration = Configuration()
        configuration.label = "reloadgate"
        // Operator commands write while the server runs: wait for the other writer instead of failing,
        // up to the store's deadline.
        configuration.busyMode = .timeout(deadline.seconds)
        configuration.prepareDatabase { db in
            // A new file gives the pages the ledger's retention frees back to the file system
            // (SQLiteStore+Retention.swift). The mode is chosen before the file's first page is written
            // (WAL mode writes it), on the writer; on an existing file this changes nothing.
            if !db.configuration.readonly { try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL") }
            // The writer copies the WAL into the database file itself only past this many pages; the
            // server does it in the background (checkpointWAL), off the commit path.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.writerCheckpointPages)")
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw .cannotOpen(path: path, reason: String(describing: error))
        }
        do {
            try Self.syncEveryCommit(pool)
            try Self.migrator.migrate(pool)
        } catch {
            try? pool.close()
            throw .cannotOpen(path: path, reason: String(describing: error))
        }
        let sealer: SecretSealer
        do {
            sealer = try SecretSealer(directory: directory)
        } catch {
            try? pool.close()
            throw error
        }
        let stored: DeploymentEnvironment
        let keyFits: Bool
        do {
            (stored, keyFits) = try pool.write { db in
                let stored = try StoreInfo.recordIfNew(environment: environment, createdAt: now, in: db)
                return (stored, try StoreInfo.checkSecretsKey(sealer, in: db))
            }
        } catch {
            try? pool.close()
            throw .cannotOpen(path: path, reason: String(describing: error))
        }
        guard stored == environment else {
            try? pool.close()
            throw .environmentMismatch(path: path, stored: stored, configured: environment)
        }
        guard keyFits else {
            try? pool.close()
            throw .secretsKeyMismatch(directory: URL(fileURLWithPath: directory).standardizedFileURL.path)
        }
        self.path = path
        self.environment = environment
        self.writer = pool
        self.sealer = sealer
        self.deadline = deadline
    }

    /// Makes the pool's writer sync the WAL at every commit (`PRAGMA synchronous = FULL`), and checks that
    /// it does: an answer is sent only after its commit, so every commit must reach the disk.
    ///
    /// GRDB's pool turns WAL mode on for its writer after the connection's own setup
    /// (`Configuration.prepareDatabase`), and sets `synchronous = NORMAL` with it. In WAL mode NORMAL
    /// syncs only at checkpoints: a commit survives the process's crash, not the machine's (a power
    /// failure, a kernel panic, a VM stopped). So the setting is made here, once the pool is open, on the
    /// writer (the only connection that commits; readers and the checkpoint connection do not), and read
    /// back (decision 0118).
    static func syncEveryCommit(_ pool: DatabasePool) throws {
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            let level = try Int.fetchOne(db, sql: "PRAGMA synchronous")
            guard level == fullSynchronous else { throw CommitsNotSynced(level: level) }
        }
    }

    /// `PRAGMA synchronous`'s value for FULL.
    static let fullSynchronous = 2

    /// The writer would not sync every commit: the store is not opened.
    struct CommitsNotSynced: Error, CustomStringConvertible {
        var level: Int?
        var description: String {
            "SQLite's writer reads PRAGMA synchronous = \(level.map(String.init) ?? "nothing") after it was set to FULL (\(SQLiteStore.fullSynchronous)): its commits would not all reach the disk"
        }
    }

    /// The store's metadata.
    public func info() throws -> StoreInfo {
        try writer.read { db in try StoreInfo.read(db) }
    }

    /// Checkpoints the WAL and closes every connection. The store cannot be used afterwards.
    public func close() throws {
        // GRDB closes the writer before the read-only connections, and a read-only connection that
        // closes last cannot checkpoint and remove the WAL; closing the readers first leaves the writer
        // last (GRDB issue 739).
        // The checkpoint connection first, so that the writer closes last and removes the WAL.
        readThreads.close()
        let alreadyClosed = try checkpointer.withLock { connection in
            defer { connection = .closed }
            switch connection {
            case .closed: return true
            case .open(let queue): try queue.close()
            case .notOpened: break
            }
            return false
        }
        // A second close does not touch the writer: SQLite's memory call reads a closed connection.
        guard !alreadyClosed else { return }
        writer.releaseMemory()
        try writer.close()
    }
}
