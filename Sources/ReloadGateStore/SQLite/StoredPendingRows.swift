import GRDB
import Synchronization

/// Which instances may have a stored pending reload (a row in `pending_reload` or `pending_list`), so that
/// a commit deletes those rows only where they may exist: a fan-out over 100,000 widgets released at once
/// otherwise probes both tables 100,000 times each for rows that were never written.
///
/// A superset, never less: an instance is added before its row is written (in the transaction that writes
/// it), and removed only after the transaction that deleted its rows has committed. The server is the
/// only writer of these tables (one gateway per SQLite file), so nothing else adds rows; rows deleted
/// elsewhere (a widget removed, by cascade) only leave an instance listed that has none, which costs one
/// needless delete. Read from the tables at the first commit.
final class StoredPendingRows: Sendable {
    private let bits = Mutex<InstanceBits?>(nil)

    /// Loads the set from the tables if this is the first use (inside a write transaction).
    func load(from db: Database) throws {
        guard bits.withLock({ $0 == nil }) else { return }
        let ids = try Int64.fetchAll(db, sql: "SELECT instanceId FROM pending_reload UNION SELECT instanceId FROM pending_list")
        bits.withLock { bits in
            var loaded = InstanceBits()
            for id in ids where InstanceBits.holds(id) { loaded.insert(id) }
            bits = loaded
        }
    }

    /// Whether `instance` may have rows: always for an id the bits do not hold, and before the set is loaded.
    func mayHaveRows(_ instance: Int64) -> Bool {
        guard InstanceBits.holds(instance) else { return true }
        return bits.withLock { bits in bits?.contains(instance) ?? true }
    }

    func add(_ instance: Int64) {
        guard InstanceBits.holds(instance) else { return }
        bits.withLock { bits in _ = bits?.insert(instance) }
    }

    /// After the transaction that deleted their rows committed.
    func remove(_ instances: [Int64]) {
        bits.withLock { bits in
            guard bits != nil else { return }
            for instance in instances { bits!.remove(instance) }
        }
    }
}
