import Foundation
import GRDB
import GRDBSQLite
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

struct SQLiteStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func openingCreatesAWALDatabaseWithEveryMigrationInAPrivateDirectory() throws {
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }

        #expect(FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite")))
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path("data"))[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o700)
        let journalMode = try store.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journalMode == "wal")
        #expect(try store.appliedMigrations() == [
            "v1-store-info", "v2-apps", "v3-registry", "v4-ledger", "v5-request-counts", "v6-widget-parameters",
            "v7-provider-keys", "v8-delivery-answers", "v9-request-apns-id", "v10-apns-id-by-block", "v11-pending-lists",
            "v12-request-first-decision", "v13-app-team", "v14-times-in-milliseconds", "v15-decision-runs", "v16-push-types",
            "v17-idempotency-expiry", "v18-request-answers", "v19-ledger-retention", "v20-decisions-in-runs-only", "v21-activity-state", "v22-registration-key", "v23-delivery-in-flight",
            "v24-device-by-token",
        ])
        #expect(try store.info() == StoreInfo(environment: .sandbox, createdAt: now))
    }

    @Test func theWriterSyncsEveryCommit() async throws {
        // GRDB's pool sets `synchronous = NORMAL` on its writer when it turns WAL mode on, after the
        // connection's own setup: commits would then reach the disk only at checkpoints. Read on the writer
        // (a reader's setting says nothing of the commits), of a new file and of one opened again.
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        for _ in 1...2 {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
            defer { try? store.close() }
            let level = try await store.writer.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
            #expect(level == 2, "FULL: the WAL synced at every commit")
        }
    }

    @Test func sqliteKeepsNoMemoryStatistics() throws {
        // Turned off when the process was loaded (CReloadGateSQLite): with the statistics on, SQLite counts
        // what an open store allocated; off, its count stays 0.
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        _ = try store.info()
        #expect(SQLiteStore.keepsNoMemoryStatistics)
        #expect(sqlite3_memory_used() == 0)
    }

    @Test func aStatementJournalUnder128KiBStaysInMemoryAndStillUndoesItsStatement() throws {
        // A multi-row statement inside a transaction first copies every page it changes that existed
        // before it into its statement journal, to undo the statement alone if a row fails. SQLite writes
        // the journal to a temporary file past 64 KiB by default; the store keeps it in memory up to
        // 128 KiB (CReloadGateSQLite, decision 0105), since the group commit's 32-row statements journal up
        // to about 120 KB each. This statement journals about 20 pages (82 KB) and fails at its last row.
        #expect(SQLiteStore.keepsStatementJournalsInMemory)
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        try Self.fillScratch(rows: 80, in: store)
        let (written, unchanged, failed) = try store.writer.write { db in
            // What this thread wrote through system calls (`wchar`), around the statement alone: a WAL
            // write waits for the commit, so only a journal file would be written meanwhile.
            let before = try Self.bytesWrittenByThisThread()
            let failed = try Self.rewriteScratch(rows: 80, failingAtTheLast: true, in: db)
            let written = try Self.bytesWrittenByThisThread() - before
            return (written, try Self.unchangedScratchRows(in: db), failed)
        }
        #expect(failed)
        #expect(unchanged == 80)
        #expect(written < 4096, "the statement journal went to a file: \(written) bytes written")
    }

    @Test func aStatementJournalPastItsThresholdGoesToAFileAndTheStatementStillCommitsOrUndoes() throws {
        // About 500 pages (2 MB) journaled in one statement: past the threshold, SQLite copies the journal
        // to a file and goes on there. A threshold of 256 KiB or more makes that copy fail as a full disk
        // (`SQLITE_FULL`, decision 0105): this statement would fail, and a registration batch with it.
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let rows = 2_000
        try Self.fillScratch(rows: rows, in: store)
        let (failed, unchanged) = try store.writer.write { db in
            let failed = try Self.rewriteScratch(rows: rows, failingAtTheLast: true, in: db)
            return (failed, try Self.unchangedScratchRows(in: db))
        }
        #expect(failed)
        #expect(unchanged == rows)
        let (failedAgain, unchangedAfter) = try store.writer.write { db in
            let failed = try Self.rewriteScratch(rows: rows, failingAtTheLast: false, in: db)
            return (failed, try Self.unchangedScratchRows(in: db))
        }
        #expect(!failedAgain)
        #expect(unchangedAfter == 0)
    }

    @Test func aTransactionThatKeepsItsStatementJournalsInMemoryWritesNoneOfThemPastTheThreshold() throws {
        // About 150 pages (600 KB) journaled in one statement, past SQLite's 128 KiB, and fewer than the
        // writer's page cache holds (so that nothing reaches the WAL before the commit): in a transaction
        // that keeps its statement journals in memory (a large group commit's, decision 0106) the thread
        // writes nothing meanwhile, the statement still undoes itself alone when its last row fails, and
        // the connection's temporary storage is files again afterwards, whether the transaction committed
        // or threw.
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let rows = 600
        try Self.fillScratch(rows: rows, in: store)
        let (written, unchanged, failed, during) = try store.writer.writeWithoutTransaction { db in
            var outcome = (written: 0, unchanged: 0, failed: false, during: 0)
            try db.inTransactionKeepingStatementJournalsInMemory {
                let before = try Self.bytesWrittenByThisThread()
                outcome.failed = try Self.rewriteScratch(rows: rows, failingAtTheLast: true, in: db)
                outcome.written = try Self.bytesWrittenByThisThread() - before
                outcome.unchanged = try Self.unchangedScratchRows(in: db)
                outcome.during = try Self.temporaryStorage(db)
                return .commit
            }
            return outcome
        }
        #expect(failed)
        #expect(unchanged == rows)
        #expect(written < 4096, "the statement journal went to a file: \(written) bytes written")
        #expect(during == 2)
        #expect(try store.writer.writeWithoutTransaction { db in try Self.temporaryStorage(db) } == 0)

        struct Thrown: Error {}
        #expect(throws: Thrown.self) {
            try store.writer.writeWithoutTransaction { db in
                try db.inTransactionKeepingStatementJournalsInMemory {
                    _ = try Self.rewriteScratch(rows: rows, failingAtTheLast: false, in: db)
                    throw Thrown()
                }
            }
        }
        let (afterThrow, inTransaction, unchangedAfterThrow) = try store.writer.writeWithoutTransaction { db in
            (try Self.temporaryStorage(db), db.isInsideTransaction, try Self.unchangedScratchRows(in: db))
        }
        #expect(afterThrow == 0 && !inTransaction && unchangedAfterThrow == rows)

        // Without it, the same statement writes its journal to a file: the test can tell the two apart.
        let withoutIt = try store.writer.write { db in
            let before = try Self.bytesWrittenByThisThread()
            _ = try Self.rewriteScratch(rows: rows, failingAtTheLast: true, in: db)
            return try Self.bytesWrittenByThisThread() - before
        }
        #expect(withoutIt > 100_000, "\(withoutIt) bytes written")
    }

    /// The connection's `temp_store` (0: the default, files; 2: memory).
    private static func temporaryStorage(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "PRAGMA temp_store") ?? -1
    }

    /// A table of `rows` rows of 1,000 zero bytes (four to a page), committed.
    private static func fillScratch(rows: Int, in store: SQLiteStore) throws {
        try store.writer.write { db in
            try db.execute(sql: "CREATE TABLE scratch (id INTEGER PRIMARY KEY, value BLOB NOT NULL)")
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
                INSERT INTO scratch (id, value) SELECT i, zeroblob(1000) FROM n
                """)
        }
    }

    /// Every row given new random bytes by one upsert, as the group commit writes (its last row `NULL`,
    /// refused by `NOT NULL`, when `failingAtTheLast`). Whether the statement failed.
    private static func rewriteScratch(rows: Int, failingAtTheLast: Bool, in db: Database) throws -> Bool {
        do {
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
                INSERT INTO scratch (id, value)
                SELECT i, CASE WHEN i = \(rows) AND \(failingAtTheLast) THEN NULL ELSE randomblob(1000) END
                FROM n WHERE true ON CONFLICT (id) DO UPDATE SET value = excluded.value
                """)
            return false
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            return true
        }
    }

    private static func unchangedScratchRows(in db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM scratch WHERE value = zeroblob(1000)") ?? -1
    }

    /// Bytes the calling thread has written through system calls (`wchar` of /proc/thread-self/io).
    static func bytesWrittenByThisThread() throws -> Int {
        let text = try String(contentsOfFile: "/proc/thread-self/io", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("wchar:") })
        return try #require(Int(line.dropFirst("wchar:".count).trimmingCharacters(in: .whitespaces)))
    }

    @Test func reopeningKeepsWhatWasRecorded() throws {
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        try SQLiteStore(directory: directory.path("data"), environment: .production, now: now).close()
        let reopened = try SQLiteStore(directory: directory.path("data"), environment: .production, now: now.addingTimeInterval(3600))
        defer { try? reopened.close() }
        #expect(try reopened.info() == StoreInfo(environment: .production, createdAt: now))
    }

    @Test func aStoreOfTheOtherEnvironmentIsRefused() throws {
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now).close()
        let path = directory.url.appendingPathComponent("data/reloadgate.sqlite").standardizedFileURL.path
        #expect(throws: StoreError.environmentMismatch(path: path, stored: .sandbox, configured: .production)) {
            try SQLiteStore(directory: directory.path("data"), environment: .production, now: now)
        }
    }

    @Test func anUnusableDirectoryIsAClearError() throws {
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        try "not a directory".write(toFile: directory.path("file"), atomically: true, encoding: .utf8)
        do {
            _ = try SQLiteStore(directory: directory.path("file"), environment: .sandbox, now: now)
            Issue.record("opening a store inside a file succeeded")
        } catch {
            #expect(error.code == "store.cannot-open")
            #expect(error.description.contains("file/reloadgate.sqlite"))
        }
    }

    @Test func closingCheckpointsAndRemovesTheWAL() throws {
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        #expect(FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite-wal")))
        try store.close()
        #expect(!FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite-wal")))
    }

    @Test func closingAfterReadsRemovesTheWAL() async throws {
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        _ = try await store.registeredInstances()
        _ = try await store.instanceSnapshots()
        _ = try await store.lastRequestID()
        _ = try await store.deliveries(in: [.pending, .sending])
        try store.close()
        #expect(!FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite-wal")))
    }
}

/// Migration `v14-times-in-milliseconds`: the registry's, apps' and keys' REAL seconds become INTEGER
/// milliseconds, the ledger's unit, by Timestamp's rule (floored; binary fractions do not lose a
/// millisecond).
struct TimesInMillisecondsMigrationTests {
    @Test func realSecondsBecomeIntegerMillisecondsAndKeepTheirMeaning() async throws {
        let directory = try TemporaryDirectory("v14")
        defer { directory.remove() }
        try StoreFixture.writeOlderStore(in: directory, upTo: "v13-app-team", sql: """
            UPDATE app SET createdAt = 1789999999.5;
            INSERT INTO store_info (key, value) VALUES ('environment', 'sandbox'), ('createdAt', '1789999990.25');
            INSERT INTO device (id, appId, token, active, registeredAt, unregisteredAt)
                VALUES (1, 1, '\(String(repeating: "ab", count: 32))', 1, 1790000000.123, NULL),
                       (2, 1, '\(String(repeating: "cd", count: 32))', 0, 1790000000.0, 1790000100.5);
            INSERT INTO widget (id, deviceId, widgetID, kind, family, configuration, pushEnabled)
                VALUES (1, 1, 'w1', 'scores', 'systemSmall', '{}', 1);
            INSERT INTO timeline (widgetId, entries, policy, plannedReload, reportedAt)
                VALUES (1, '[]', '"never"', NULL, 1790000001.25);
            INSERT INTO provider_key (keyId, teamId, publicKey, topics, environments, createdAt)
                VALUES ('KEY1', 'TEAM1', 'pem', '', 'both', 1790000002.999);
            """)
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        #expect(try store.appliedMigrations().contains("v14-times-in-milliseconds"))
        let types = try await store.writer.read { db in
            try String.fetchAll(db, sql: """
                SELECT typeof(registeredAt) FROM device UNION ALL SELECT typeof(createdAt) FROM app
                UNION ALL SELECT typeof(reportedAt) FROM timeline UNION ALL SELECT typeof(createdAt) FROM provider_key
                """)
        }
        #expect(Set(types) == ["integer"])
        let stored = try await store.writer.read { db in
            try Int64.fetchAll(db, sql: "SELECT registeredAt FROM device UNION ALL SELECT unregisteredAt FROM device WHERE id = 2")
        }
        #expect(stored.sorted() == [1_790_000_000_000, 1_790_000_000_123, 1_790_000_100_500])
        #expect(try await store.providerKeys().first?.createdAt == Date(timeIntervalSince1970: 1_790_000_002.999))
        #expect(try store.info().createdAt == Date(timeIntervalSince1970: 1_789_999_990.25))
        #expect(try await store.app(bundle: try BundleID("com.example.scores"))?.createdAt == Date(timeIntervalSince1970: 1_789_999_999.5))
        let devices = try await store.devices(bundle: nil, token: nil, limit: 10).sorted { $0.token < $1.token }
        #expect(devices.map(\.registeredAt) == [Date(timeIntervalSince1970: 1_790_000_000.123), Date(timeIntervalSince1970: 1_790_000_000)])
        #expect(devices[1].unregisteredAt == Date(timeIntervalSince1970: 1_790_000_100.5))
        // Apple's 410 is compared with the registration in the same unit: before it, nothing changes.
        #expect(try await store.markDeviceInvalid(device: 1, since: Date(timeIntervalSince1970: 1_790_000_000.122)) == nil)
        #expect(try await store.markDeviceInvalid(device: 1, since: Date(timeIntervalSince1970: 1_790_000_000.124)) == String(repeating: "ab", count: 32))
    }
}
