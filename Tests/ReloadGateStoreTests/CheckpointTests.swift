import Foundation
import GRDB
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// WAL checkpoints happen off the commit path: the writer checkpoints only past a large WAL, and
/// `checkpointWAL()` copies the WAL into the database file from a connection of its own.
struct CheckpointTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    /// Whether the database file itself (not its WAL) holds `text`.
    func databaseFileHolds(_ text: String, in directory: TemporaryDirectory) throws -> Bool {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: directory.path("data/reloadgate.sqlite")))
        return bytes.range(of: Data(text.utf8)) != nil
    }

    @Test func commitsStayInTheWALUntilACheckpointCopiesThem() async throws {
        let directory = try TemporaryDirectory("checkpoint")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        #expect(try await store.writer.write { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") } == SQLiteStore.writerCheckpointPages)
        _ = try await store.createApp(bundle: try BundleID("com.example.walonly"), now: now)
        #expect(try !databaseFileHolds("com.example.walonly", in: directory))

        let result = try store.checkpointWAL()
        #expect(result.walFrames > 0)
        #expect(result.checkpointed == result.walFrames)
        #expect(try databaseFileHolds("com.example.walonly", in: directory))

        // Closing still leaves one file and no WAL, with the checkpoint connection open before.
        try store.close()
        #expect(!FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite-wal")))
        let reopened = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? reopened.close() }
        #expect(try await reopened.app(bundle: try BundleID("com.example.walonly")) != nil)
    }
}

/// A closed store refuses what is asked of it afterwards, with an error and without touching SQLite's
/// connection: the gateway's work that a deadline abandoned (a degraded engine's probe, a pruning step, the
/// periodic checkpoint) can reach the store after its shutdown closed it. SQLite's busy-timeout and
/// checkpoint calls dereference a closed (NULL) connection, so such a call would stop the whole process
/// (signal 11 in `sqlite3_busy_handler`).
struct ClosedSQLiteStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func workReachingAClosedStoreIsRefusedNotACrash() async throws {
        let directory = try TemporaryDirectory("closed-store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        _ = try store.checkpointWAL()
        try store.close()

        // The probe answers what is stuck instead of nil.
        let probe = await store.commitProbe(within: .milliseconds(100))
        #expect(probe?.contains("closed") == true, "\(String(describing: probe))")
        await #expect(throws: (any Error).self) {
            _ = try await store.pruneLedger(LedgerPruneStep(receivedBefore: Timestamp(seconds: 1_790_000_000), now: Timestamp(seconds: 1_790_000_000), limit: 10))
        }
        #expect(throws: (any Error).self) { _ = try store.checkpointWAL() }
        // The checkpoint did not open a connection of its own again: no WAL file beside the closed store.
        #expect(!FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite-wal")))
        // Closing twice is harmless.
        try store.close()
    }
}
