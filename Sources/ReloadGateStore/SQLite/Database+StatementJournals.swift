import GRDB

extension Database {
    /// GRDB's `inTransaction(_:_:)` (this connection must be outside any transaction) with every statement
    /// journal of the transaction in memory, whatever its size.
    ///
    /// A multi-row statement inside a transaction journals each page it changes that existed before it, to
    /// undo that statement alone if a row fails. SQLite keeps that journal in memory up to 128 KiB
    /// (decision 0105) and past it writes it to a temporary file, which every later statement of the same
    /// transaction writes to as well, two system calls a page. `PRAGMA temp_store = MEMORY`, in effect when
    /// the transaction begins, keeps every statement journal of the transaction in memory; each is freed
    /// when its statement ends. The setting also keeps temporary tables, indices and sorts in memory, so it
    /// holds for this transaction alone and is set back to the default (files) after it: only for
    /// transactions of bounded statements, such as the group commit's 32-row ones (decision 0106).
    func inTransactionKeepingStatementJournalsInMemory(_ operations: () throws -> TransactionCompletion) throws {
        // (SQLite applies `temp_store` when the statement is prepared, so it is never a cached statement.)
        try execute(sql: "PRAGMA temp_store = MEMORY")
        // Set back whatever the transaction's outcome. A failure to set it back is not the transaction's
        // (it may have committed, and its callers must hear so): the connection then keeps its temporary
        // storage in memory, which moves only its sorts and temporary tables there.
        defer { try? execute(sql: "PRAGMA temp_store = DEFAULT") }
        try inTransaction(nil, operations)
    }
}
