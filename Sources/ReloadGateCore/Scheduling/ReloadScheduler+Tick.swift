extension ReloadScheduler {
    /// Processes everything due at or before `now` and returns it: deliveries (rule 8), timeline reloads
    /// (rule 3), pending reloads that expired while waiting (rule 7), and the instance states to write
    /// through.
    ///
    /// Deliveries come in the order they should leave: by due time, and at one due time (a herd: many
    /// timelines with the same `after` date, a flush) the highest priority first; the delivery worker
    /// sends them in that order at the upstream's pace.
    public mutating func tick(now: Timestamp) -> TickOutput {
        tick(now: now, withStates: true)
    }

    /// ``tick(now:)`` without the instance states: for a caller that writes nothing through (the what-if
    /// simulator), which would otherwise pay for a snapshot of every changed instance.
    public mutating func release(now: Timestamp) -> TickOutput {
        tick(now: now, withStates: false)
    }

    private mutating func tick(now: Timestamp, withStates: Bool) -> TickOutput {
        advance(to: now.milliseconds)
        defer {
            // The next tick's deliveries start with room for as many as this one released and a quarter
            // more, up to a bound: grown from empty, a tick of a thousand deliveries moved them through ten
            // reallocations, and with room for exactly as many, every tick that released more than the one
            // before moved them once.
            let count = released.deliveries.count
            let room = min(count + count / 4, Self.deliveryRoom)
            released = TickOutput()
            released.deliveries.reserveCapacity(room)
        }
        // Stable: at one time and priority they keep the order they fell due in.
        Self.putInReleaseOrder(&released.deliveries)
        guard withStates else {
            for i in changed { instances[Int(i)].isChanged = false }
            changed.removeAll(keepingCapacity: true)
            return released
        }
        releaseChangedStates()
        return released
    }

    /// The most deliveries the next tick's output has room for before its first: what is held between ticks
    /// stays small (a few hundred kilobytes); a larger tick grows its array as it goes.
    static let deliveryRoom = 4096

    /// Puts the deliveries in release order in place: by due time, at one time the highest priority first,
    /// otherwise in the order they fell due.
    ///
    /// The timers fall due in time order, so a tick's deliveries are by due time already, and out of order
    /// only where several of one millisecond differ in priority (in the scheduler benchmark, 7 of 10 ticks
    /// of about 900 deliveries, each with 3-23 such pairs). Each delivery out of place is moved back past
    /// the ones it precedes (a stable insertion sort by moves, nothing retained or copied): about one
    /// comparison a delivery. A herd of one time with its priorities interleaved would make that quadratic,
    /// so past a bound of moves the rest is sorted by ``inReleaseOrder(_:)``.
    static func putInReleaseOrder(_ deliveries: inout [Delivery]) {
        let inOrder = deliveries.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            func precedes(_ a: Int, _ b: Int) -> Bool { leavesBefore(base[a].at, base[a].priority, base[b].at, base[b].priority) }
            var moves = 4 * buffer.count + 64
            for k in buffer.indices.dropFirst() where precedes(k, k - 1) {
                var place = k - 1
                while place > 0, precedes(k, place - 1) { place -= 1 }
                // Each insertion is whole before the bound is checked again: the buffer always holds every
                // delivery once.
                guard k - place <= moves else { return false }
                moves -= k - place
                let moving = (base + k).move()
                (base + place + 1).moveInitialize(from: base + place, count: k - place)
                (base + place).initialize(to: moving)
            }
            return true
        }
        // A stable sort of the partly ordered deliveries is the stable sort of the deliveries as released.
        if !inOrder { deliveries = inReleaseOrder(deliveries) }
    }

    /// The deliveries by due time, at one time the highest priority first, otherwise in the order they fell
    /// due: their positions are sorted, so that each delivery moves once rather than at every step.
    static func inReleaseOrder(_ deliveries: [Delivery]) -> [Delivery] {
        let order = deliveries.indices.sorted { a, b in
            let (x, y) = ((deliveries[a].at, deliveries[a].priority), (deliveries[b].at, deliveries[b].priority))
            return leavesBefore(x.0, x.1, y.0, y.1) || !leavesBefore(y.0, y.1, x.0, x.1) && a < b
        }
        return order.map { deliveries[$0] }
    }

    /// The release order of two deliveries, by their due times and priorities: the earlier first, and at
    /// one time the higher priority. Deliveries neither of which leaves before the other keep the order
    /// they fell due in.
    @inline(__always)
    static func leavesBefore(_ at: Timestamp, _ priority: Priority, _ otherAt: Timestamp, _ otherPriority: Priority) -> Bool {
        at < otherAt || at == otherAt && priority.rawValue > otherPriority.rawValue
    }

    /// Processes the timers up to `time` (never backwards) and returns the time to decide at.
    @discardableResult
    mutating func advance(to time: Int64) -> Int64 {
        let now = max(time, clock)
        while let top = timers.popTop(atOrBefore: now) {
            if let next = timers.top { instances.prefetch(Int(next.instance)) }
            clock = max(clock, top.time)
            switch top.kind {
            case .plannedReload:
                guard isRegistered(top.instance), instances[Int(top.instance)].plannedReload == top.time else { continue }
                timelineReload(top.instance, at: top.time)
            case .pendingReload:
                // Most popped timers of a busy instance are stale (its due time moved): check in place.
                guard pendingSummary(of: top.instance)?.due == top.time else { continue }
                deliver(from: top.instance, at: top.time)
            }
        }
        clock = now
        if let next = timers.top { instances.prefetch(Int(next.instance)) }
        return now
    }

    /// Rule 3: the planned reload happened; it is recorded (and charged) like one on the device, and it
    /// serves the instance's pending reload, if any.
    private mutating func timelineReload(_ i: Int32, at time: Int64) {
        let charged = hasToken(i, at: time)
        if charged { charge(i, at: time) }
        instances[Int(i)].lastReload = max(instances[Int(i)].lastReload, time)
        instances[Int(i)].plannedReload = InstanceState.none
        markChanged(i)
        let served = removePending(i)?.requests.array ?? []
        released.timelineReloads.append(
            TimelineReload(instance: InstanceHandle(i), at: Timestamp(milliseconds: time), charged: charged, servedRequests: served)
        )
    }

    /// Rule 8: the first pending reload of a device fell due; every other pending reload of the device due
    /// within the coalescing window (or of priority 1) that is allowed now rides along. `overriding`: the
    /// instances of the operator's `flush --ignore-budget`, which go now (all in this one push) whatever
    /// the interval and budget say.
    mutating func deliver(from trigger: Int32, at time: Int64, overriding: Set<Int32> = []) {
        let (exempt, expiration) = pending.exemptionAndExpiration(of: instances[Int(trigger)].pendingSlot)
        // A timeline reload since scheduling may have moved the earliest time (rules 2 and 4).
        let earliest = overriding.contains(trigger) ? time : earliest(trigger, at: time, exempt: exempt).time
        if earliest > time {
            markChanged(trigger)
            // Rule 7: too late for every request it serves (now-or-never ones: it cannot go now).
            if let expiration, earliest > Timestamp(milliseconds: expiration).latestRelease(decidedAt: time) {
                let requests = removePending(trigger)?.requests.array ?? []
                released.expired.append(
                    ExpiredReload(
                        instance: InstanceHandle(trigger),
                        requests: requests,
                        reason: .expired(earliest: Timestamp(milliseconds: earliest), expiration: Timestamp(milliseconds: expiration))
                    )
                )
            } else {
                pending[instances[Int(trigger)].pendingSlot].due = earliest
                timers.insert(.init(time: earliest, instance: trigger, kind: .pendingReload))
            }
            return
        }

        let window = policy(of: trigger).coalescingWindow * 1000
        // Built in its place in the output, each rider added there: a delivery built apart would be copied
        // in with its lists.
        let k = released.deliveries.count
        released.deliveries.append(
            Delivery(
                device: DeviceHandle(instances[Int(trigger)].device),
                at: Timestamp(milliseconds: time),
                reloaded: [],
                requests: [],
                priority: .background,
                expiration: nil
            )
        )
        var latestExpiration = Int64.min
        var unlimited = false
        var rider = trigger
        repeat {
            let slot = instances[Int(rider)].pendingSlot
            if slot >= 0 {
                let summary = pending.summary(of: slot)
                if rider == trigger || overriding.contains(rider)
                    || (summary.due <= time + window || summary.priority == .background)
                        && isAllowed(rider, at: time, exempt: summary.exempt)
                {
                    if let expiration = ride(rider, at: time, into: k) {
                        latestExpiration = max(latestExpiration, expiration)
                    } else {
                        unlimited = true
                    }
                }
            }
            rider = instances[Int(rider)].nextInDevice
        } while rider != trigger
        released.deliveries[k].expiration = unlimited ? nil : Timestamp(milliseconds: latestExpiration)
    }

    /// Adds the pending reload of `i` to the delivery at `k` of the output: its requests (once each), its
    /// priority, its charge; the reload is no longer pending.
    /// - Returns: the reload's expiration; `nil` when it had none.
    private mutating func ride(_ i: Int32, at time: Int64, into k: Int) -> Int64? {
        let slot = instances[Int(i)].pendingSlot
        let (exempt, expiration) = pending.exemptionAndExpiration(of: slot)
        let priority = pending.summary(of: slot).priority
        let requests = pending[slot].requests
        let activity = activities.isEmpty ? nil : activities[i]
        clearPending(i)
        markChanged(i)
        let charged = !exempt && hasToken(i, at: time)
        if charged { charge(i, at: time) }
        instances[Int(i)].lastReload = time
        if released.deliveries[k].reloaded.isEmpty {
            requests.forEach { released.deliveries[k].requests.append($0) }
            released.deliveries[k].requestCount += requests.count
        } else {
            // A request that targeted several widgets of the device is in each of their lists: the
            // push serves it once.
            var repeated = 0
            requests.forEach { id in
                if released.deliveries[k].requests.contains(id) { repeated += 1 } else { released.deliveries[k].requests.append(id) }
            }
            released.deliveries[k].requestCount += requests.count - repeated
        }
        if var activity, let content = activity.content {
            // The delivery carries the newest content and alert: their requests are listed whatever
            // the list's length, so that the merge at delivery (`ActivityPayload.merged`) finds them.
            for winner in [content, activity.alert].compactMap(\.self) where !released.deliveries[k].requests.contains(winner.request) {
                released.deliveries[k].requests.append(winner.request)
            }
            activity.delivered = max(activity.delivered ?? content, content)
            activity.ended = activity.ended || activity.ending
            activity.clearPending()
            activities[i] = activity
        }
        released.deliveries[k].reloaded.append(.init(instance: InstanceHandle(i), charged: charged))
        released.deliveries[k].priority = max(released.deliveries[k].priority, priority)
        return expiration
    }
}
