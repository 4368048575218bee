/// The scheduling state machine of docs/DESIGN.md ("Scheduling rules"): a value type that decides, with no
/// I/O and no clock of its own.
///
/// Inputs are reload requests (``receive(_:)``), registry changes (``register(_:device:kind:)``,
/// ``setTimeline(_:_:)``, ``remove(_:)``) and clock ticks (``tick(now:)``); outputs are decisions with
/// their reasons and the deliveries, timeline reloads and expirations that fell due. Time only moves
/// forward: each input carries its time and the machine first processes whatever fell due before it.
///
/// Per instance it keeps 40 bytes (device, budget bucket, last reload, planned reload, pending slot);
/// pending reloads live in a slot table and every due time in a min-heap, so a tick costs O(log n) per event that falls
/// due and nothing for the instances that wait.
public struct ReloadScheduler: Sendable {
    struct InstanceState: Sendable {
        /// The device, or -1 when the handle is not registered.
        var device: Int32 = -1
        /// The next instance of the same device (a ring per device, without allocations: from any of
        /// its instances the others are found without another lookup), or -1 when not registered.
        var nextInDevice: Int32 = -1
        var policy: UInt16 = 0
        /// Whether the instance is in `changed` (so it is listed once; fits in the padding).
        var isChanged = false
        /// The slot of its pending reload in `pending`, or -1 (fits in the padding too).
        var pendingSlot: Int32 = -1
        /// Budget bucket in GCRA form: the time at which the bucket is full again (rule 1).
        var bucketFullAt: Int64 = Self.never
        var lastReload: Int64 = Self.never
        /// Planned timeline reload, or `Self.none`.
        var plannedReload: Int64 = Self.none

        static let never = Int64.min / 4
        static let none = Int64.max
    }

    struct PendingReload: Sendable {
        var due: Int64
        var priority: Priority
        /// Latest expiration of the merged requests; `nil`: at least one had none.
        var expiration: Int64?
        var requests: RequestList
        var collapseID: String?
        var team: String?
        var exempt: Bool
    }

    /// The configuration the machine was made with.
    public let configuration: SchedulerConfiguration
    /// Every push type's policies, one after another: an instance keeps the index of its own.
    var policies: [SchedulingPolicy]
    /// Where each push type's policies are in `policies` (in ``PushType/allCases`` order).
    let policyIndexes: [PolicyIndex]
    /// The push type of each of `policies`.
    let policyPushTypes: [PushType]

    /// One push type's policies in ``policies``; for a type with frequent updates, their raised copies too.
    struct PolicyIndex {
        var defaultIndex: UInt16
        var byKind: [String: UInt16]
        var frequentDefault: UInt16? = nil
        var frequentByKind: [String: UInt16] = [:]
    }
    /// The Live Activities among the instances, with their content's state (few next to the widgets: kept
    /// beside the instance table rather than in it). Its room follows what it holds (``dropActivity(_:)``).
    var activities: [Int32: ActivitySnapshot] = [:]
    /// The room ``activities`` keeps however few it holds (about a megabyte).
    static let keptActivityRoom = 16_384
    var instances = InstanceTable()
    var firstInstanceOfDevice: [Int32] = []
    var pending = PendingTable()
    var timers = Timers()
    /// Whatever fell due while processing inputs, handed out by the next ``tick(now:)``.
    var released = TickOutput()
    /// The latest time processed; inputs with an earlier time are treated as happening now.
    var clock = InstanceState.never
    /// Instances whose state changed since the last tick took their snapshots (``releaseChangedStates()``;
    /// a removed instance may repeat: the flag in its state says whether it is still to be taken).
    var changed: [Int32] = []

    public init(configuration: SchedulerConfiguration = SchedulerConfiguration()) {
        self.configuration = configuration
        var policies: [SchedulingPolicy] = []
        var types: [PushType] = []
        var indexes: [PolicyIndex] = []
        for pushType in PushType.allCases {
            let set = configuration[pushType]
            var index = PolicyIndex(defaultIndex: UInt16(policies.count), byKind: [:])
            policies.append(set.defaultPolicy)
            let kinds = set.byKind.sorted(by: { $0.key < $1.key })
            for (kind, policy) in kinds {
                index.byKind[kind] = UInt16(policies.count)
                policies.append(policy)
            }
            let descriptor = pushType.descriptor
            if descriptor.frequentUpdatesFactor > 1 {
                index.frequentDefault = UInt16(policies.count)
                policies.append(descriptor.frequentPolicy(set.defaultPolicy))
                for (kind, policy) in kinds {
                    index.frequentByKind[kind] = UInt16(policies.count)
                    policies.append(descriptor.frequentPolicy(policy))
                }
            }
            types += repeatElement(pushType, count: policies.count - types.count)
            indexes.append(index)
        }
        self.policies = policies
        self.policyIndexes = indexes
        self.policyPushTypes = types
    }

    // MARK: Registry

    /// Registers an instance of `device` (a widget, or the one instance of a token of another push type),
    /// or updates its kind. The handle's budget and history are kept when it is
    /// registered again. The kind and push type choose the policy; `frequentUpdates` (an activity whose app
    /// asked for them) its raised copy.
    public mutating func register(
        _ instance: InstanceHandle, device: DeviceHandle, kind: String, pushType: PushType = .widgets, frequentUpdates: Bool = false
    ) {
        let i = Int(instance.rawValue)
        precondition(i >= 0 && device.rawValue >= 0, "handles are non-negative")
        if i >= instances.count {
            instances.grow(to: i + 1)
        }
        if Int(device.rawValue) >= firstInstanceOfDevice.count {
            firstInstanceOfDevice.append(
                contentsOf: repeatElement(-1, count: Int(device.rawValue) - firstInstanceOfDevice.count + 1)
            )
        }
        if instances[i].device != device.rawValue {
            if instances[i].device >= 0 { unlink(Int32(i)) }
            instances[i].device = device.rawValue
            let head = firstInstanceOfDevice[Int(device.rawValue)]
            if head >= 0 {
                instances[i].nextInDevice = instances[Int(head)].nextInDevice
                instances[Int(head)].nextInDevice = Int32(i)
            } else {
                instances[i].nextInDevice = Int32(i)
                firstInstanceOfDevice[Int(device.rawValue)] = Int32(i)
            }
        }
        let index = policyIndexes[pushType.ordinal]
        if frequentUpdates, let frequent = index.frequentDefault {
            instances[i].policy = index.frequentByKind[kind] ?? frequent
        } else {
            instances[i].policy = index.byKind[kind] ?? index.defaultIndex
        }
        if pushType.descriptor.mergeRule == .newestContent {
            if activities[Int32(i)] == nil { activities[Int32(i)] = ActivitySnapshot() }
        } else if !activities.isEmpty {
            dropActivity(Int32(i))
        }
    }

    /// Registers an instance as ``PushTypeDescriptor/scheduling(kind:family:)`` files it.
    public mutating func register(_ instance: InstanceHandle, device: DeviceHandle, _ kind: SchedulingKind) {
        register(instance, device: device, kind: kind.kind, pushType: kind.pushType, frequentUpdates: kind.frequentUpdates)
    }

    /// Forgets `instance`'s activity state, if it has one. A game's million activities end together: the
    /// dictionary then gives back the room they took.
    mutating func dropActivity(_ instance: Int32) {
        guard activities.removeValue(forKey: instance) != nil else { return }
        activities.giveBackSpareRoom(keeping: Self.keptActivityRoom)
    }

    /// Removes an instance (its widget was removed, or its device unregistered).
    /// - Returns: the requests of its pending reload, which will not be delivered.
    @discardableResult
    public mutating func remove(_ instance: InstanceHandle) -> [RequestID] {
        let i = instance.rawValue
        guard isRegistered(i) else { return [] }
        let dropped = removePending(i)?.requests.array ?? []
        unlink(i)
        instances[Int(i)] = InstanceState()
        dropActivity(i)
        markChanged(i)
        return dropped
    }

    /// Forgets an instance without recording anything: another gateway now schedules its device (its
    /// partition's lease moved), and the stored state is that gateway's to change. Nothing is written for
    /// it, unlike ``remove(_:)``; restoring it later needs ``register(_:device:kind:)`` and
    /// ``restore(_:_:)`` from the store.
    public mutating func forget(_ instance: InstanceHandle) {
        let i = instance.rawValue
        guard isRegistered(i) else { return }
        _ = removePending(i)
        unlink(i)
        dropActivity(i)
        // A change not yet taken is dropped with the state (the changed list skips unmarked entries).
        instances[Int(i)] = InstanceState()
    }

    /// The registered instances of `device` (none for an unknown device), in no particular order.
    public func instances(ofDevice device: DeviceHandle) -> [InstanceHandle] {
        let d = Int(device.rawValue)
        guard d >= 0, d < firstInstanceOfDevice.count, firstInstanceOfDevice[d] >= 0 else { return [] }
        let first = firstInstanceOfDevice[d]
        var found = [InstanceHandle(first)]
        var i = instances[Int(first)].nextInDevice
        while i != first && i >= 0 {
            found.append(InstanceHandle(i))
            i = instances[Int(i)].nextInDevice
        }
        return found
    }

    /// Records the instance's latest timeline; its planned reload is what rule 3 compares with.
    public mutating func setTimeline(_ instance: InstanceHandle, _ timeline: Timeline) {
        setPlannedReload(instance, timeline.plannedReload)
    }

    /// The device of a registered instance.
    public func device(of instance: InstanceHandle) -> DeviceHandle? {
        isRegistered(instance.rawValue) ? DeviceHandle(instances[Int(instance.rawValue)].device) : nil
    }

    /// The devices with at least one registered instance that `include` selects.
    public func devices(where include: (DeviceHandle) -> Bool) -> [DeviceHandle] {
        firstInstanceOfDevice.indices.compactMap { d in
            firstInstanceOfDevice[d] >= 0 && include(DeviceHandle(Int32(d))) ? DeviceHandle(Int32(d)) : nil
        }
    }

    /// Records the planned reload of the instance's latest timeline (``setTimeline(_:_:)`` with the
    /// timeline's planned reload; `nil`: none).
    public mutating func setPlannedReload(_ instance: InstanceHandle, _ plannedReload: Timestamp?) {
        let i = instance.rawValue
        guard isRegistered(i) else { return }
        let planned = plannedReload?.milliseconds ?? InstanceState.none
        instances[Int(i)].plannedReload = planned
        markChanged(i)
        if planned != InstanceState.none {
            timers.insert(.init(time: planned, instance: i, kind: .plannedReload))
        }
    }

    /// Whether the handle is a registered instance.
    public func isRegistered(_ instance: InstanceHandle) -> Bool { isRegistered(instance.rawValue) }

    func isRegistered(_ i: Int32) -> Bool {
        i >= 0 && Int(i) < instances.count && instances[Int(i)].device >= 0
    }

    private mutating func unlink(_ i: Int32) {
        let device = Int(instances[Int(i)].device)
        let next = instances[Int(i)].nextInDevice
        // The ring is short (the widgets of one device): walk it to the instance before `i`.
        var previous = i
        while instances[Int(previous)].nextInDevice != i { previous = instances[Int(previous)].nextInDevice }
        instances[Int(previous)].nextInDevice = next
        if firstInstanceOfDevice[device] == i { firstInstanceOfDevice[device] = next == i ? -1 : next }
        instances[Int(i)].nextInDevice = -1
    }

    /// Records that the durable state of `i` changed.
    mutating func markChanged(_ i: Int32) {
        guard !instances[Int(i)].isChanged else { return }
        instances[Int(i)].isChanged = true
        changed.append(i)
    }

    // MARK: Pending reloads

    /// The pending reload of the registered instance `i`, in the slot its state names.
    subscript(pending i: Int32) -> PendingReload? {
        get {
            let slot = instances[Int(i)].pendingSlot
            return slot < 0 ? nil : pending[slot]
        }
        set {
            if let newValue { setPending(i, newValue) } else { clearPending(i) }
        }
    }

    /// Makes `reload` the pending reload of `i`, in its slot or a free one.
    mutating func setPending(_ i: Int32, _ reload: __owned PendingReload) {
        let slot = instances[Int(i)].pendingSlot
        if slot >= 0 {
            pending[slot] = reload
        } else {
            instances[Int(i)].pendingSlot = pending.add(reload)
        }
    }

    /// Drops the pending reload of `i`, if any, and an activity's pending content with it.
    mutating func clearPending(_ i: Int32) {
        let slot = instances[Int(i)].pendingSlot
        guard slot >= 0 else { return }
        pending.free(slot)
        instances[Int(i)].pendingSlot = -1
        if !activities.isEmpty { activities[i]?.clearPending() }
    }

    /// Due time, priority and exemption of the pending reload of `i`, without copying the record.
    func pendingSummary(of i: Int32) -> (due: Int64, priority: Priority, exempt: Bool)? {
        let slot = instances[Int(i)].pendingSlot
        return slot < 0 ? nil : pending.summary(of: slot)
    }

    /// Removes and returns the pending reload of `i`.
    mutating func removePending(_ i: Int32) -> PendingReload? {
        let reload = self[pending: i]
        if reload != nil { self[pending: i] = nil }
        return reload
    }

    // MARK: Budget and interval (rules 1, 2, 4)
    //
    // The reads below are inlined where the scheduler's mutating steps call them (a decision, a delivery and
    // each rider): called, a non-mutating method is handed a copy of the scheduler (168 bytes, `memcpy`), one
    // for each call, 2.7% of the benchmark's instructions.

    @inline(__always)
    func policy(of i: Int32) -> SchedulingPolicy { policies[Int(instances[Int(i)].policy)] }

    /// Whether the bucket of `i` holds a token at `time`.
    @inline(__always)
    func hasToken(_ i: Int32, at time: Int64) -> Bool {
        let policy = policy(of: i)
        return instances[Int(i)].bucketFullAt - time <= Int64(policy.burst - 1) * policy.emissionInterval
    }

    /// When the bucket of `i` next holds a token (at or after `time`).
    @inline(__always)
    func tokenTime(_ i: Int32, at time: Int64) -> Int64 {
        let policy = policy(of: i)
        return max(time, instances[Int(i)].bucketFullAt - Int64(policy.burst - 1) * policy.emissionInterval)
    }

    mutating func charge(_ i: Int32, at time: Int64) {
        let interval = policy(of: i).emissionInterval
        instances[Int(i)].bucketFullAt = max(instances[Int(i)].bucketFullAt, time) + interval
    }

    /// What bounds the earliest reload time (rule 4).
    enum Bound { case now, interval, budget }

    /// The earliest time `i` may reload: max(now, last reload + minimum interval, time of the next token).
    /// Exempt reloads skip the budget, not the interval.
    @inline(__always)
    func earliest(_ i: Int32, at now: Int64, exempt: Bool) -> (time: Int64, bound: Bound) {
        var time = now
        var bound = Bound.now
        let state = instances[Int(i)]
        let intervalEnd = state.lastReload + policy(of: i).minimumInterval * 1000
        if intervalEnd > time {
            time = intervalEnd
            bound = .interval
        }
        if !exempt {
            let token = tokenTime(i, at: now)
            if token > time {
                time = token
                bound = .budget
            }
        }
        return (time, bound)
    }

    /// Whether `i` may reload at `time`.
    @inline(__always)
    func isAllowed(_ i: Int32, at time: Int64, exempt: Bool) -> Bool {
        earliest(i, at: time, exempt: exempt).time <= time
    }

    // MARK: Introspection

    /// The time of the next event, if any: when to call ``tick(now:)`` at the latest.
    public var nextWakeUp: Timestamp? { timers.top.map { Timestamp(milliseconds: $0.time) } }

    /// The number of pending reloads.
    public var pendingCount: Int { pending.count }

    /// How much the machine holds: what depends on the instances and their pending reloads, and on
    /// nothing else (a test runs many requests over a fixed set of instances and checks none grows).
    public struct Footprint: Sendable, Equatable {
        public var instances: Int
        public var pendingSlots: Int
        public var timers: Int
        public var changed: Int
        public var released: Int
    }

    public var footprint: Footprint {
        Footprint(
            instances: instances.count, pendingSlots: pending.slotCount, timers: timers.count, changed: changed.count,
            released: released.deliveries.count + released.timelineReloads.count + released.expired.count + released.instanceStates.count
        )
    }

    /// The pending reload of an instance: its due time, priority and requests.
    public func pendingReload(of instance: InstanceHandle) -> (due: Timestamp, priority: Priority, requests: [RequestID])? {
        guard isRegistered(instance.rawValue) else { return nil }
        return self[pending: instance.rawValue].map { (Timestamp(milliseconds: $0.due), $0.priority, $0.requests.array) }
    }

    /// The content state of a registered Live Activity (`nil` for other instances).
    public func activity(of instance: InstanceHandle) -> ActivitySnapshot? {
        isRegistered(instance.rawValue) ? activities[instance.rawValue] : nil
    }

    /// The last reload of an instance (delivery or timeline), if any.
    public func lastReload(of instance: InstanceHandle) -> Timestamp? {
        guard isRegistered(instance.rawValue) else { return nil }
        let last = instances[Int(instance.rawValue)].lastReload
        return last == InstanceState.never ? nil : Timestamp(milliseconds: last)
    }

    /// Whole tokens in the instance's bucket at `time`.
    public func tokens(of instance: InstanceHandle, at time: Timestamp) -> Int {
        let i = instance.rawValue
        guard isRegistered(i) else { return 0 }
        let policy = policy(of: i)
        let debt = max(0, instances[Int(i)].bucketFullAt - time.milliseconds)
        return policy.burst - Int((debt + policy.emissionInterval - 1) / policy.emissionInterval)
    }
}
