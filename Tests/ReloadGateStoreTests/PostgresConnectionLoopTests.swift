import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// Where the PostgreSQL store's connections run (decision 0108): on a loop of the store's own, not on
/// NIO's shared group, whose loops serve the gateway's listeners and keep a commit's answer waiting behind
/// their work.
struct PostgresConnectionLoopTests {
    @Test(.enabled(if: TestPostgres.isEnabled)) func thePoolsConnectionsRunOnTheStoresOwnLoop() async throws {
        let directory = try TemporaryDirectory("pg-loop")
        defer { directory.remove() }
        let store = try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
        defer { try? store.close() }
        // Several operations at once, each holding its connection a moment, so that the pool opens more than one.
        let loops = try await withThrowingTaskGroup(of: ObjectIdentifier.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await store.withConnection { connection in
                        try await Task.sleep(for: .milliseconds(50))
                        return ObjectIdentifier(connection.eventLoop)
                    }
                }
            }
            return try await group.reduce(into: Set<ObjectIdentifier>()) { $0.insert($1) }
        }
        let own = Set(PostgresStore.connectionLoops.makeIterator().map { ObjectIdentifier($0) })
        let shared = Set(MultiThreadedEventLoopGroup.singleton.makeIterator().map { ObjectIdentifier($0) })
        #expect(!loops.isEmpty)
        #expect(loops.isSubset(of: own))
        #expect(loops.isDisjoint(with: shared))
    }
}
