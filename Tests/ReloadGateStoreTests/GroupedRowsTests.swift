import GRDB
@testable import ReloadGateStore
import Testing

/// `GroupedRows`: every row added is written (in order) or deleted, whether it went in a statement of 32 or
/// alone; adding more rows than counted, or fewer, is the store's error, never a row silently dropped.
struct GroupedRowsTests {
    func withTable(_ body: (Database) throws -> Void) throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (position INTEGER PRIMARY KEY, label TEXT NOT NULL)")
            try body(db)
        }
    }

    /// Adds a row labelled "row N" at each of `positions`.
    func add(_ positions: Range<Int>, to rows: inout GroupedRows) throws {
        for position in positions {
            try rows.add { insert in
                insert.bind(position)
                insert.bind("row \(position)")
            }
        }
    }

    @Test(arguments: [0, 1, 31, 32, 33, 64, 100]) func everyRowAddedIsWrittenInOrder(_ count: Int) throws {
        try withTable { db in
            var rows = try GroupedRows(db, head: "INSERT INTO t (position, label)", row: "(?, ?)", count: count)
            try add(0..<count, to: &rows)
            try rows.finish()
            let labels = try String.fetchAll(db, sql: "SELECT label FROM t ORDER BY position")
            #expect(labels == (0..<count).map { "row \($0)" })
        }
    }

    /// Every key added is deleted, and no other row: every third of 150 rows, in statements of 32 and alone.
    @Test(arguments: [0, 1, 31, 32, 33, 50]) func everyKeyAddedIsDeleted(_ count: Int) throws {
        try withTable { db in
            var rows = try GroupedRows(db, head: "INSERT INTO t (position, label)", row: "(?, ?)", count: 150)
            try add(0..<150, to: &rows)
            try rows.finish()
            var deletes = try GroupedRows(db, deletingFrom: "t", key: "position", count: count)
            for k in 0..<count { try deletes.add { $0.bind(3 * k) } }
            try deletes.finish()
            let kept = try Int.fetchAll(db, sql: "SELECT position FROM t ORDER BY position")
            #expect(kept == (0..<150).filter { $0 % 3 != 0 || $0 / 3 >= count })
        }
    }

    @Test func moreRowsThanCountedAreRefused() throws {
        try withTable { db in
            var rows = try GroupedRows(db, head: "INSERT INTO t (position, label)", row: "(?, ?)", count: 1)
            try rows.add { insert in
                insert.bind(1)
                insert.bind("one")
            }
            #expect(throws: StoreError.self) {
                try rows.add { insert in
                    insert.bind(2)
                    insert.bind("two")
                }
            }
        }
    }

    /// Rows bound to a statement of 32 that never ran would be lost: `finish` says so.
    @Test func fewerRowsThanCountedAreAnError() throws {
        try withTable { db in
            var rows = try GroupedRows(db, head: "INSERT INTO t (position, label)", row: "(?, ?)", count: 40)
            try add(0..<20, to: &rows)
            #expect(throws: StoreError.self) { try rows.finish() }
        }
    }
}
