/// Why a pending reload has not gone yet (`reloadgate pending`).
public enum PendingWait: String, Sendable, CaseIterable {
    /// Due now: it leaves with the next tick.
    case due
    /// No budget token until then (rule 1).
    case budget
    /// The minimum interval since the last reload (rule 2).
    case interval
    /// Priority 5 waits (rule 5).
    case lowPriority = "low-priority"
    /// Priority 1 waits for another delivery to the device (rule 5).
    case background
    /// Held to leave with the device's other pending reloads, or planned for later when it was decided.
    case coalescing
}

/// One instance's budget as the operator sees it (`reloadgate budget`).
public struct BudgetView: Hashable, Sendable {
    /// Whole tokens in the bucket now.
    public var tokens: Int
    /// The bucket's capacity and daily refill (the instance's policy).
    public var burst: Int
    public var dailyBudget: Int
    /// When the next token arrives (`nil`: the bucket is full).
    public var nextToken: Timestamp?
    /// The last reload (delivery or timeline).
    public var lastReload: Timestamp?
    /// The timeline's planned reload.
    public var plannedReload: Timestamp?
    /// The earliest time it may reload now (interval and budget), for a request that is not exempt.
    public var earliestReload: Timestamp
    /// The pending reload, if any.
    public var pending: PendingSnapshot?
}

extension ReloadScheduler {
    /// Why the pending reload of `instance` waits at `now`; `nil` when it has none.
    public func pendingWait(of instance: InstanceHandle, at now: Timestamp) -> PendingWait? {
        let i = instance.rawValue
        guard isRegistered(i), let reload = self[pending: i] else { return nil }
        if reload.due <= now.milliseconds { return .due }
        switch earliest(i, at: now.milliseconds, exempt: reload.exempt).bound {
        case .budget: return .budget
        case .interval: return .interval
        case .now: break
        }
        switch reload.priority {
        case .low: return .lowPriority
        case .background: return .background
        case .high: return .coalescing
        }
    }

    /// The budget of `instance` at `now`; `nil` when it is not registered.
    public func budget(of instance: InstanceHandle, at now: Timestamp) -> BudgetView? {
        let i = instance.rawValue
        guard isRegistered(i), let snapshot = snapshot(of: instance) else { return nil }
        let policy = policy(of: i)
        let tokens = tokens(of: instance, at: now)
        return BudgetView(
            tokens: tokens,
            burst: policy.burst,
            dailyBudget: policy.dailyBudget,
            nextToken: nextToken(of: i, holding: tokens),
            lastReload: snapshot.lastReload,
            plannedReload: snapshot.plannedReload,
            earliestReload: Timestamp(milliseconds: earliest(i, at: now.milliseconds, exempt: false).time),
            pending: snapshot.pending
        )
    }

    /// When the next token of `i` comes, holding `tokens` now; `nil` when its bucket is full. The bucket is
    /// full at `bucketFullAt`; each token before that comes one emission interval earlier.
    func nextToken(of i: Int32, holding tokens: Int) -> Timestamp? {
        let policy = policy(of: i)
        guard tokens < policy.burst else { return nil }
        return Timestamp(milliseconds: instances[Int(i)].bucketFullAt - Int64(policy.burst - tokens - 1) * policy.emissionInterval)
    }

    /// The operator drops the pending reload of `instance` (`reloadgate cancel`).
    /// - Returns: the requests it served (listed ones), or `nil` when there was none.
    public mutating func cancelPending(_ instance: InstanceHandle) -> [RequestID]? {
        let i = instance.rawValue
        guard isRegistered(i), let reload = removePending(i) else { return nil }
        markChanged(i)
        return reload.requests.array
    }

    /// The operator asks for the pending reloads of `instances` to go now (`reloadgate flush`).
    ///
    /// Without `ignoringBudget` each becomes due at once and the next tick applies the rules as usual: it
    /// still waits for the minimum interval and a budget token. With `ignoringBudget` (operator override)
    /// they are released at once, whatever the interval and budget say, marked exempt and not charged, in
    /// one push per device (rule 8: the device's other pending reloads that are allowed now ride along).
    /// The deliveries come out of the next ``tick(now:)``.
    /// - Returns: the instances that had a pending reload.
    @discardableResult
    public mutating func flushPending(_ selected: [InstanceHandle], at now: Timestamp, ignoringBudget: Bool) -> [InstanceHandle] {
        let time = max(now.milliseconds, clock)
        var flushed: [InstanceHandle] = []
        var seen = Set<Int32>()
        var byDevice: [Int32: [Int32]] = [:]
        for instance in selected {
            let i = instance.rawValue
            guard isRegistered(i), var reload = self[pending: i], seen.insert(i).inserted else { continue }
            flushed.append(instance)
            if ignoringBudget {
                reload.exempt = true
                self[pending: i] = reload
                byDevice[instances[Int(i)].device, default: []].append(i)
            } else {
                reload.due = min(reload.due, time)
                self[pending: i] = reload
                markChanged(i)
                timers.insert(.init(time: reload.due, instance: i, kind: .pendingReload))
            }
        }
        for (_, members) in byDevice.sorted(by: { $0.key < $1.key }) {
            guard let trigger = members.first, pendingSummary(of: trigger) != nil else { continue }
            deliver(from: trigger, at: time, overriding: Set(members))
        }
        return flushed
    }
}
