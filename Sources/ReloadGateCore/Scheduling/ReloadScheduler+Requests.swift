extension ReloadScheduler {
    /// Asks the memory system for the states of `targets` (the first ``prefetchLimit``) before requests
    /// for them are decided: with a million instances nearly every decision's first read of its state
    /// misses the caches, and misses asked for together overlap where, one decision after the other, each
    /// waits for the last (decision 0115). Changes no state; a handle out of range is passed over.
    public func prefetch(_ targets: [InstanceHandle]) {
        for target in targets.prefix(Self.prefetchLimit) { instances.prefetch(Int(target.rawValue)) }
    }

    /// At most this many states asked for at once: two lines each fill about half of a core's 1 MiB
    /// second-level cache, where asking for more would push out the first before they are read.
    public static var prefetchLimit: Int { 4_096 }

    /// Decides a reload request: one decision per distinct registered target, or one `no-match`.
    ///
    /// Whatever fell due before the request's time is processed first (and handed out by the next tick).
    public mutating func receive(_ request: ReloadRequest) -> [Decision] {
        var decisions: [Decision] = []
        decisions.reserveCapacity(request.targets.count)
        receive(request, into: &decisions)
        return decisions
    }

    /// ``receive(_:)`` appending to the caller's buffer, so that a caller deciding many requests
    /// allocates nothing per request.
    public mutating func receive(_ request: ReloadRequest, into decisions: inout [Decision]) {
        let now = advance(to: request.received.milliseconds)
        let first = decisions.count
        // Duplicates are skipped: a linear look-back for the usual few targets (the widgets of one
        // device), a set for a webhook's thousands.
        let small = request.targets.count <= 8
        var seen = Set<Int32>()
        if !small {
            // A webhook's thousands (a fan-out's million) get their room once, not by doubling.
            seen.reserveCapacity(request.targets.count)
            decisions.reserveRoom(for: request.targets.count)
        }
        for (index, target) in request.targets.enumerated() where isRegistered(target.rawValue) {
            if small {
                if index > 0, request.targets[..<index].contains(target) { continue }
            } else if !seen.insert(target.rawValue).inserted {
                continue
            }
            decisions.append(decide(request, for: target.rawValue, at: now))
        }
        if decisions.count == first {
            decisions.append(
                Decision(request: request.id, instance: nil, kind: .noMatch, due: nil, reason: .noMatchingWidget)
            )
        }
        // The next timer's pending reload and the state of its device's next instance (the first that may
        // ride along), for the next request's `advance`: its own state, asked for when the last `advance`
        // ended, has come meanwhile (decision 0115).
        if let next = timers.top, next.kind == .pendingReload, next.instance >= 0, Int(next.instance) < instances.count {
            let state = instances[Int(next.instance)]
            pending.prefetch(state.pendingSlot)
            instances.prefetch(Int(state.nextInDevice))
        }
    }

    private mutating func decide(_ request: ReloadRequest, for i: Int32, at now: Int64) -> Decision {
        let policy = policy(of: i)
        let instance = InstanceHandle(i)
        // Whether the reload skips the budget: the request's exemption, or an activity's rule below.
        var exempt = request.exempt
        var activity: ActivitySnapshot?
        if let content = request.activity, let state = activities[i] {
            // A Live Activity: nothing after its end, nothing older than what it shows; an end, and what
            // is not priority 10, skip the budget.
            if state.ended || state.ending && content.event != .end {
                return Decision(request: request.id, instance: instance, kind: .afterEnd, due: nil, reason: .activityEnded)
            }
            if let delivered = state.delivered, ContentStamp.isOutdated(content.timestamp, newest: delivered.timestamp) {
                return Decision(
                    request: request.id, instance: instance, kind: .outdated, due: nil,
                    reason: .outdated(timestamp: content.timestamp, delivered: delivered.timestamp)
                )
            }
            let descriptor = policyPushTypes[Int(instances[Int(i)].policy)].descriptor
            exempt = exempt || content.event == .end || !descriptor.chargesLowPriority && request.priority != .high
            activity = state
        }

        // Rules 4 and 5: the request's own due time and what bounds it.
        let (earliest, bound) = earliest(i, at: now, exempt: exempt)
        var due = earliest
        var reason: DecisionReason =
            switch bound {
            case .now: .dueNow
            case .interval:
                .waitingForInterval(
                    until: Timestamp(milliseconds: earliest),
                    lastReload: Timestamp(milliseconds: instances[Int(i)].lastReload),
                    minimumInterval: policy.minimumInterval
                )
            case .budget:
                .waitingForBudget(until: Timestamp(milliseconds: earliest), dailyBudget: policy.dailyBudget, burst: policy.burst)
            }
        switch request.priority {
        case .high:
            break
        case .low:
            let delayed = now + policy.lowPriorityDelay * 1000
            if delayed > due {
                due = delayed
                reason = .lowPriority(until: Timestamp(milliseconds: delayed), delay: policy.lowPriorityDelay)
            }
        case .background:
            let delayed = now + policy.backgroundDelay * 1000
            if delayed > due {
                due = delayed
                reason = .background(until: Timestamp(milliseconds: delayed))
            }
        }

        // Rule 3: a timeline reload within the absorb window (or before the push could go) serves it; not
        // a request for now or never, which goes now or is expired (rule 7).
        let planned = instances[Int(i)].plannedReload
        let nowOrNever = request.expiration?.isNowOrNever == true
        if !nowOrNever, planned != InstanceState.none, planned >= now, planned <= max(now + policy.absorbWindow * 1000, due) {
            return Decision(
                request: request.id,
                instance: instance,
                kind: .absorbed,
                due: nil,
                reason: .absorbedByTimeline(plannedReload: Timestamp(milliseconds: planned))
            )
        }

        // Kept as it came (now-or-never stays the epoch, so that the reload it joins keeps the latest);
        // compared as the latest release it allows.
        let expiration = request.expiration?.milliseconds
        let latest = request.expiration?.latestRelease(decidedAt: now)
        // Rule 6: merge into the pending reload, changed in its slot.
        let slot = instances[Int(i)].pendingSlot
        if slot >= 0 {
            let previousDue = pending.summary(of: slot).due
            let merged = Self.merge(
                request, due: due, exempt: exempt, activity: activity, expiration: expiration, latest: latest, into: &pending[slot]
            )
            // Rule 7: the request expires if even the merged reload comes too late for it (for now or
            // never: if the merged reload does not go at once); the pending reload stays as it was.
            guard let count = merged.requests else {
                return expired(request, instance, earliest: merged.due, expiration: expiration!)
            }
            if let activity { take(request, into: activity, of: i) }
            if merged.due != previousDue {
                timers.insert(.init(time: merged.due, instance: i, kind: .pendingReload))
            }
            markChanged(i)
            return Decision(
                request: request.id,
                instance: instance,
                kind: .merged,
                due: Timestamp(milliseconds: merged.due),
                reason: .mergedIntoPending(due: Timestamp(milliseconds: merged.due), requests: count)
            )
        }

        // Rule 7.
        if let latest, due > latest {
            return expired(request, instance, earliest: due, expiration: expiration!)
        }
        setPending(i, PendingReload(
            due: due,
            priority: request.priority,
            expiration: expiration,
            requests: RequestList(request.id),
            collapseID: request.collapseID,
            team: request.team,
            exempt: exempt
        ))
        timers.insert(.init(time: due, instance: i, kind: .pendingReload))
        if let activity { take(request, into: activity, of: i) }
        markChanged(i)
        return Decision(
            request: request.id,
            instance: instance,
            kind: due == now ? .scheduled : .deferred,
            due: Timestamp(milliseconds: due),
            reason: reason
        )
    }

    /// Rule 6 on a pending reload in place: the merged attributes, then the request added to its list.
    /// - Returns: the merged due time, and the number of requests it now serves; `nil` requests when the
    ///   request expires against the merged reload (rule 7 on `latest`), which then stays as it was.
    private static func merge(
        _ request: ReloadRequest, due: Int64, exempt: Bool, activity: ActivitySnapshot?, expiration: Int64?, latest: Int64?,
        into existing: inout PendingReload
    ) -> (due: Int64, requests: Int?) {
        let sameCollapse = request.collapseID != nil && existing.collapseID == request.collapseID && existing.team == request.team
        // The same collapse id from the same team replaces the earlier attributes.
        let mergedDue = sameCollapse ? due : min(existing.due, due)
        if let latest, mergedDue > latest {
            return (mergedDue, nil)
        }
        if sameCollapse {
            existing.priority = request.priority
            existing.expiration = expiration
            existing.exempt = exempt
        } else {
            existing.priority = max(existing.priority, request.priority)
            existing.expiration = existing.expiration.flatMap { current in expiration.map { max(current, $0) } }
            // An activity's uncharged request (priority 5) makes the reload uncharged only if every
            // one it serves is; its end, always.
            existing.exempt =
                activity == nil
                ? existing.exempt || exempt
                : existing.exempt && exempt || activity!.ending || request.activity?.event == .end
            if let collapseID = request.collapseID {
                existing.collapseID = collapseID
                existing.team = request.team
            }
        }
        existing.due = mergedDue
        existing.requests.append(request.id)
        return (mergedDue, existing.requests.count)
    }

    /// Records an activity's request in its pending content: the newest content and the newest alert win
    /// (``ContentStamp``), and an end stays an end.
    private mutating func take(_ request: ReloadRequest, into state: ActivitySnapshot, of i: Int32) {
        guard let content = request.activity else { return }
        var state = state
        let stamp = ContentStamp(timestamp: content.timestamp, request: request.id)
        if state.content.map({ $0 < stamp }) ?? true { state.content = stamp }
        if content.hasAlert, state.alert.map({ $0 < stamp }) ?? true { state.alert = stamp }
        state.ending = state.ending || content.event == .end
        activities[i] = state
    }

    private func expired(_ request: ReloadRequest, _ instance: InstanceHandle, earliest: Int64, expiration: Int64)
        -> Decision
    {
        Decision(
            request: request.id,
            instance: instance,
            kind: .expired,
            due: nil,
            reason: .expired(earliest: Timestamp(milliseconds: earliest), expiration: Timestamp(milliseconds: expiration))
        )
    }
}
