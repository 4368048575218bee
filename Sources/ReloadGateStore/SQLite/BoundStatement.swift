import Foundation
import GRDB
import GRDBSQLite
import ReloadGateCore

/// One of the group commit's cached statements (inserts and updates, and a point query), with its
/// arguments bound through SQLite's own `sqlite3_bind_*` functions.
///
/// The group commit runs the same few statements for every push it records. GRDB's `StatementArguments`
/// boxes each value as an existential and converts it to a `DatabaseValue` before binding; for these
/// statements that was about a quarter of the commit's CPU (docs/benchmarks-history.md). The statement is
/// still GRDB's (prepared and cached by the `Database`, inside GRDB's transaction); only the binding
/// and stepping are done here. Use it on the writer's queue only, like any GRDB statement.
///
/// Every run binds every parameter (checked before it steps), so a run's values replace the last run's:
/// they are not cleared in between (`sqlite3_clear_bindings` set each to NULL first, once per row of the
/// group commit, for nothing).
struct BoundStatement: SQLBinder {
    private let statement: Statement
    private var handle: SQLiteStatement { statement.sqliteStatement }
    private var index: CInt = 0

    init(_ db: Database, sql: String) throws {
        statement = try db.cachedStatement(sql: sql)
    }

    /// Binds the next argument.
    mutating func bind(_ value: Int64) {
        index += 1
        sqlite3_bind_int64(handle, index, value)
    }

    mutating func bind(_ value: Int) { bind(Int64(value)) }

    mutating func bind(_ value: Bool) { bind(Int64(value ? 1 : 0)) }

    mutating func bind(_ value: Int64?) {
        guard let value else { return bindNull() }
        bind(value)
    }

    /// Binds text (SQLite copies it).
    mutating func bind(_ value: String) { bind(Optional(value)) }

    mutating func bind(_ value: String?) {
        guard var value else { return bindNull() }
        index += 1
        let index = index
        value.withUTF8 { bytes in
            _ = sqlite3_bind_text(handle, index, bytes.baseAddress, CInt(bytes.count), Self.transient)
        }
    }

    /// Binds `values` as a stored integer list (``IntegerList``, `[1,2,3]`), written into a temporary
    /// buffer that SQLite copies: no `String` is built for it.
    mutating func bindList<Values: Collection<Int64>>(_ values: Values) {
        index += 1
        let index = index
        IntegerList.withText(values, count: values.count) { bytes in
            _ = sqlite3_bind_text(handle, index, bytes.baseAddress, CInt(bytes.count), Self.transient)
        }
    }

    /// Binds request ids as a stored integer list, each id as the `Int64` of its bits (as every store
    /// keeps them).
    mutating func bindList(requests: some Collection<RequestID>) {
        bindList(requests.lazy.map { Int64(bitPattern: $0) })
    }

    /// Binds a blob (SQLite copies it).
    mutating func bind(_ bytes: [UInt8]) {
        index += 1
        let index = index
        bytes.withUnsafeBytes { raw in
            // A zero-length blob, not NULL: SQLite takes a null pointer as NULL.
            _ = sqlite3_bind_blob(handle, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), CInt(raw.count), Self.transient)
        }
    }

    /// Binds a floating-point number.
    mutating func bind(_ value: Double) {
        index += 1
        sqlite3_bind_double(handle, index, value)
    }

    /// Binds bytes (SQLite copies them).
    mutating func bind(_ value: Data) { bind(Array(value)) }

    mutating func bindNull() {
        index += 1
        sqlite3_bind_null(handle, index)
    }

    /// Runs the statement with the arguments bound since the last run, then makes it ready for the next.
    /// - Throws: `DatabaseError` when SQLite refuses it (a constraint, a full disk).
    mutating func run() throws {
        defer {
            sqlite3_reset(handle)
            index = 0
        }
        precondition(index == sqlite3_bind_parameter_count(handle), "\(statement.sql): \(index) arguments bound")
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE else {
            let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    /// Runs a query with the arguments bound since the last run and reads the first `columns` columns of
    /// its first row as integers (`nil`: no row), then makes it ready for the next.
    mutating func firstRow(integers columns: CInt) throws -> [Int64]? {
        defer {
            sqlite3_reset(handle)
            index = 0
        }
        precondition(index == sqlite3_bind_parameter_count(handle), "\(statement.sql): \(index) arguments bound")
        precondition(columns <= sqlite3_column_count(handle), "\(statement.sql): fewer than \(columns) columns")
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return (0..<columns).map { sqlite3_column_int64(handle, $0) }
        case SQLITE_DONE: return nil
        case let code:
            let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    /// The column names of the statement's rows.
    var columnNames: [String] { statement.columnNames }

    /// Runs a query with the arguments bound since the last run, handing `body` the statement at each row
    /// (read with `sqlite3_column_*`), then makes it ready for the next, whether `body` throws or not.
    mutating func forEachRow(_ body: (SQLiteStatement) throws -> Void) throws {
        defer {
            sqlite3_reset(handle)
            index = 0
        }
        // A statement of the shared rules: its placeholders and values come from one rendering, but a
        // mismatch must fail the statement, not the process.
        guard index == sqlite3_bind_parameter_count(handle) else {
            throw StoreError.corrupt(reason: "\(statement.sql): \(index) arguments bound for \(sqlite3_bind_parameter_count(handle)) placeholders")
        }
        while true {
            switch sqlite3_step(handle) {
            case SQLITE_ROW: try body(handle)
            case SQLITE_DONE: return
            case let code:
                let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
            }
        }
    }

    /// SQLite's `SQLITE_TRANSIENT`: copy the bytes before the call returns.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}
