import Foundation
import Logging
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// A group commit that takes PostgreSQL longer than the store's deadline because of its size (a fan-out
/// webhook over hundreds of thousands of instances) is given time in proportion to its rows (decision
/// 0112). At the deadline it was cancelled, and the same call sent again failed the same way every time.
struct PostgresLargeCommitTests {
    @Test(.enabled(if: TestPostgres.isEnabled)) func aBatchLongerThanTheDeadlineCommits() async throws {
        let directory = try TemporaryDirectory("pg-large-commit")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        // Migrated by a handle with the tests' generous deadline first: the test asks about the commit.
        try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data")).close()
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let deadline: Duration = .milliseconds(200)
        let store = try await PostgresStore(
            location: try PostgresLocation(url: url), secretsDirectory: directory.path("data"), environment: .sandbox, now: Date(),
            deadline: deadline, logger: logger
        )
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: Date()).app
        var batch = LedgerBatch()
        batch.requests = (1...100_000).map { StoreFixture.request(RequestID($0), app: app) }
        #expect(PostgresStore.commitDeadline(rows: batch.rowCount, deadline: deadline) == deadline + .seconds(15))
        let started = ContinuousClock.now
        try await store.commit(batch)
        print("PostgresLargeCommitTests: 100,000 requests committed in \(started.duration(to: .now)) (the store's deadline \(deadline))")
        #expect(try await store.ledgerCounts().requests == 100_000)
        // A batch under 20,000 rows keeps the store's deadline.
        #expect(PostgresStore.commitDeadline(rows: 19_999, deadline: deadline) == deadline)
        #expect(PostgresStore.commitDeadline(rows: 20_000, deadline: deadline) == deadline + .seconds(3))
    }
}
