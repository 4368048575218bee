import Foundation
import Logging
import PostgresNIO
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// The store's reads of PostgreSQL rows when the server goes away in the middle of a result: an error for
/// the read, never the end of the process.
///
/// postgres-nio 1.33.2 stops the process (a precondition in `RowStreamStateMachine.channelReadComplete`) when
/// a connection's end of stream arrives while its row stream waits for the consumer's demand: rows of a
/// result were handed on, more are due, and no read was asked for, as when a database crashes under load
/// (docs/OPERATIONS.md). `PostgresConnection.rows(_:logger:)` collects rows the way that
/// never leaves the stream without demand; here a proxy ends the connection just after the first row of a
/// long result, together with that row, which is the moment that precondition fires for a consumer that
/// asks row by row (with the read switched to postgres-nio's `PostgresRowSequence`, the test process dies
/// of exactly that precondition).
@Suite(.enabled(if: TestPostgres.isEnabled))
struct PostgresRowStreamTests {
    @Test func aResultCutAfterItsFirstRowIsAnErrorNotACrash() async throws {
        let (proxy, proxied) = try await TCPProxy.inFront(of: try await TestPostgres.newDatabase())
        defer { Task { await proxy.stop() } }
        let logger = Logger(label: "test")
        // Several times, each on a connection of its own: the end arrives with the row, or just after it.
        for round in 0..<20 {
            let connection = try await PostgresConnection.connect(
                configuration: try PostgresLocation(url: proxied).connectionConfiguration(), id: round, logger: logger
            )
            proxy.endAfterFirstRow(onceClientSends: "generate_series(1, 200000 + \(round))")
            await #expect(throws: (any Error).self) {
                _ = try await connection.rows("SELECT n, repeat('x', 100) FROM generate_series(1, 200000 + \(unescaped: String(round))) AS n", logger: logger)
            }
            try? await connection.close()
        }
        // The server answers whole results through the proxy still.
        let connection = try await PostgresConnection.connect(
            configuration: try PostgresLocation(url: proxied).connectionConfiguration(), id: 99, logger: logger
        )
        defer { Task { try? await connection.close() } }
        #expect(try await connection.rows("SELECT generate_series(1, 5000)", logger: logger).count == 5000)
    }
}
