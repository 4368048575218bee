import GRDB
import GRDBSQLite

/// Reads the rows of a query column by column through SQLite's own `sqlite3_column_*` functions.
///
/// The start loads every widget instance's state: at 1,000,000 instances, GRDB's `Row` (a copied row,
/// columns found by name, each value converted through `DatabaseValueConvertible`) took two thirds of
/// the gateway's start (docs/BENCHMARKS.md, "One machine at full size"). The statement is still GRDB's,
/// prepared inside GRDB's read; only the stepping and reading are done here. Use it inside the
/// `read`/`write` closure that gave `db`, like any GRDB statement.
struct RowCursor {
    private let statement: Statement
    private var handle: SQLiteStatement { statement.sqliteStatement }

    /// A cursor over `sql` with `arguments` (the statement is cached by the database: prepared once
    /// per shape of query).
    init(_ db: Database, sql: String, arguments: StatementArguments = []) throws {
        statement = try db.cachedStatement(sql: sql)
        try statement.setArguments(arguments)
    }

    /// Steps to the next row: `false` after the last one.
    /// - Throws: `DatabaseError` when SQLite fails.
    func next() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    func int64(_ column: CInt) -> Int64 { sqlite3_column_int64(handle, column) }

    func optionalInt64(_ column: CInt) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
    }

    func bool(_ column: CInt) -> Bool { sqlite3_column_int64(handle, column) != 0 }

    func string(_ column: CInt) -> String? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// A list of integers stored as a JSON array (`[1,2,3]`), parsed from the column's bytes; `[]` for NULL.
    func integers(_ column: CInt) -> [Int64] {
        guard let text = sqlite3_column_text(handle, column) else { return [] }
        return IntegerList.parse(UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, column))))
    }
}
