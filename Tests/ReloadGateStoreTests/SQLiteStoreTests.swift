import Foundation
import GRDB
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
            "v12-request-first-decision", "v13-app-team",
        ])
        #expect(try store.info() == StoreInfo(environment: .sandbox, createdAt: now))
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

    @Test func closingAfterReadsRemovesTheWAL() throws {
        let directory = try TemporaryDirectory("store")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        _ = try store.registeredInstances()
        _ = try store.instanceSnapshots()
        _ = try store.lastRequestID()
        _ = try store.deliveries(in: [.pending, .sending])
        try store.close()
        #expect(!FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite-wal")))
    }
}
