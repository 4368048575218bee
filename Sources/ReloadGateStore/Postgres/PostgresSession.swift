public import Foundation
import Logging
import PostgresNIO

/// A transaction on one of the pool's connections, as an ``SQLSession``.
public struct PostgresSession: SQLSession {
    let connection: PostgresConnection
    let logger: Logger

    public var dialect: SQLDialect { .postgres }

    public func rows(_ query: SQLQuery) async throws -> SQLRows {
        let (text, values) = dialect.render(query)
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { value.bind(to: &bindings) }
        let rows = try await connection.rows(PostgresQuery(unsafeSQL: text, binds: bindings), logger: logger)
        guard let first = rows.first else { return SQLRows(names: [], values: []) }
        // Names as PostgreSQL reports them: unquoted ones folded to lower case.
        return SQLRows(names: first.map(\.columnName), folded: true, values: try rows.map { try $0.map(SQLValue.init) })
    }

    public func forEachRow(_ query: SQLQuery, _ body: (SQLRow) throws -> Void) async throws {
        for row in try await rows(query) { try body(row) }
    }

    public func readSnapshot() async throws {
        _ = try await connection.rows("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
    }

    /// The owners of the devices read a notice written in this transaction, and the other gateways hear
    /// the tokens at its commit (``PostgresStore/noticeOwners(of:tokens:at:on:logger:)``).
    public func registryChanged(devices: [Int64], tokens: [String], at: Date) async throws {
        try await PostgresStore.noticeOwners(of: devices, tokens: tokens, at: at, on: connection, logger: logger)
    }

    /// Every gateway hears `change` at this transaction's commit.
    public func catalogChanged(_ change: ClusterChange) async throws {
        _ = try await connection.rows("SELECT pg_notify(\(PostgresStore.clusterChannel), \(change.rawValue))", logger: logger)
    }
}

extension PostgresBindings: SQLBinder {
    // Each value with the PostgreSQL type of its Swift type.
    mutating func bindNull() { appendNull() }
    mutating func bind(_ value: Int64) { append(value) }
    mutating func bind(_ value: Double) { append(value) }
    mutating func bind(_ value: String) { append(value) }
    mutating func bind(_ value: Bool) { append(value) }
    mutating func bind(_ value: Data) { append(ByteBuffer(bytes: value)) }
}

extension SQLValue {
    /// A cell in the types the stores use (text, integers, booleans, floating point).
    init(_ cell: PostgresCell) throws {
        guard cell.bytes != nil else {
            self = .null
            return
        }
        switch cell.dataType {
        case .int2, .int4, .int8: self = .integer(try cell.decode(Int64.self))
        case .bool: self = .bool(try cell.decode(Bool.self))
        case .float4, .float8: self = .real(try cell.decode(Double.self))
        case .numeric: self = .real(Double(try cell.decode(String.self)) ?? .nan)
        case .bytea: self = .blob(Data(try cell.decode(ByteBuffer.self).readableBytesView))
        default: self = .text(try cell.decode(String.self))
        }
    }
}

extension PostgresStore: SQLStore {
    public func seal(_ secret: String) throws -> Data { try sealer.seal(secret) }
    public func unseal(_ sealed: Data) throws -> String { try sealer.unseal(sealed) }

    public func writing<T: Sendable>(_ body: @escaping @Sendable (PostgresSession) async throws -> T) async throws -> T {
        let logger = logger
        return try await transaction { connection in try await body(PostgresSession(connection: connection, logger: logger)) }
    }

    /// A short read runs its statements on one connection without a transaction (each sees what was
    /// committed when it began: one round trip each, as the reads of one gateway's requests need); a read
    /// that scans runs in a transaction with the longer deadline, so that a snapshot can be asked for.
    public func reading<T: Sendable>(scanning: Bool, _ body: @escaping @Sendable (PostgresSession) async throws -> T) async throws -> T {
        let logger = logger
        guard scanning else {
            return try await withConnection(leftWhenCancelled: true) { connection in
                try await body(PostgresSession(connection: connection, logger: logger))
            }
        }
        return try await transaction(deadline: Self.readDeadline, leftWhenCancelled: true) { connection in
            try await body(PostgresSession(connection: connection, logger: logger))
        }
    }
}

extension PostgresStore {
    /// Tells the owners of `devices` that their registration changed, in the caller's transaction: an
    /// inbox row per device for its partition's owner (``ForwardedWork/device(id:)``), and a notification
    /// delivered when the transaction commits. With it, the notice of `tokens` (hex) for the device caches
    /// of every gateway (``ClusterNotice``; the writer's own hears it too and forgets them again). Both are
    /// sent by PostgreSQL at the commit: the owner and the caches learn of the change even when the
    /// gateway that made it fails right after, and of nothing a failed transaction wrote.
    /// `at`: the inbox row's `createdAt` (the time of the change; read by no gateway).
    static func noticeOwners(of devices: [Int64], tokens: [String], at: Date, on connection: PostgresConnection, logger: Logger) async throws {
        let unique = Array(Set(devices)).sorted()
        var notices = unique.isEmpty ? [] : [ClusterChange.inbox.rawValue]
        if !tokens.isEmpty { notices += ClusterNotice(.devices, tokens: tokens).payloads() }
        guard !notices.isEmpty else { return }
        let encoder = JSONEncoder()
        let works = try unique.map { String(decoding: try encoder.encode(ForwardedWork.device(id: $0)), as: UTF8.self) }
        let partitions = unique.map { Int32(DevicePartition.of(device: $0)) }
        // One statement, one round trip: a data-modifying WITH runs whole whatever the query reads of it.
        _ = try await connection.rows(
            """
            WITH written AS (
                INSERT INTO inbox (partition, work, createdAt)
                SELECT partition, work, \(at.storedMilliseconds) FROM unnest(\(partitions)::integer[], \(works)::text[]) AS notice(partition, work)
            )
            SELECT pg_notify(\(PostgresStore.clusterChannel), payload) FROM unnest(\(notices)::text[]) AS payload
            """,
            logger: logger
        )
    }
}

extension PostgresRow {
    /// The column named `name` (any case: PostgreSQL folds unquoted names to lower case), decoded as `T`.
    /// A missing column is ``StoreError/corrupt(reason:)``.
    func value<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        let folded = name.lowercased()
        guard let cell = first(where: { $0.columnName == folded }) else {
            throw StoreError.corrupt(reason: "a query's rows have no column \(name)")
        }
        return try cell.decode(T.self)
    }
}
