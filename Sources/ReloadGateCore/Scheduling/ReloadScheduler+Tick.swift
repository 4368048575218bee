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
        defer { released = TickOutput() }
        // Stable: at one time and priority they keep the order they fell due in. (Most ticks release
        // them in order already: checked first, sorted only when not.)
        let inOrder = zip(released.deliveries, released.deliveries.dropFirst()).allSatisfy { a, b in
            a.at < b.at || (a.at == b.at && a.priority.rawValue >= b.priority.rawValue)
        }
        if !inOrder {
            released.deliveries = released.deliveries.enumerated().sorted { a, b in
                if a.element.at != b.element.at { return a.element.at < b.element.at }
                if a.element.priority != b.element.priority { return a.element.priority.rawValue > b.element.priority.rawValue }
                return a.offset < b.offset
            }.map(\.element)
        }
        guard withStates else {
            for i in changed { instances[Int(i)].isChanged = false }
            changed.removeAll(keepingCapacity: true)
            return released
        }
        let changed = takeChangedInstances()
        released.instanceStates.reserveCapacity(changed.count)
        for instance in changed {
            released.instanceStates.append(InstanceWrite(instance: instance, snapshot: snapshot(of: instance)))
        }
        return released
    }

    /// Processes the timers up to `time` (never backwards) and returns the time to decide at.
    @discardableResult
    mutating func advance(to time: Int64) -> Int64 {
        let now = max(time, clock)
        while let top = timers.top, top.time <= now {
            _ = timers.popTop()
            clock = max(clock, top.time)
            switch top.kind {
            case .plannedReload:
                guard isRegistered(top.instance), instances[Int(top.instance)].plannedReload == top.time else { continue }
                timelineReload(top.instance, at: top.time)
            case .pendingReload:
                // Most popped timers of a busy instance are stale (its due time moved): check in place.
                guard pendingSummary(of: top.instance)?.due == top.time, let reload = self[pending: top.instance] else { continue }
                deliver(from: top.instance, reload, at: top.time)
            }
        }
        clock = now
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
    mutating func deliver(from trigger: Int32, _ reload: PendingReload, at time: Int64, overriding: Set<Int32> = []) {
        // A timeline reload since scheduling may have moved the earliest time (rules 2 and 4).
        let earliest = overriding.contains(trigger) ? time : earliest(trigger, at: time, exempt: reload.exempt).time
        if earliest > time {
            markChanged(trigger)
            // Rule 7: too late for every request it serves (now-or-never ones: it cannot go now).
            if let expiration = reload.expiration, earliest > Timestamp(milliseconds: expiration).latestRelease(decidedAt: time) {
                self[pending: trigger] = nil
                released.expired.append(
                    ExpiredReload(
                        instance: InstanceHandle(trigger),
                        requests: reload.requests.array,
                        reason: .expired(earliest: Timestamp(milliseconds: earliest), expiration: Timestamp(milliseconds: expiration))
                    )
                )
            } else {
                self[pending: trigger]?.due = earliest
                timers.insert(.init(time: earliest, instance: trigger, kind: .pendingReload))
            }
            return
        }

        let window = policy(of: trigger).coalescingWindow * 1000
        var delivery = Delivery(
            device: DeviceHandle(instances[Int(trigger)].device),
            at: Timestamp(milliseconds: time),
            reloaded: [],
            requests: [],
            priority: .background,
            expiration: nil
        )
        var latestExpiration = Int64.min
        var unlimited = false
        func add(_ i: Int32, _ member: PendingReload) {
            let activity = activities.isEmpty ? nil : activities[i]
            self[pending: i] = nil
            markChanged(i)
            let charged = !member.exempt && hasToken(i, at: time)
            if charged { charge(i, at: time) }
            instances[Int(i)].lastReload = time
            if delivery.reloaded.isEmpty {
                member.requests.forEach { delivery.requests.append($0) }
                delivery.requestCount += member.requests.count
            } else {
                // A request that targeted several widgets of the device is in each of their lists: the
                // push serves it once.
                var repeated = 0
                member.requests.forEach { id in
                    if delivery.requests.contains(id) { repeated += 1 } else { delivery.requests.append(id) }
                }
                delivery.requestCount += member.requests.count - repeated
            }
            if var activity, let content = activity.content {
                // The delivery carries the newest content and alert: their requests are listed whatever
                // the list's length, so that the merge at delivery (`ActivityPayload.merged`) finds them.
                for winner in [content, activity.alert].compactMap(\.self) where !delivery.requests.contains(winner.request) {
                    delivery.requests.append(winner.request)
                }
                activity.delivered = max(activity.delivered ?? content, content)
                activity.ended = activity.ended || activity.ending
                activity.clearPending()
                activities[i] = activity
            }
            delivery.reloaded.append(.init(instance: InstanceHandle(i), charged: charged))
            delivery.priority = max(delivery.priority, member.priority)
            if let expiration = member.expiration {
                latestExpiration = max(latestExpiration, expiration)
            } else {
                unlimited = true
            }
        }
        add(trigger, reload)
        var other = instances[Int(trigger)].nextInDevice
        while other != trigger {
            if let rider = pendingSummary(of: other),
                overriding.contains(other)
                    || (rider.due <= time + window || rider.priority == .background) && isAllowed(other, at: time, exempt: rider.exempt),
                let reload = self[pending: other]
            {
                add(other, reload)
            }
            other = instances[Int(other)].nextInDevice
        }
        delivery.expiration = unlimited ? nil : Timestamp(milliseconds: latestExpiration)
        released.deliveries.append(delivery)
    }
}
