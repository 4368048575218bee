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
    private let bits = Mutex<[UInt64]?>(nil)

    /// Instance ids beyond this are always taken as possibly having rows (the bitmap stays small).
    static let limit: Int64 = 1 << 32

    /// Loads the set from the tables if this is the first use (inside a write transaction).
    func load(from db: Database) throws {
        guard bits.withLock({ $0 == nil }) else { return }
        let ids = try Int64.fetchAll(db, sql: "SELECT instanceId FROM pending_reload UNION SELECT instanceId FROM pending_list")
        bits.withLock { bits in
            var loaded: [UInt64] = []
            for id in ids { Self.set(id, in: &loaded) }
            bits = loaded
        }
    }

    func mayHaveRows(_ instance: Int64) -> Bool {
        guard instance >= 0, instance < Self.limit else { return true }
        return bits.withLock { bits in
            guard let bits else { return true }
            let word = Int(instance >> 6)
            return word < bits.count && bits[word] & (1 << UInt64(instance & 63)) != 0
        }
    }

    func add(_ instance: Int64) {
        bits.withLock { bits in
            guard bits != nil else { return }
            Self.set(instance, in: &bits!)
        }
    }

    /// After the transaction that deleted their rows committed.
    func remove(_ instances: [Int64]) {
        bits.withLock { bits in
            guard bits != nil else { return }
            for instance in instances where instance >= 0 && instance < Self.limit {
                let word = Int(instance >> 6)
                if word < bits!.count { bits![word] &= ~(1 << UInt64(instance & 63)) }
            }
        }
    }

    private static func set(_ instance: Int64, in bits: inout [UInt64]) {
        guard instance >= 0, instance < limit else { return }
        let word = Int(instance >> 6)
        if word >= bits.count { bits.append(contentsOf: repeatElement(0, count: word - bits.count + 1)) }
        bits[word] |= 1 << UInt64(instance & 63)
    }
}
