import Foundation
import GRDB
import Synchronization

/// Another process's hold on a SQLite file's write lock (an operator's `sqlite3` shell, a backup): a
/// connection of the test's own that has begun an immediate transaction, held until ``release()`` or for
/// `limit` at most (a test that fails early does not leave the gateway locked).
final class SQLiteWriteLockHolder: Sendable {
    private let database: DatabaseQueue
    private let released: Flag
    private let letGo: Flag
    private let holder: Task<Void, any Error>

    /// The lock is still held: `true` until just before the holder commits (on ``release()`` or at the
    /// limit), so whatever a test saw while this was `true` happened while the lock was held.
    var isHeld: Bool { !letGo.value.withLock { $0 } }

    /// Returns once the lock is held.
    static func hold(_ path: String, atMost limit: Duration) async throws -> SQLiteWriteLockHolder {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        let database = try DatabaseQueue(path: path, configuration: configuration)
        let locked = AsyncStream<Void>.makeStream()
        let holder = SQLiteWriteLockHolder(database: database, limit: limit, locked: locked.continuation)
        for await _ in locked.stream { break }
        return holder
    }

    private init(database: DatabaseQueue, limit: Duration, locked: AsyncStream<Void>.Continuation) {
        self.database = database
        let released = Flag()
        self.released = released
        let letGo = Flag()
        self.letGo = letGo
        holder = Task.detached {
            try await database.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                locked.yield()
                let until = ContinuousClock.now + limit
                while !released.value.withLock({ $0 }), ContinuousClock.now < until { Thread.sleep(forTimeInterval: 0.05) }
                letGo.value.withLock { $0 = true }
                try db.execute(sql: "COMMIT")
            }
        }
    }

    /// Lets the lock go and waits until it is gone.
    func release() async throws {
        released.value.withLock { $0 = true }
        try await holder.value
        try database.close()
    }

    /// Set by ``release()``, read by the task that holds the lock.
    private final class Flag: Sendable {
        let value = Mutex(false)
    }
}
