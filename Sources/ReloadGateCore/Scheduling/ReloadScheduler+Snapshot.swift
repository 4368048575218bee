/// The durable part of one instance's scheduling state: what the store writes through after every change
/// and hands back on start so the timers are rebuilt (docs/DESIGN.md, Durability).
public struct InstanceSnapshot: Hashable, Sendable {
    /// The budget bucket (GCRA: when it is full again), in milliseconds; `nil` while full since ever.
    public var bucketFullAt: Int64?
    public var lastReload: Timestamp?
    public var plannedReload: Timestamp?
    /// The pending reload and an activity's state, boxed: most snapshots have neither (every instance a
    /// delivery reloaded is snapshotted at the next tick, and most have nothing pending after it), so a
    /// snapshot is copied as three numbers and a reference; inline, both made a record of 226 bytes that
    /// every copy goes through field by field (decision 0088).
    private var rare: Rare?

    private final class Rare: Sendable {
        let pending: PendingSnapshot?
        let activity: ActivitySnapshot?

        // For the public initializer and setters (the stores' restore, tests). Both values are taken owned;
        // the optimizer still copies the pending reload into the box and destroys the original, which is why
        // the scheduler's own snapshots use the initializer below.
        init(pending: consuming PendingSnapshot?, activity: consuming ActivitySnapshot?) {
            self.pending = pending
            self.activity = activity
        }

        /// The pending reload in `slot` of `table`, built in the box from the record's fields. A value built
        /// apart and handed over is copied into the box (its list and strings retained) and the original
        /// destroyed (decision 0088).
        init(slot: Int32, of table: borrowing PendingTable, activity: consuming ActivitySnapshot?) {
            pending = table.snapshot(of: slot)
            self.activity = activity
        }

        static func box(_ pending: consuming PendingSnapshot?, _ activity: consuming ActivitySnapshot?) -> Rare? {
            pending == nil && activity == nil ? nil : Rare(pending: pending, activity: activity)
        }
    }

    public var pending: PendingSnapshot? {
        get { rare?.pending }
        set { rare = Rare.box(newValue, activity) }
    }

    /// A Live Activity's content state (``ActivitySnapshot``); `nil` for other instances.
    public var activity: ActivitySnapshot? {
        get { rare?.activity }
        set { rare = Rare.box(pending, newValue) }
    }

    public init(
        bucketFullAt: Int64?, lastReload: Timestamp?, plannedReload: Timestamp?, pending: consuming PendingSnapshot?,
        activity: consuming ActivitySnapshot? = nil
    ) {
        self.init(bucketFullAt: bucketFullAt, lastReload: lastReload, plannedReload: plannedReload)
        rare = Rare.box(pending, activity)
    }

    /// A snapshot with the pending reload in `slot` of `table`, built in its box.
    init(
        bucketFullAt: Int64?, lastReload: Timestamp?, plannedReload: Timestamp?, pendingSlot slot: Int32, of table: borrowing PendingTable,
        activity: consuming ActivitySnapshot?
    ) {
        self.init(bucketFullAt: bucketFullAt, lastReload: lastReload, plannedReload: plannedReload)
        rare = Rare(slot: slot, of: table, activity: activity)
    }

    /// A snapshot with neither a pending reload nor an activity's state: nothing boxed, nothing checked.
    init(bucketFullAt: Int64?, lastReload: Timestamp?, plannedReload: Timestamp?) {
        self.bucketFullAt = bucketFullAt
        self.lastReload = lastReload
        self.plannedReload = plannedReload
        self.rare = nil
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.bucketFullAt == b.bucketFullAt && a.lastReload == b.lastReload && a.plannedReload == b.plannedReload
            && a.pending == b.pending && a.activity == b.activity
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bucketFullAt)
        hasher.combine(lastReload)
        hasher.combine(plannedReload)
        hasher.combine(pending)
        hasher.combine(activity)
    }
}

/// A pending reload as stored.
public struct PendingSnapshot: Hashable, Sendable {
    public var due: Timestamp
    public var priority: Priority
    public var expiration: Timestamp?
    /// The listed requests as the scheduler keeps them (``RequestList``: the first id and the differences
    /// after it), `nil` for none: a snapshot shares the scheduler's bytes instead of building an array, since
    /// every changed instance is snapshotted at every tick and most lists are not written (their first id
    /// and length say the stored one is the same).
    var list: RequestList?
    /// How many requests it serves in all.
    public var requestCount: Int
    public var collapseID: String?
    public var team: String?
    public var exempt: Bool

    public init(
        due: Timestamp,
        priority: Priority,
        expiration: Timestamp?,
        requests: [RequestID],
        requestCount: Int? = nil,
        collapseID: String?,
        team: String?,
        exempt: Bool
    ) {
        self.init(
            due: due, priority: priority, expiration: expiration, list: RequestList(listed: requests, count: 0),
            requestCount: requestCount ?? requests.count, collapseID: collapseID, team: team, exempt: exempt
        )
    }

    init(
        due: Timestamp, priority: Priority, expiration: Timestamp?, list: RequestList?, requestCount: Int, collapseID: String?,
        team: String?, exempt: Bool
    ) {
        self.due = due
        self.priority = priority
        self.expiration = expiration
        self.list = list
        self.requestCount = requestCount
        self.collapseID = collapseID
        self.team = team
        self.exempt = exempt
    }

    /// The listed requests: the first ``RequestList/listed`` (100) of them.
    public var requests: [RequestID] {
        get { list?.array ?? [] }
        set { list = RequestList(listed: newValue, count: 0) }
    }

    /// The first listed request, without listing the others.
    public var firstRequest: RequestID? { list?.firstID }

    /// How many requests are listed (at most 100), without listing them.
    public var listedCount: Int { list?.listedCount ?? 0 }

    /// Calls `body` with each listed request, in order, without an array.
    public func forEachRequest(_ body: (RequestID) -> Void) { list?.forEach(body) }

    public static func == (a: Self, b: Self) -> Bool {
        a.due == b.due && a.priority == b.priority && a.expiration == b.expiration && a.requestCount == b.requestCount
            && a.collapseID == b.collapseID && a.team == b.team && a.exempt == b.exempt && a.requests == b.requests
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(due)
        hasher.combine(priority)
        hasher.combine(expiration)
        hasher.combine(requests)
        hasher.combine(requestCount)
        hasher.combine(collapseID)
        hasher.combine(team)
        hasher.combine(exempt)
    }
}

extension ReloadScheduler {
    /// Appends the snapshot of every instance whose state changed since the last call to the output, each
    /// once, in the order they first changed (what ``tick(now:)`` returns), and starts the next list.
    /// Written straight into the output, without a list of the instances first (one more array and one
    /// more pass a tick).
    mutating func releaseChangedStates() {
        released.instanceStates.reserveCapacity(changed.count)
        for k in changed.indices {
            // The state eight places on, asked for while this one is written (decision 0115).
            if k + 8 < changed.count { instances.prefetch(Int(changed[k + 8])) }
            let i = changed[k]
            guard instances[Int(i)].isChanged else { continue }
            instances[Int(i)].isChanged = false
            released.instanceStates.append(InstanceWrite(instance: InstanceHandle(i), snapshot: snapshot(of: i)))
        }
        changed.removeAll(keepingCapacity: true)
    }

    /// The durable state of a registered instance.
    public func snapshot(of instance: InstanceHandle) -> InstanceSnapshot? { snapshot(of: instance.rawValue) }

    /// ``snapshot(of:)``, inlined where ``tick(now:)`` writes every changed instance's snapshot into its
    /// output, so that the record is built there rather than returned and copied.
    @inline(__always)
    func snapshot(of i: Int32) -> InstanceSnapshot? {
        guard isRegistered(i) else { return nil }
        let state = instances[Int(i)]
        let bucketFullAt = state.bucketFullAt == InstanceState.never ? nil : state.bucketFullAt
        let lastReload = state.lastReload == InstanceState.never ? nil : Timestamp(milliseconds: state.lastReload)
        let plannedReload = state.plannedReload == InstanceState.none ? nil : Timestamp(milliseconds: state.plannedReload)
        // Most changed instances have nothing pending (a delivery just took it) and are not activities:
        // nothing boxed, and the activities not looked up.
        guard state.pendingSlot >= 0 || !activities.isEmpty && activities[i] != nil else {
            return InstanceSnapshot(bucketFullAt: bucketFullAt, lastReload: lastReload, plannedReload: plannedReload)
        }
        let activity = activities.isEmpty ? nil : activities[i]
        guard state.pendingSlot >= 0 else {
            return InstanceSnapshot(bucketFullAt: bucketFullAt, lastReload: lastReload, plannedReload: plannedReload, pending: nil, activity: activity)
        }
        return InstanceSnapshot(
            bucketFullAt: bucketFullAt, lastReload: lastReload, plannedReload: plannedReload, pendingSlot: state.pendingSlot, of: pending,
            activity: activity
        )
    }

    /// Puts a registered instance back in a stored state, with its timers. Used on start, before any
    /// input; restoring does not count as a change.
    public mutating func restore(_ instance: InstanceHandle, _ snapshot: InstanceSnapshot) {
        let i = instance.rawValue
        guard isRegistered(i) else { return }
        instances[Int(i)].bucketFullAt = snapshot.bucketFullAt ?? InstanceState.never
        instances[Int(i)].lastReload = snapshot.lastReload?.milliseconds ?? InstanceState.never
        instances[Int(i)].plannedReload = snapshot.plannedReload?.milliseconds ?? InstanceState.none
        if let planned = snapshot.plannedReload {
            timers.insert(.init(time: planned.milliseconds, instance: i, kind: .plannedReload))
        }
        if let stored = snapshot.pending, var requests = stored.list {
            requests.setCount(stored.requestCount)
            self[pending: i] = PendingReload(
                due: stored.due.milliseconds,
                priority: stored.priority,
                expiration: stored.expiration?.milliseconds,
                requests: requests,
                collapseID: stored.collapseID,
                team: stored.team,
                exempt: stored.exempt
            )
            timers.insert(.init(time: stored.due.milliseconds, instance: i, kind: .pendingReload))
        } else {
            self[pending: i] = nil
        }
        // After the pending reload: clearing it clears an activity's pending content.
        if activities[i] != nil, let activity = snapshot.activity { activities[i] = activity }
    }
}
