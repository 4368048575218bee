import Logging
import PostgresNIO
import ReloadGateStore

/// What a reference ledger does: one durable transaction of `rows` inserts.
protocol Reference {
    func insert(rows: Int) async throws
    func close() async throws
}

extension ReferenceLedger: Reference {
    func close() async throws {}
}

/// The PostgreSQL reference: one table without indexes in the benchmark's database, each transaction one
/// statement inserting `rows` rows of 100 bytes (the least a durable ledger on PostgreSQL must write).
final class PostgresReference: Reference {
    private let connection: PostgresConnection
    private let logger = Logger(label: "bench-store-reference")

    init(url: String) async throws {
        connection = try await PostgresConnection.connect(
            configuration: try PostgresLocation(url: url).connectionConfiguration(), id: 1, logger: logger
        )
        _ = try await connection.query("CREATE TABLE bench_reference (id bigint, payload text)", logger: logger).collect()
    }

    func insert(rows: Int) async throws {
        _ = try await connection.query(
            "INSERT INTO bench_reference SELECT n, repeat('x', 100) FROM generate_series(1, \(rows)) AS n", logger: logger
        ).collect()
    }

    func close() async throws {
        try await connection.close()
    }
}
