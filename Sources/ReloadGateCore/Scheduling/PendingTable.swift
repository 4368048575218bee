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

    /// Removes and returns the pending reload of `instance`.
    mutating func removeValue(forKey instance: Int32) -> ReloadScheduler.PendingReload? {
        let value = self[instance]
        if value != nil { self[instance] = nil }
        return value
    }
}

/// The requests a pending reload serves: the first inline, more only when requests merge, so a pending
/// reload of one request allocates nothing.
struct RequestList: Sendable {
    private var first: RequestID
    private var rest: [RequestID] = []

    init(_ first: RequestID) { self.first = first }

    var count: Int { 1 + rest.count }

    mutating func append(_ id: RequestID) { rest.append(id) }

    var array: [RequestID] { [first] + rest }

    /// Appends the requests to `target` without building an intermediate array.
    func append(to target: inout [RequestID]) {
        target.append(first)
        if !rest.isEmpty { target.append(contentsOf: rest) }
    }
}
