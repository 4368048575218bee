import Foundation
import GRDB
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// A registry batch on SQLite journals nothing to a file (decision 0110): its inserts take 8 rows a
/// statement, so that each statement's journal of the pages it changes (a new random token's index leaf
/// and its splits, a configuration value's index leaf) stays within what SQLite keeps in memory (decision
/// 0105). Past that, the journal, and every later one of the transaction, goes to a temporary file.
struct RegistryStatementJournalTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func registryBatchesOfNewRandomTokensJournalNothingToAFile() async throws {
        let directory = try TemporaryDirectory("registry-journal")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.journal"), teamID: nil, allowsExemptions: false, now: now).app
        // 8,000 devices first, so that the token index has about 160 leaves and each new random token lands
        // on one of them. Fewer pages than the writer's cache holds change in each batch below, so nothing
        // reaches the WAL before the commit.
        var generator = SplitMix64(seed: 110)
        for _ in 0..<8 {
            let results = try await store.writeRegistry((0..<1_000).map { _ in Self.putDevice(app, &generator) }, now: now)
            #expect(results.allSatisfy { (try? $0.get()) != nil })
        }

        // The bytes the writer's thread has written as each statement starts (SQLite's trace runs on the
        // thread that runs the statement).
        let starts = Mutex<[(sql: String, written: Int)]>([])
        try await store.writer.writeWithoutTransaction { db in
            db.trace(options: .statement) { event in
                guard case .statement(let statement) = event, let written = try? SQLiteStoreTests.bytesWrittenByThisThread() else { return }
                starts.withLock { $0.append((statement.sql, written)) }
            }
        }
        /// Bytes written between the last transaction's `BEGIN` and its `COMMIT`: statement journals (the
        /// pages themselves go to the WAL at the commit).
        func writtenInTheLastTransaction() throws -> Int {
            let statements = starts.withLock { $0 }
            let begin = try #require(statements.lastIndex { $0.sql.hasPrefix("BEGIN") })
            let commit = try #require(statements[begin...].firstIndex { $0.sql.hasPrefix("COMMIT") })
            return statements[commit].written - statements[begin].written
        }

        // Registrations of new tokens, each widget's configuration a value of its own (a leaf of the
        // parameters' index each), and adoptions of new tokens (pushes to devices never registered).
        let registrations = try await store.writeRegistry((0..<500).map { _ in Self.putDevice(app, &generator) }, now: now)
        #expect(registrations.allSatisfy { (try? $0.get()) != nil })
        let inRegistrations = try writtenInTheLastTransaction()
        #expect(inRegistrations < 4_096, "the registrations' statement journals went to a file: \(inRegistrations) bytes written")
        let adoptions = try await store.writeRegistry(
            (0..<500).map { _ in .adoptDevice(app: app, token: Self.randomToken(&generator), pushType: .widgets, pushToStart: false) }, now: now
        )
        #expect(adoptions.allSatisfy { (try? $0.get()) != nil })
        let inAdoptions = try writtenInTheLastTransaction()
        #expect(inAdoptions < 4_096, "the adoptions' statement journals went to a file: \(inAdoptions) bytes written")

        // One insert of 60 new tokens journals past SQLite's threshold: the test tells the two apart.
        let tokens = (0..<60).map { _ in Self.randomToken(&generator).hex }
        try await store.writing { session in
            var insert: SQLQuery = "INSERT INTO device (appId, token, active, registeredAt, pushType) VALUES "
            for (offset, token) in tokens.enumerated() {
                insert += "\(unescaped: offset == 0 ? "" : ", ")(\(app.id), \(token), true, 0, 'widgets')"
            }
            try await session.run(insert)
        }
        let inOneInsert = try writtenInTheLastTransaction()
        #expect(inOneInsert > 100_000, "\(inOneInsert) bytes written")
    }

    static func randomToken(_ generator: inout SplitMix64) -> DeviceToken {
        try! DeviceToken((0..<4).map { _ in String(format: "%016llx", generator.next()) }.joined())
    }

    static func putDevice(_ app: App, _ generator: inout SplitMix64) -> RegistryWrite {
        let widget = WidgetRegistration(
            id: "w1", kind: "scores", family: .systemSmall,
            configuration: WidgetConfiguration(["team": .string(String(format: "%016llx", generator.next()))])
        )
        return .putDevice(app: app, token: randomToken(&generator), widgets: [widget], previousToken: nil)
    }
}
