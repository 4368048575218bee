extension ReloadScheduler {
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
        var seen = Set<Int32>()
        let small = request.targets.count <= 8
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
        // Rule 6: merge into the pending reload.
        if var existing = self[pending: i] {
            var merged = existing
            if let collapseID = request.collapseID, existing.collapseID == collapseID, existing.team == request.team {
                // The same collapse id from the same team replaces the earlier attributes.
                merged.due = due
                merged.priority = request.priority
                merged.expiration = expiration
                merged.exempt = exempt
            } else {
                merged.due = min(existing.due, due)
                merged.priority = max(existing.priority, request.priority)
                merged.expiration = existing.expiration.flatMap { current in expiration.map { max(current, $0) } }
                // An activity's uncharged request (priority 5) makes the reload uncharged only if every
                // one it serves is; its end, always.
                merged.exempt =
                    activity == nil
                    ? existing.exempt || exempt
                    : existing.exempt && exempt || activity!.ending || request.activity?.event == .end
                merged.collapseID = request.collapseID ?? existing.collapseID
                merged.team = request.collapseID == nil ? existing.team : request.team
            }
            // Rule 7: the request expires if even the merged reload comes too late for it (for now or
            // never: if the merged reload does not go at once); the pending reload stays as it was.
            if let latest, merged.due > latest {
                return expired(request, instance, earliest: merged.due, expiration: expiration!)
            }
            merged.requests.append(request.id)
            if let activity { take(request, into: activity, of: i) }
            if merged.due != existing.due {
                timers.insert(.init(time: merged.due, instance: i, kind: .pendingReload))
            }
            existing = merged
            self[pending: i] = existing
            markChanged(i)
            return Decision(
                request: request.id,
                instance: instance,
                kind: .merged,
                due: Timestamp(milliseconds: existing.due),
                reason: .mergedIntoPending(due: Timestamp(milliseconds: existing.due), requests: existing.requests.count)
            )
        }

        // Rule 7.
        if let latest, due > latest {
            return expired(request, instance, earliest: due, expiration: expiration!)
        }
        self[pending: i] = PendingReload(
            due: due,
            priority: request.priority,
            expiration: expiration,
            requests: RequestList(request.id),
            collapseID: request.collapseID,
            team: request.team,
            exempt: exempt
        )
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
