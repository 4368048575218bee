import Foundation
import GRDB

extension SQLiteStore: SQLStore {
    public func seal(_ secret: String) throws -> Data { try sealer.seal(secret) }
    public func unseal(_ sealed: Data) throws -> String { try sealer.unseal(sealed) }

    /// Runs `body` in a write transaction on the store's write queue (SQLiteStore+OffThread.swift).
    public func writing<T: Sendable>(_ body: @escaping @Sendable (SQLiteSession) async throws -> T) async throws -> T {
        try await offThread { try self.writingHere(body) }
    }

    /// Runs `body` in a read transaction where ``ReadPlacement`` says. SQLite's reads have no deadline of
    /// their own: a read sees a snapshot and waits for nobody.
    public func reading<T: Sendable>(scanning: Bool, _ body: @escaping @Sendable (SQLiteSession) async throws -> T) async throws -> T {
        try await offThreadRead { try self.readingHere(body) }
    }

    /// ``writing(_:)`` on the calling thread (the operator's commands, tests).
    func writingHere<T>(_ body: @escaping (SQLiteSession) async throws -> T) throws -> T {
        try Self.orUnavailable { try writer.write { db in try SQLiteSession.run(db, body) } }
    }

    /// ``reading(scanning:_:)`` on the calling thread.
    func readingHere<T>(_ body: @escaping (SQLiteSession) async throws -> T) throws -> T {
        try writer.read { db in try SQLiteSession.run(db, body) }
    }
}
