import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The deliveries a delivery worker holds, by apns-id and lease epoch: from the moment it takes one until
/// it ends or is left behind. A delivery handed to the worker again meanwhile under the same epoch is not
/// taken twice: a partition lost and taken again loads its unfinished deliveries from the store while the
/// worker may still hold them. One handed over under another epoch is taken (the copy held before belongs
/// to an earlier tenure and is left behind when its turn comes: ``RecordedDelivery/leaseEpoch``). Without
/// the first rule one gateway could send a delivery twice; with a check blind to epochs, never.
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
        var held: [String: Int64?] = [:]
        var devices: [Int64: Device] = [:]
        /// Deliveries released in the current burst.
        var releasedInBurst = 0
        /// The worker is handing a batch out (``beginHandingOut()``).
        var handingOut = false
    }

    /// A device with a delivery held or a turn taken.
    private struct Device {
        /// Its deliveries held (distinct apns-ids).
        var held = 0
        /// An attempt of its content is on its way.
        var sending = false
        /// The newest content timestamp whose attempt reached Apple, or may have.
        var newest: Int64?
        /// Attempts waiting for the one on its way to end.
        var waiting: [CheckedContinuation<Turn, Never>] = []

        var isIdle: Bool { held == 0 && !sending && waiting.isEmpty }
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
                let before = state.held.updateValue(delivery.leaseEpoch, forKey: delivery.apnsID)
                if let before, before == delivery.leaseEpoch { return false }
                // A copy of an earlier epoch was counted for its device already.
                if before == nil { state.devices[delivery.device, default: Device()].held += 1 }
                return true
            }
        }
    }

    /// `deliveries` ended or were left behind: taken again when handed over again. (A copy of an earlier
    /// epoch releases nothing: the newer copy is still held.) Returns the number released in the burst
    /// when this ends it (``endHandingOut()``), else nil.
    @discardableResult
    func release(_ deliveries: some Sequence<RecordedDelivery>) -> Int? {
        state.withLock { state in
            // Each key is hashed once: found by index, then changed or removed at it.
            for delivery in deliveries {
                guard let held = state.held.index(forKey: delivery.apnsID), state.held.values[held] == .some(delivery.leaseEpoch) else {
                    continue
                }
                state.held.remove(at: held)
                if let device = state.devices.index(forKey: delivery.device) {
                    state.devices.values[device].held -= 1
                    if state.devices.values[device].isIdle { state.devices.remove(at: device) }
                }
                state.releasedInBurst += 1
            }
            state.held.giveBackSpareRoom(keeping: HeldDeliveries.keptRoom)
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
        guard state.held.isEmpty, !state.handingOut, state.releasedInBurst > 0 else { return nil }
        defer { state.releasedInBurst = 0 }
        return state.releasedInBurst
    }

    var count: Int { state.withLock { $0.held.count } }

    /// The room each of its dictionaries keeps whatever it holds: a few hundred kilobytes at most.
    static let keptRoom = 16_384

    /// How many deliveries and devices the storage held now has room for (tests: it follows what is
    /// held, not the most ever held).
    var capacities: (held: Int, devices: Int) { state.withLock { ($0.held.capacity, $0.devices.capacity) } }

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
