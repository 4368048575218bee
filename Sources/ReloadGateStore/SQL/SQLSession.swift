public import Foundation

/// One transaction on one engine: the narrow layer the stores' shared rules are written against. It says
/// only how statements run and rows come back; the rules (``SQLSession`` extensions) say what to write.
public protocol SQLSession {
    /// How this engine spells what the engines spell differently.
    var dialect: SQLDialect { get }
    /// Runs `query` and returns its rows (none for a statement without `RETURNING`).
    func rows(_ query: SQLQuery) async throws -> SQLRows
    /// Runs `query` and hands each row to `body` as it is read (SQLite reads them one by one; a result
    /// from PostgreSQL arrives whole).
    func forEachRow(_ query: SQLQuery, _ body: (SQLRow) throws -> Void) async throws
    /// Makes this read transaction see one snapshot of the database throughout (SQLite's read
    /// transactions do; PostgreSQL's default isolation does not). Called before the first query.
    func readSnapshot() async throws
    /// Tells the owners of `devices` that their registration changed, and the other gateways that the
    /// registrations of `tokens` (hex) did, in this transaction. A store one gateway owns does nothing; a
    /// shared store writes a notice the owner reads, and sends one the device caches hear, at the commit
    /// itself: both even if this gateway fails right after it, neither if the transaction fails.
    func registryChanged(devices: [Int64], tokens: [String], at: Date) async throws
    /// Tells the other gateways that apps or provider keys changed (their caches forget them), in this
    /// transaction: a shared store sends the notice at the commit, even if this gateway fails right after
    /// it, and not if the transaction fails. A store one gateway owns does nothing.
    func catalogChanged(_ change: ClusterChange) async throws
}

extension SQLSession {
    /// Runs `query` for its effect.
    public func run(_ query: SQLQuery) async throws {
        _ = try await rows(query)
    }

    /// The first row of `query`, or `nil`.
    public func row(_ query: SQLQuery) async throws -> SQLRow? {
        let rows = try await rows(query)
        return rows.first
    }
}

/// A store whose rules are written once over ``SQLSession``: each engine only opens transactions.
public protocol SQLStore: GatewayStore {
    associatedtype Session: SQLSession
    /// Runs `body` in one write transaction (committed when it returns, rolled back when it throws).
    func writing<T: Sendable>(_ body: @escaping @Sendable (Session) async throws -> T) async throws -> T
    /// Runs `body`'s reads within the store's deadline or, for a read that may scan whole tables (export,
    /// the dashboard, the load at start), a longer one (`scanning`). On SQLite they run in one read
    /// transaction; on PostgreSQL a short read runs statement by statement, and a scan in a transaction
    /// (which ``SQLSession/readSnapshot()`` can make one snapshot). `body` writes nothing: on PostgreSQL
    /// a cancelled caller stops waiting for it at once and the read is abandoned.
    func reading<T: Sendable>(scanning: Bool, _ body: @escaping @Sendable (Session) async throws -> T) async throws -> T
    /// `secret` sealed with the data directory's `secrets.key` (webhook secrets are stored so).
    func seal(_ secret: String) throws -> Data
    /// A sealed secret in the clear.
    func unseal(_ sealed: Data) throws -> String
}

extension SQLStore {
    func reading<T: Sendable>(_ body: @escaping @Sendable (Session) async throws -> T) async throws -> T {
        try await reading(scanning: false, body)
    }
}
