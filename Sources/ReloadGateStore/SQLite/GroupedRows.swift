import GRDB

/// A statement of the group commit over many rows, `rowsPerStatement` rows a statement, the remainder one
/// row a statement: an `INSERT` of their values (a `VALUES` list of that many), or a `DELETE` of their keys
/// (`key IN` a list of that many).
///
/// Each statement SQLite runs opens a cursor on the table and on each of its indexes and finds its place
/// in every tree from the root. Within one statement the cursors stay where the last row left them, so a
/// row that follows the last one in a tree (a delivery's id, which grows; an instance's state, written
/// in id order) is placed without the search. A fan-out writes a row of each kind for every instance it
/// reaches, and its herd deletes two for every instance it delivers.
struct GroupedRows {
    /// Rows a statement: a delivery binds 9 values, so 32 rows bind 288 (SQLite allows 32,766).
    static let rowsPerStatement = 32

    private var many: BoundStatement?
    private var one: BoundStatement?
    /// Rows still to come, counted down; while at least a statement's worth is left, rows go to `many`.
    private var remaining: Int
    /// Rows bound to `many` since its last run.
    private var bound = 0

    /// An insert.
    /// - Parameters:
    ///   - head: the statement before its values, `INSERT INTO t (a, b)`.
    ///   - row: one row's placeholders, `(?, ?)`.
    ///   - tail: what follows the values (an `ON CONFLICT` clause), if anything.
    ///   - count: how many rows will be inserted.
    init(_ db: Database, head: String, row: String, tail: String = "", count: Int) throws {
        try self.init(db, count: count) { rows in "\(head) VALUES \(Array(repeating: row, count: rows).joined(separator: ", ")) \(tail)" }
    }

    /// A delete of the rows of `table` whose `key` is an added row's (each row binds its key alone).
    init(_ db: Database, deletingFrom table: String, key: String, count: Int) throws {
        try self.init(db, count: count) { rows in
            rows == 1
                ? "DELETE FROM \(table) WHERE \(key) = ?"
                : "DELETE FROM \(table) WHERE \(key) IN (\(Array(repeating: "?", count: rows).joined(separator: ", ")))"
        }
    }

    /// - Parameter sql: the statement's text for a number of rows.
    private init(_ db: Database, count: Int, sql: (_ rows: Int) -> String) throws {
        remaining = count
        let perStatement = Self.rowsPerStatement
        if count >= perStatement { many = try BoundStatement(db, sql: sql(perStatement)) }
        if count % perStatement != 0 { one = try BoundStatement(db, sql: sql(1)) }
    }

    /// Adds the next row, its values bound by `bind` in the order of `row`'s placeholders; runs a
    /// statement once it has all its rows. Rows are written in the order they are added.
    mutating func add(_ bind: (inout BoundStatement) throws -> Void) throws {
        guard remaining > 0 else { throw StoreError.corrupt(reason: "more rows added to a statement than counted") }
        if bound > 0 || remaining >= Self.rowsPerStatement {
            try bind(&many!)
            bound += 1
            if bound == Self.rowsPerStatement {
                try many!.run()
                bound = 0
                remaining -= Self.rowsPerStatement
            }
        } else {
            try bind(&one!)
            try one!.run()
            remaining -= 1
        }
    }

    /// Checks that every counted row was added, and so written: rows bound to a statement that never
    /// ran would be lost without an error.
    func finish() throws {
        guard remaining == 0 else {
            throw StoreError.corrupt(reason: "\(remaining) rows of a statement were counted but not added")
        }
    }
}
