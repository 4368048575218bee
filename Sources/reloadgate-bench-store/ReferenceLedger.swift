import Foundation
import GRDBSQLite

/// The reference: a WAL database with `synchronous = FULL`, one table without indexes, rows inserted
/// through SQLite's C API with a prepared statement (nothing of the gateway's code).
final class ReferenceLedger {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var nextID: Int64 = 1
    private let payload = Array(repeating: UInt8(ascii: "x"), count: 100)

    init(directory: String) throws {
        _ = directory.withCString { mkdir($0, 0o700) }
        guard sqlite3_open(directory + "/reference.sqlite", &db) == SQLITE_OK else { throw Failure(description: "cannot open the reference") }
        for pragma in ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL", "CREATE TABLE ledger (id INTEGER PRIMARY KEY, payload BLOB)"] {
            guard sqlite3_exec(db, pragma, nil, nil, nil) == SQLITE_OK else { throw Failure(description: pragma) }
        }
        guard sqlite3_prepare_v2(db, "INSERT INTO ledger (id, payload) VALUES (?, ?)", -1, &insert, nil) == SQLITE_OK else {
            throw Failure(description: "cannot prepare the insert")
        }
    }

    deinit {
        sqlite3_finalize(insert)
        sqlite3_close(db)
    }

    /// One transaction of `rows` inserts, committed to the disk.
    func insert(rows: Int) throws {
        guard sqlite3_exec(db, "BEGIN", nil, nil, nil) == SQLITE_OK else { throw Failure(description: "BEGIN") }
        for _ in 0..<rows {
            sqlite3_bind_int64(insert, 1, nextID)
            payload.withUnsafeBytes { _ = sqlite3_bind_blob(insert, 2, $0.baseAddress, CInt($0.count), nil) }
            guard sqlite3_step(insert) == SQLITE_DONE else { throw Failure(description: "insert") }
            sqlite3_reset(insert)
            nextID += 1
        }
        guard sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK else { throw Failure(description: "COMMIT") }
    }
}
