public import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// A transaction of GRDB's on the thread that holds it, as an ``SQLSession``.
///
/// GRDB hands a connection to a synchronous closure; the shared rules are `async` (PostgreSQL's
/// statements are). ``run(_:_:)`` runs a rule to its end on the calling thread, inside that closure: the
/// rule's task prefers an executor that runs each of its jobs here, and since none of this session's
/// statements suspends, the rule never leaves the thread that holds the connection, nor waits for
/// another.
public struct SQLiteSession: SQLSession {
    let db: Database

    public var dialect: SQLDialect { .sqlite }

    public func rows(_ query: SQLQuery) async throws -> SQLRows {
        var names: [String] = []
        var rows: [[SQLValue]] = []
        try step(query) { columns, values in
            names = columns.names
            rows.append(values)
        }
        return SQLRows(names: names, values: rows)
    }

    public func forEachRow(_ query: SQLQuery, _ body: (SQLRow) throws -> Void) async throws {
        try step(query) { columns, values in try body(SQLRow(columns: columns, values: values)) }
    }

    /// Runs `query`, handing each row's values to `body` as SQLite's own column functions read them
    /// (GRDB's `Row` copies each row and converts each value, which a start that loads a million rows
    /// cannot afford; its `StatementArguments` box each argument: docs/DECISIONS.md, "The stores' rules
    /// are written once"). The values' array is reused from row to row.
    private func step(_ query: SQLQuery, _ body: (SQLColumns, [SQLValue]) throws -> Void) throws {
        let (text, values) = dialect.render(query)
        var statement = try BoundStatement(db, sql: text)
        for value in values { value.bind(to: &statement) }
        let columns = SQLColumns(names: statement.columnNames)
        var row: [SQLValue] = []
        try statement.forEachRow { handle in
            let count = sqlite3_column_count(handle)
            row.removeAll(keepingCapacity: true)
            for column in 0..<count {
                switch sqlite3_column_type(handle, column) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(handle, column)))
                case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(handle, column)))
                case SQLITE_TEXT:
                    let bytes = UnsafeBufferPointer(start: sqlite3_column_text(handle, column), count: Int(sqlite3_column_bytes(handle, column)))
                    row.append(.text(String(decoding: bytes, as: UTF8.self)))
                case SQLITE_BLOB:
                    let length = Int(sqlite3_column_bytes(handle, column))
                    row.append(.blob(length == 0 ? Data() : Data(bytes: sqlite3_column_blob(handle, column), count: length)))
                default: row.append(.null)
                }
            }
            try body(columns, row)
        }
    }

    /// A read transaction of SQLite's sees one snapshot already.
    public func readSnapshot() async throws {}

    /// One gateway owns a SQLite store: the engine learns of its own registry changes directly.
    public func registryChanged(devices: [Int64], tokens: [String], at: Date) async throws {}

    /// One gateway owns a SQLite store: its caches are told by the command that made the change.
    public func catalogChanged(_ change: ClusterChange) async throws {}

    /// `rule`'s result on `db`, run to its end on this thread (see the type's description).
    static func run<T>(_ db: Database, _ rule: @escaping (SQLiteSession) async throws -> T) throws -> T {
        let held = Held(session: SQLiteSession(db: db), rule: rule)
        return try InlineExecutor().run { try await held.rule(held.session) }
    }

    /// The session and rule, handed to a task that runs on this thread only.
    private struct Held<T>: @unchecked Sendable {
        let session: SQLiteSession
        let rule: (SQLiteSession) async throws -> T
    }
}

/// A task executor that runs the jobs of one task on the thread that called ``run(_:)``, until the task
/// ends.
private final class InlineExecutor: TaskExecutor, @unchecked Sendable {
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        ready.signal()
    }

    func run<T>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Mutex<Result<Box<T>, any Error>?>(nil)
        Task(executorPreference: self) {
            let result: Result<Box<T>, any Error>
            do { result = .success(Box(try await operation())) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            self.ready.signal()
        }
        while true {
            ready.wait()
            while let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
            if let result = outcome.withLock({ $0 }) { return try result.get().value }
        }
    }

    /// A result handed from the task to the waiting thread, which is the only one that reads it after.
    private struct Box<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }
}
