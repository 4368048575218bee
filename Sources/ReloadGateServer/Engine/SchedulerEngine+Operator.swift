import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The engine's operator reads and writes: why a reload waits, budgets, `cancel` and `flush`.
extension SchedulerEngine {
    /// Why each of `instances` waits now (those without a pending reload are left out).
    func pendingWaits(_ instances: [Int64]) -> [Int64: PendingWait] {
        let time = Timestamp(now())
        var waits: [Int64: PendingWait] = [:]
        for id in instances {
            if let handle = Self.handle(id), let wait = scheduler.pendingWait(of: handle, at: time) { waits[id] = wait }
        }
        return waits
    }

    /// How full the budgets are now (``ReloadScheduler/budgetUse(at:lowest:)``).
    func budgetUse(lowest: Int) -> BudgetUse {
        scheduler.budgetUse(at: Timestamp(now()), lowest: lowest)
    }

    /// The budgets of `instances` now (unregistered ones are left out).
    func budgets(_ instances: [Int64]) -> [Int64: BudgetView] {
        let time = Timestamp(now())
        var budgets: [Int64: BudgetView] = [:]
        for id in instances {
            if let handle = Self.handle(id), let budget = scheduler.budget(of: handle, at: time) { budgets[id] = budget }
        }
        return budgets
    }

    /// Drops the pending reloads of `instances` whose listed requests include `request` (every one of
    /// `instances` when `request` is nil), records a `cancelled` decision for each of their listed
    /// requests, and returns once that is committed: instance -> the requests dropped with it.
    func cancel(instances given: [Int64], listing request: RequestID?) async throws -> [Int64: [RequestID]] {
        let (dropped, waits) = try await cancelWithoutWaiting(instances: given, listing: request)
        if waits { try await waitForCommit() }
        return dropped
    }

    /// ``cancel(instances:listing:)`` into the open batch; `waits`: the caller waits for its commit.
    func cancelWithoutWaiting(instances given: [Int64], listing request: RequestID?) async throws
        -> (dropped: [Int64: [RequestID]], waits: Bool)
    {
        try checkAccepting()
        var dropped: [Int64: [RequestID]] = [:]
        // Instances another gateway schedules: the command goes to its inbox (it drops them when it reads it).
        let (instances, forwarded) = try await splitForOperator(given)
        for (partition, ids) in forwarded {
            pipeline.open.ledger.forwards.append(InboxEntry(partition: partition, work: .cancel(instances: ids, request: request)))
            for id in ids { dropped[id] = request.map { [$0] } ?? [] }
        }
        for id in instances {
            guard let handle = Self.handle(id) else { continue }
            if let request, scheduler.pendingReload(of: handle)?.requests.contains(request) != true { continue }
            guard let requests = scheduler.cancelPending(handle) else { continue }
            dropped[id] = requests
            // In the ledger beside each request's first decision, so that `explain` tells why nothing
            // was sent. (A pending reload lists its first 100 requests; merged ones beyond keep only
            // their `merged` decision.)
            for request in requests {
                pipeline.open.ledger.decisions.append(
                    Decision(request: request, instance: handle, kind: .cancelled, due: nil, reason: .cancelledByOperator)
                )
            }
        }
        return (dropped, !dropped.isEmpty || !pipeline.open.ledger.forwards.isEmpty)
    }

    /// Makes the pending reloads of `instances` due now (exempt from the budget when `ignoringBudget`)
    /// and returns once that is committed: the instances that had one.
    func flush(instances given: [Int64], ignoringBudget: Bool) async throws -> [Int64] {
        let (flushed, waits) = try await flushWithoutWaiting(instances: given, ignoringBudget: ignoringBudget)
        if waits { try await waitForCommit() }
        return flushed
    }

    /// ``flush(instances:ignoringBudget:)`` into the open batch; `waits`: the caller waits for its commit.
    func flushWithoutWaiting(instances given: [Int64], ignoringBudget: Bool) async throws -> (flushed: [Int64], waits: Bool) {
        try checkAccepting()
        let (instances, forwarded) = try await splitForOperator(given)
        for (partition, ids) in forwarded {
            pipeline.open.ledger.forwards.append(InboxEntry(partition: partition, work: .flush(instances: ids, ignoringBudget: ignoringBudget)))
        }
        let flushed = scheduler.flushPending(instances.compactMap(Self.handle), at: Timestamp(now()), ignoringBudget: ignoringBudget)
            .map { Int64($0.rawValue) }
        return (flushed + forwarded.values.flatMap { $0 }, !flushed.isEmpty || !forwarded.isEmpty)
    }
}
