/// The durable part of one instance's scheduling state: what the store writes through after every change
/// and hands back on start so the timers are rebuilt (docs/DESIGN.md, Durability).
public struct InstanceSnapshot: Hashable, Sendable {
    /// The budget bucket (GCRA: when it is full again), in milliseconds; `nil` while full since ever.
    public var bucketFullAt: Int64?
    public var lastReload: Timestamp?
    public var plannedReload: Timestamp?
    public var pending: PendingSnapshot?
    /// A Live Activity's content state (``ActivitySnapshot``); `nil` for other instances.
    public var activity: ActivitySnapshot?

    public init(
        bucketFullAt: Int64?, lastReload: Timestamp?, plannedReload: Timestamp?, pending: PendingSnapshot?, activity: ActivitySnapshot? = nil
    ) {
        self.activity = activity
        self.bucketFullAt = bucketFullAt
        self.lastReload = lastReload
        self.plannedReload = plannedReload
        self.pending = pending
    }
}

/// A pending reload as stored.
public struct PendingSnapshot: Hashable, Sendable {
    public var due: Timestamp
    public var priority: Priority
    public var expiration: Timestamp?
    /// The listed requests (the first 100).
    public var requests: [RequestID]
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
        self.requestCount = requestCount ?? requests.count
        self.due = due
        self.priority = priority
        self.expiration = expiration
        self.requests = requests
        self.collapseID = collapseID
        self.team = team
        self.exempt = exempt
    }
}

extension ReloadScheduler {
    /// The instances whose state changed since the last call, each once, in the order they first
    /// changed; ``tick(now:)`` returns their snapshots.
    mutating func takeChangedInstances() -> [InstanceHandle] {
        var taken: [InstanceHandle] = []
        taken.reserveCapacity(changed.count)
        for i in changed where instances[Int(i)].isChanged {
            instances[Int(i)].isChanged = false
            taken.append(InstanceHandle(i))
        }
        changed.removeAll(keepingCapacity: true)
        return taken
    }

    /// The durable state of a registered instance.
    public func snapshot(of instance: InstanceHandle) -> InstanceSnapshot? {
        let i = instance.rawValue
        guard isRegistered(i) else { return nil }
        let state = instances[Int(i)]
        return InstanceSnapshot(
            bucketFullAt: state.bucketFullAt == InstanceState.never ? nil : state.bucketFullAt,
            lastReload: state.lastReload == InstanceState.never ? nil : Timestamp(milliseconds: state.lastReload),
            plannedReload: state.plannedReload == InstanceState.none ? nil : Timestamp(milliseconds: state.plannedReload),
            pending: self[pending: i].map {
                PendingSnapshot(
                    due: Timestamp(milliseconds: $0.due),
                    priority: $0.priority,
                    expiration: $0.expiration.map(Timestamp.init(milliseconds:)),
                    requests: $0.requests.array,
                    requestCount: $0.requests.count,
                    collapseID: $0.collapseID,
                    team: $0.team,
                    exempt: $0.exempt
                )
            },
            activity: activities.isEmpty ? nil : activities[i]
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
        if let stored = snapshot.pending, let requests = RequestList(listed: stored.requests, count: stored.requestCount) {
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
