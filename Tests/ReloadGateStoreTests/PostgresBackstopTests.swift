import Foundation
import Logging
import PostgresNIO
import ReloadGateCore
import ReloadGateTesting
import Testing

@testable import ReloadGateStore

/// The store's backstop (``PostgresStore/withConnection(deadline:readOnly:_:)``): an operation that ends
/// neither when its deadline closes its connection nor when it is cancelled is abandoned, and its error
/// says what may have happened. Once it had its connection, the server may yet do what it was sent, so the
/// caller must not answer it as not stored.
@Suite(.enabled(if: TestPostgres.isEnabled))
struct PostgresBackstopTests {
    @Test func anOperationAbandonedOnItsConnectionHasAnUnknownOutcome() async throws {
        let directory = try TemporaryDirectory("backstop")
        defer { directory.remove() }
        let logger = {
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            return logger
        }()
        // A short deadline keeps the backstop (lease timeout 5 s + 2 x (deadline + 1 s) + 5 s) at 13 s.
        let store = try await PostgresStore(
            location: try PostgresLocation(url: try await TestPostgres.newDatabase()), secretsDirectory: directory.path("data"),
            environment: .sandbox, now: Date(), deadline: .milliseconds(500), logger: logger
        )
        defer { try? store.close() }
        let (release, releasing) = AsyncStream<Void>.makeStream()
        let (ended, ending) = AsyncStream<Void>.makeStream()
        let started = ContinuousClock.now
        let outcome: (any Error)?
        do {
            try await store.withConnection { connection in
                _ = try await connection.rows("SELECT 1", logger: logger)
                // Deaf to its cancellation and to its connection's close: it waits for the test alone.
                await Task.detached { for await _ in release { break } }.value
                ending.finish()
            }
            outcome = nil
        } catch {
            outcome = error
        }
        let took = ContinuousClock.now - started
        releasing.finish()
        for await _ in ended {}
        guard case .outcomeUnknown? = outcome as? StoreError else {
            Issue.record("the abandoned operation's error: \(String(describing: outcome))")
            return
        }
        #expect(took >= .seconds(12) && took < .seconds(40), "abandoned after \(took)")
    }
}
