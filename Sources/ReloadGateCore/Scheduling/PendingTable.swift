/// The pending reloads (at most one per instance), in slots found through a per-instance index:
/// a dictionary's hashing and probing, measured at a sixth of the scheduler's time, become two array
/// reads. Freed slots are reused.
struct PendingTable: Sendable {
    private var slotOfInstance: [Int32] = []
    private var slots: [ReloadScheduler.PendingReload] = []
    private var freeSlots: [Int32] = []

    /// The number of pending reloads.
    private(set) var count = 0

    subscript(instance: Int32) -> ReloadScheduler.PendingReload? {
        get {
            guard Int(instance) < slotOfInstance.count else { return nil }
            let slot = slotOfInstance[Int(instance)]
            return slot < 0 ? nil : slots[Int(slot)]
        }
        set {
            if Int(instance) >= slotOfInstance.count {
                guard newValue != nil else { return }
                slotOfInstance.append(contentsOf: repeatElement(-1, count: Int(instance) - slotOfInstance.count + 1))
            }
            let slot = slotOfInstance[Int(instance)]
            switch (slot >= 0, newValue) {
            case (true, let value?):
                slots[Int(slot)] = value
            case (true, nil):
                freeSlots.append(slot)
                slotOfInstance[Int(instance)] = -1
                count -= 1
            case (false, let value?):
                if let reused = freeSlots.popLast() {
                    slots[Int(reused)] = value
                    slotOfInstance[Int(instance)] = reused
                } else {
                    slotOfInstance[Int(instance)] = Int32(slots.count)
                    slots.append(value)
                }
                count += 1
            case (false, nil):
                break
            }
        }
    }

    /// The due time, priority and exemption of the pending reload of `instance`, read in place: the
    /// whole record (with its request list and strings) is copied only when it is needed.
    func summary(of instance: Int32) -> (due: Int64, priority: Priority, exempt: Bool)? {
        guard Int(instance) < slotOfInstance.count else { return nil }
        let slot = Int(slotOfInstance[Int(instance)])
        guard slot >= 0 else { return nil }
        return (slots[slot].due, slots[slot].priority, slots[slot].exempt)
    }

    /// Removes and returns the pending reload of `instance`.
    mutating func removeValue(forKey instance: Int32) -> ReloadScheduler.PendingReload? {
        let value = self[instance]
        if value != nil { self[instance] = nil }
        return value
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

    private var first: RequestID
    private var rest: [RequestID] = []
    /// Every request served, listed or not.
    private(set) var count = 1

    init(_ first: RequestID) { self.first = first }

    /// A stored list: the listed ids (at least one) and the total.
    init?(listed ids: [RequestID], count: Int) {
        guard let first = ids.first else { return nil }
        self.first = first
        self.rest = Array(ids.dropFirst().prefix(Self.listed - 1))
        self.count = max(count, 1 + rest.count)
    }

    mutating func append(_ id: RequestID) {
        if count < Self.listed { rest.append(id) }
        count += 1
    }

    /// The listed ids.
    var array: [RequestID] { [first] + rest }

    /// Appends the listed ids to `target` without building an intermediate array.
    func append(to target: inout [RequestID]) {
        target.append(first)
        if !rest.isEmpty { target.append(contentsOf: rest) }
    }
}
