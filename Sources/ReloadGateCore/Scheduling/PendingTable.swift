import CReloadGatePrefetch

/// The pending reloads (at most one per instance) in slots; each instance's state names its slot, so
/// finding an instance's pending reload costs no read beyond the state the scheduler reads anyway (a
/// dictionary, then a separate per-instance index, each cost a cache miss per decision with a million
/// instances). Freed slots are reused.
struct PendingTable: Sendable {
    private var slots: [ReloadScheduler.PendingReload] = []
    private var freeSlots: [Int32] = []

    /// The number of pending reloads.
    private(set) var count = 0

    /// The number of slots, taken or free: at most the most reloads ever pending at once.
    var slotCount: Int { slots.count }

    /// The reload in `slot`, changed in place: a copy taken out would share the request list's bytes, and
    /// its first append would copy them.
    subscript(slot: Int32) -> ReloadScheduler.PendingReload {
        get { slots[Int(slot)] }
        _modify { yield &slots[Int(slot)] }
    }

    /// Asks for the cache lines of the reload in `slot` (every one it spans), so that a read soon after
    /// finds them; nothing for a slot out of range.
    @inline(__always)
    func prefetch(_ slot: Int32) {
        guard slot >= 0 && Int(slot) < slots.count else { return }
        slots.withUnsafeBufferPointer { buffer in
            reloadgate_prefetch(buffer.baseAddress! + Int(slot), MemoryLayout<ReloadScheduler.PendingReload>.size)
        }
    }

    /// Stores `reload` in a free slot and returns the slot.
    mutating func add(_ reload: __owned ReloadScheduler.PendingReload) -> Int32 {
        count += 1
        if let reused = freeSlots.popLast() {
            slots[Int(reused)] = reload
            return reused
        }
        slots.append(reload)
        return Int32(slots.count - 1)
    }

    /// Frees `slot` (its record stays until the slot is reused).
    mutating func free(_ slot: Int32) {
        freeSlots.append(slot)
        count -= 1
    }

    /// The due time, priority and exemption of the reload in `slot`, read in place: the whole record
    /// (with its request list and strings) is copied only when it is needed.
    func summary(of slot: Int32) -> (due: Int64, priority: Priority, exempt: Bool) {
        (slots[Int(slot)].due, slots[Int(slot)].priority, slots[Int(slot)].exempt)
    }

    /// The reload in `slot` as stored, its fields read in place: the whole record copied out first would
    /// retain its list and strings once more, and release them again (decision 0088).
    func snapshot(of slot: Int32) -> PendingSnapshot {
        let i = Int(slot)
        let list = slots[i].requests
        let count = list.count
        return PendingSnapshot(
            due: Timestamp(milliseconds: slots[i].due),
            priority: slots[i].priority,
            expiration: slots[i].expiration.map(Timestamp.init(milliseconds:)),
            list: list,
            requestCount: count,
            collapseID: slots[i].collapseID,
            team: slots[i].team,
            exempt: slots[i].exempt
        )
    }

    /// The exemption and expiration of the reload in `slot`, read in place.
    func exemptionAndExpiration(of slot: Int32) -> (exempt: Bool, expiration: Int64?) {
        (slots[Int(slot)].exempt, slots[Int(slot)].expiration)
    }
}

/// The requests a pending reload serves: the first inline, more only when requests merge, so a pending
/// reload of one request allocates nothing.
///
/// Only the first ``listed`` ids are kept, and the total is counted: a widget that receives thousands of
/// pushes while its reload waits must not make every write-through and every delivery grow with them.
/// Each request's own decision names the instance and due time it merged into.
///
/// The ids after the first are kept as their differences from the id before, zigzag-encoded LEB128 bytes:
/// ids given in arrival order differ by about the number of requests between two pushes to one widget,
/// two or three bytes instead of eight. Every pending reload holds its list for up to the minimum
/// interval, so the lists are most of the scheduler's memory under steady traffic (docs/DECISIONS.md,
/// "Pending reloads keep their request ids as differences").
struct RequestList: Sendable {
    /// How many request ids a pending reload (and so a delivery) lists.
    static let listed = 100

    /// The first listed id.
    private let first: RequestID
    /// The last listed id: where the next difference starts from.
    private var last: RequestID
    /// The differences of the listed ids after the first, each from the one before.
    private var steps: [UInt8] = []
    /// Every request served, listed or not.
    private(set) var count = 1

    init(_ first: RequestID) {
        self.first = first
        last = first
    }

    /// A stored list: the listed ids (at least one) and the total.
    init?(listed ids: [RequestID], count: Int) {
        guard let head = ids.first else { return nil }
        self.init(head)
        for id in ids.dropFirst().prefix(Self.listed - 1) { add(id) }
        self.count = max(count, min(ids.count, Self.listed))
    }

    mutating func append(_ id: RequestID) {
        if count < Self.listed { add(id) }
        count += 1
    }

    private mutating func add(_ id: RequestID) {
        let difference = Int64(bitPattern: id &- last)
        var zigzag = UInt64(bitPattern: (difference << 1) ^ (difference >> 63))
        while zigzag >= 0x80 {
            steps.append(UInt8(truncatingIfNeeded: zigzag) | 0x80)
            zigzag >>= 7
        }
        steps.append(UInt8(zigzag))
        last = id
    }

    /// The first listed id.
    var firstID: RequestID { first }

    /// How many ids are listed (at most ``listed``): one, and one for each difference's last byte.
    var listedCount: Int { 1 + steps.count { $0 & 0x80 == 0 } }

    /// Sets the number of requests served in all, at least the number listed (a stored list and its
    /// stored count).
    mutating func setCount(_ total: Int) { count = max(total, listedCount) }

    /// The bytes the differences take.
    var listedBytes: Int { steps.count }

    /// Calls `body` with each listed id, in the order they were added.
    func forEach(_ body: (RequestID) -> Void) {
        body(first)
        var id = first
        var zigzag: UInt64 = 0
        var shift: UInt64 = 0
        for byte in steps {
            zigzag |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 != 0 {
                shift += 7
                continue
            }
            let difference = Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1)
            id = id &+ RequestID(bitPattern: difference)
            body(id)
            zigzag = 0
            shift = 0
        }
    }

    /// The listed ids.
    var array: [RequestID] {
        var array: [RequestID] = []
        array.reserveCapacity(min(count, Self.listed))
        forEach { array.append($0) }
        return array
    }
}
