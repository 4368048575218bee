import ReloadGateStore
import Synchronization

/// The deliveries a delivery worker holds, by apns-id and lease epoch: from the moment it takes one until
/// it ends or is left behind. A delivery handed to the worker again meanwhile under the same epoch is not
/// taken twice: a partition lost and taken again loads its unfinished deliveries from the store while the
/// worker may still hold them. One handed over under another epoch is taken (the copy held before belongs
/// to an earlier tenure and is left behind when its turn comes: ``RecordedDelivery/leaseEpoch``). Without
/// the first rule one gateway could send a delivery twice; with a check blind to epochs, never.
final class HeldDeliveries: Sendable {
    private let held = Mutex<[String: Int64?]>([:])

    init() {}

    /// Those of `deliveries` not held yet under their epoch (in order), held from now on.
    func take(_ deliveries: [RecordedDelivery]) -> [RecordedDelivery] {
        held.withLock { held in
            deliveries.filter { delivery in
                if let epoch = held[delivery.apnsID], epoch == delivery.leaseEpoch { return false }
                held[delivery.apnsID] = .some(delivery.leaseEpoch)
                return true
            }
        }
    }

    /// `deliveries` ended or were left behind: taken again when handed over again. (A copy of an earlier
    /// epoch releases nothing: the newer copy is still held.)
    func release(_ deliveries: some Sequence<RecordedDelivery>) {
        held.withLock { held in
            for delivery in deliveries where held[delivery.apnsID] == .some(delivery.leaseEpoch) {
                held[delivery.apnsID] = nil
            }
        }
    }

    var count: Int { held.withLock { $0.count } }
}
