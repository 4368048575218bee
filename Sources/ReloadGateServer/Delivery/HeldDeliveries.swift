import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The deliveries a delivery worker holds, by device, apns-id and lease epoch: from the moment it takes
/// one until it ends or is left behind. A delivery handed to the worker again meanwhile under the same
/// epoch is not taken twice: a partition lost and taken again loads its unfinished deliveries from the
/// store while the worker may still hold them. One handed over under another epoch is taken (the copy held
/// before belongs to an earlier tenure and is left behind when its turn comes:
/// ``RecordedDelivery/leaseEpoch``). Without the first rule one gateway could send a delivery twice; with a
/// check blind to epochs, never.
///
/// It also gives the deliveries that carry content (a Live Activity's updates) their turns: one attempt of
/// a device's content at a time, and never content older than content already attempted for the device,
/// so that an activity's updates reach Apple newest-last however the worker's groups and retries
/// interleave (a device shows the newest `timestamp`; an older update after a newer one is not shown).
/// Only an attempt that reached Apple, or may have (sent, or no answer), makes older content outdated: one
/// Apple refused, for good or for now, showed nothing, so an older update still goes.
/// What it knows of a device lasts while the worker holds one of its deliveries: an older update released
/// later is the scheduler's to drop (`outdated`), since it records the content released.
final class HeldDeliveries: Sendable {
    private struct State {
        /// The devices with a delivery held or a turn taken, each with its deliveries held: one look-up a
        /// delivery taken or released, by its device (a delivery's device never changes).
        var devices: [Int64: Device] = [:]
        /// Deliveries held (distinct apns-ids).
        var heldCount = 0
        /// Deliveries released in the current burst.
        var releasedInBurst = 0
        /// The worker is handing a batch out (``beginHandingOut()``).
        var handingOut = false
    }

    /// A device with a delivery held or a turn taken.
    private struct Device {
        /// Its deliveries held.
        var held = HeldList()
        /// An attempt of its content is on its way.
        var sending = false
        /// The newest content timestamp whose attempt reached Apple, or may have.
        var newest: Int64?
        /// Attempts waiting for the one on its way to end.
        var waiting: [CheckedContinuation<Turn, Never>] = []

        var isIdle: Bool { held.isEmpty && !sending && waiting.isEmpty }
    }

    /// A device's deliveries held, by apns-id, each with the lease epoch it was taken under: the first
    /// inline, any more in an array (a device seldom has two deliveries out at once).
    struct HeldList {
        private var first: (apnsID: String, epoch: Int64?)?
        private var more: [(apnsID: String, epoch: Int64?)] = []

        var isEmpty: Bool { first == nil }

        /// What taking a delivery did.
        enum Taken: Equatable {
            /// Held already under this epoch: not taken again.
            case heldAlready
            /// Held under another epoch: taken under this one, in its place.
            case replaced
            /// Taken.
            case added
        }

        /// Holds `apnsID` under `epoch` unless it is held under it already.
        mutating func take(_ apnsID: String, epoch: Int64?) -> Taken {
            guard let held = first else {
                first = (apnsID, epoch)
                return .added
            }
            if held.apnsID == apnsID {
                if held.epoch == epoch { return .heldAlready }
                first = (apnsID, epoch)
                return .replaced
            }
            if let index = more.firstIndex(where: { $0.apnsID == apnsID }) {
                if more[index].epoch == epoch { return .heldAlready }
                more[index].epoch = epoch
                return .replaced
            }
            more.append((apnsID, epoch))
            return .added
        }

        /// Releases `apnsID` if it is held under `epoch`; whether it was.
        mutating func release(_ apnsID: String, epoch: Int64?) -> Bool {
            if let held = first, held.apnsID == apnsID {
                guard held.epoch == epoch else { return false }
                first = more.popLast()
                return true
            }
            guard let index = more.firstIndex(where: { $0.apnsID == apnsID }), more[index].epoch == epoch else { return false }
            more.remove(at: index)
            return true
        }
    }

    /// Whether an attempt of content may go now.
    enum Turn: Equatable, Sendable {
        /// It goes; ``endTurn(device:reached:)`` when its attempt ended.
        case go
        /// An attempt of the device's content is on its way.
        case busy
        /// Newer content (this timestamp) reached Apple for the device already, or may have.
        case outdated(newer: Int64)
    }

    private let state = Mutex(State())

    init() {}

    /// Those of `deliveries` not held yet under their epoch (in order), held from now on.
    func take(_ deliveries: [RecordedDelivery]) -> [RecordedDelivery] {
        state.withLock { state in
            deliveries.filter { delivery in
                switch state.devices[delivery.device, default: Device()].held.take(delivery.apnsID, epoch: delivery.leaseEpoch) {
                case .heldAlready: return false
                case .replaced: return true  // a copy of an earlier epoch was counted already
                case .added:
                    state.heldCount += 1
                    return true
                }
            }
        }
    }

    /// `deliveries` ended or were left behind: taken again when handed over again. (A copy of an earlier
    /// epoch releases nothing: the newer copy is still held.) Returns the number released in the burst
    /// when this ends it (``endHandingOut()``), else nil.
    @discardableResult
    func release(_ deliveries: some Sequence<RecordedDelivery>) -> Int? {
        state.withLock { state in
            // Each device is hashed once: found by index, then changed or removed at it.
            for delivery in deliveries {
                guard let device = state.devices.index(forKey: delivery.device),
                    state.devices.values[device].held.release(delivery.apnsID, epoch: delivery.leaseEpoch)
                else { continue }
                if state.devices.values[device].isIdle { state.devices.remove(at: device) }
                state.heldCount -= 1
                state.releasedInBurst += 1
            }
            state.devices.giveBackSpareRoom(keeping: HeldDeliveries.keptRoom)
            return Self.endOfBurst(&state)
        }
    }

    /// The worker starts handing a batch out: the burst goes on until it has (``endHandingOut()``).
    func beginHandingOut() {
        state.withLock { $0.handingOut = true }
    }

    /// The worker has handed its batch out and no longer keeps the batch's storage. Returns the number
    /// released in the burst when this ends it, else nil.
    ///
    /// A burst is the deliveries released between two moments when the worker holds none and hands no
    /// batch out. Both count: a batch's storage (a herd's: 900,000 deliveries, some 165 MB) is freed when
    /// its last group has left, and destroying it can end after that group's deliveries did.
    func endHandingOut() -> Int? {
        state.withLock { state in
            state.handingOut = false
            return Self.endOfBurst(&state)
        }
    }

    private static func endOfBurst(_ state: inout State) -> Int? {
        guard state.heldCount == 0, !state.handingOut, state.releasedInBurst > 0 else { return nil }
        defer { state.releasedInBurst = 0 }
        return state.releasedInBurst
    }

    var count: Int { state.withLock { $0.heldCount } }

    /// The room its dictionary of devices keeps whatever it holds: about 2 MB at most (80 bytes a device's
    /// entry, up to 24,576 entries' room for this many).
    static let keptRoom = 16_384

    /// How many devices the storage held now has room for (tests: it follows what is held, not the most
    /// ever held).
    var capacity: Int { state.withLock { $0.devices.capacity } }

    /// Devices known (a delivery held or a turn taken).
    var deviceCount: Int { state.withLock { $0.devices.count } }

    /// The turn of an attempt of `device`'s content with `timestamp`, without waiting: `busy` while
    /// another attempt of its content is on its way.
    func tryTurn(device: Int64, timestamp: Int64) -> Turn {
        state.withLock { Self.turn(&$0, device: device, timestamp: timestamp) }
    }

    /// The turn of an attempt of `device`'s content with `timestamp`, once no other attempt of its content
    /// is on its way (`go` or `outdated`). The wait ends with that attempt, whose own deadline bounds it.
    func turn(device: Int64, timestamp: Int64) async -> Turn {
        while true {
            let turn = await withCheckedContinuation { (waiter: CheckedContinuation<Turn, Never>) in
                let now: Turn? = state.withLock { state in
                    let turn = Self.turn(&state, device: device, timestamp: timestamp)
                    guard turn == .busy else { return turn }
                    state.devices[device, default: Device()].waiting.append(waiter)
                    return nil
                }
                if let now { waiter.resume(returning: now) }
            }
            if turn != .busy { return turn }
        }
    }

    /// The attempt given `go` for `device` ended (answered, failed, or not made): the next may go. `reached`:
    /// the attempt's content timestamp when it reached Apple or may have (``DeliveryOutcome/mayHaveReached``);
    /// older content is outdated from then on. Nil when Apple refused it or it was not made.
    func endTurn(device: Int64, reached: Int64?) {
        let waiting: [CheckedContinuation<Turn, Never>] = state.withLock { state in
            guard var known = state.devices[device] else { return [] }
            let waiting = known.waiting
            known.sending = false
            if let reached { known.newest = max(known.newest ?? reached, reached) }
            known.waiting = []
            state.devices[device] = known.isIdle ? nil : known
            if known.isIdle { state.devices.giveBackSpareRoom(keeping: HeldDeliveries.keptRoom) }
            return waiting
        }
        // Each looks again: one goes, the others wait again or are outdated.
        for waiter in waiting { waiter.resume(returning: .busy) }
    }

    private static func turn(_ state: inout State, device: Int64, timestamp: Int64) -> Turn {
        var known = state.devices[device] ?? Device()
        if known.sending { return .busy }
        if let newest = known.newest, ContentStamp.isOutdated(timestamp, newest: newest) { return .outdated(newer: newest) }
        known.sending = true
        state.devices[device] = known
        return .go
    }
}
