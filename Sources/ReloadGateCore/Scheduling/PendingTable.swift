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

    subscript(slot: Int32) -> ReloadScheduler.PendingReload {
        get { slots[Int(slot)] }
        set { slots[Int(slot)] = newValue }
    }

    /// Stores `reload` in a free slot and returns the slot.
    mutating func add(_ reload: ReloadScheduler.PendingReload) -> Int32 {
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
}

/// The requests a pending reload serves: the first inline, more only when requests merge, so a pending
/// reload of one request allocates nothing.
///
/// Only the first ``listed`` ids are kept, and the total is counted: a widget that receives thousands of
/// pushes while its reload waits must not make every write-through and every delivery grow with them.
/// Each request's own decision names the instance and due time it merged into.
struct RequestList: Sendable {
    /// How many request ids a pending reload (and so a delivery) lists.
    static let listed = 100

    /// The listed ids: at least one.
    private(set) var ids: CompactList<RequestID>
    /// Every request served, listed or not.
    private(set) var count = 1

    init(_ first: RequestID) { ids = [first] }

    /// A stored list: the listed ids (at least one) and the total.
    init?(listed ids: [RequestID], count: Int) {
        guard !ids.isEmpty else { return nil }
        self.ids = CompactList(ids.prefix(Self.listed))
        self.count = max(count, self.ids.count)
    }

    mutating func append(_ id: RequestID) {
        if count < Self.listed { ids.append(id) }
        count += 1
    }

    /// The listed ids.
    var array: [RequestID] { Array(ids) }
}
