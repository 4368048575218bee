import GRDB
import GRDBSQLite
import ReloadGateCore

extension Database {
    /// Runs `body` with this connection waiting at most `wait` for another connection's lock, then sets
    /// the wait back to `restored`.
    ///
    /// Throws (`SQLITE_MISUSE`, nothing run) when the connection is closed. Work that a deadline abandoned
    /// (a degraded engine's probe, a pruning step) can reach the store after a stopping gateway closed it;
    /// GRDB's statements then fail with an error, but `sqlite3_busy_timeout` reads the connection without
    /// checking it (SQLite as Debian builds it, without `SQLITE_ENABLE_API_ARMOR`): on a closed store such a
    /// call would stop the process (signal 11).
    func waitingForLocks<T>(_ wait: Duration, thenBack restored: Duration, _ body: () throws -> T) throws -> T {
        guard let connection = sqliteConnection else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "the store is closed")
        }
        sqlite3_busy_timeout(connection, Int32(clamping: wait.milliseconds))
        defer { sqlite3_busy_timeout(connection, Int32(clamping: restored.milliseconds)) }
        return try body()
    }
}
