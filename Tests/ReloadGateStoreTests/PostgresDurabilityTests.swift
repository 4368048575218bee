import Foundation
import Logging
import PostgresNIO
import ReloadGateCore
import ReloadGateTesting
import Testing

@testable import ReloadGateStore

/// A commit is answered only once it would survive the database server's crash: the store's sessions
/// commit with `synchronous_commit` on whatever the database's default says, and leave the other values
/// that flush the WAL first as the operator set them (decision 0119).
@Suite(.enabled(if: TestPostgres.isEnabled))
struct PostgresDurabilityTests {
    /// The store's sessions' `synchronous_commit` on a new database whose default is `setting`.
    func sessionsSetting(withDatabaseDefault setting: String) async throws -> String {
        let directory = try TemporaryDirectory("durability")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        let name = try #require(URLComponents(string: url)?.path.dropFirst()).description
        let first = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
        _ = try await first.rows("ALTER DATABASE \(unescaped: name) SET synchronous_commit = \(unescaped: setting)")
        try first.close()
        // A database default applies to sessions that start after it is set: the store's, opened now.
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
        defer { try? store.close() }
        let row = try #require(try await store.rows("SELECT current_setting('synchronous_commit') AS setting").first)
        return try row.value("setting", as: String.self)
    }

    @Test func aDatabaseThatCommitsWithoutWaitingForItsWALGetsSessionsThatWait() async throws {
        #expect(try await sessionsSetting(withDatabaseDefault: "off") == "on")
    }

    @Test func anotherSettingThatFlushesTheWALFirstIsLeftAsTheOperatorChoseIt() async throws {
        #expect(try await sessionsSetting(withDatabaseDefault: "local") == "local")
    }
}

/// The rule alone, which needs no server: only `off` is raised.
struct PostgresDurabilityRuleTests {
    @Test func onlyOffIsRaised() {
        for setting in ["on", "local", "remote_write", "remote_apply"] {
            #expect(PostgresStore.durabilityParameter(.init(synchronousCommit: setting, fsync: "on")) == nil, "\(setting)")
        }
        let raised = PostgresStore.durabilityParameter(.init(synchronousCommit: "off", fsync: "on"))
        #expect(raised?.0 == "synchronous_commit" && raised?.1 == "on")
    }

    /// A server that never syncs is said at start, as a warning; a raised setting as a notice; a durable
    /// server gets no line.
    @Test func whatTheStoreSaysAtStart() {
        #expect(PostgresStore.Durability(synchronousCommit: "on", fsync: "on").said.isEmpty)
        #expect(PostgresStore.Durability(synchronousCommit: "local", fsync: "on").said.isEmpty)
        let raised = PostgresStore.Durability(synchronousCommit: "off", fsync: "on").said
        #expect(raised.map(\.0) == [.notice] && raised.first?.1.description.contains("synchronous_commit = off") == true)
        let unsynced = PostgresStore.Durability(synchronousCommit: "on", fsync: "off").said
        #expect(unsynced.map(\.0) == [.warning] && unsynced.first?.1.description.contains("fsync = off") == true)
        #expect(PostgresStore.Durability(synchronousCommit: "off", fsync: "off").said.map(\.0) == [.notice, .warning])
    }
}
