import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore

/// The inbox of forwarded work (several gateways on one database): requests, registry changes and operator
/// commands other gateways accepted for the partitions held here, read between commits and decided into
/// the open batch, which deletes them from the inbox when it commits; and the registry changes this engine
/// applies or forwards.
extension SchedulerEngine {
    /// A notification said that forwarded work was written: read the inbox with the next commit.
    func inboxChanged() {
        inboxMayHaveWork = true
        inbox.wake()
    }

    /// Whether the timer loop should wake the commit loop: a degraded engine retries its reload, and a
    /// partitioned one reads its inbox at least once a second (a notification may be lost on reconnect).
    func needsWake() -> Bool {
        if isDegraded { return true }
        guard partitioning != nil else { return false }
        return lastInboxRead.map { $0.duration(to: monotonic()) >= Self.inboxPollInterval } ?? true
    }

    static let inboxPollInterval: Duration = .seconds(1)
    static let inboxReadLimit = 2048
    static let inboxReadTimeout: Duration = .seconds(1)
    /// Most devices one resync read names (``resync(devices:)``).
    static let resyncReadDevices = 1_000

    /// Decides the forwarded work of the partitions held into the open batch, which deletes it from the
    /// inbox when it commits, and then, when the read found all of it, what the open batch forwards to
    /// partitions catching up (``catchUp(_:)``). A read that fails is retried with the next poll.
    ///
    /// Called only between commits: what this gateway forwarded before has committed (and is read) or
    /// waits in the open batch.
    /// - Parameter queued: how many requests the turn took from the queue before this read, which it
    ///   decides after it (`nil`: none). With some, the inbox is read whatever the notifications said (one
    ///   may not have come yet for work another gateway answered before they were sent), and read again
    ///   while a read returns a full page, at most ``inboxReadsBeforeRequests`` times. When the inbox
    ///   cannot be read whole so (a read fails or times out, an entry cannot be decided, or it holds more),
    ///   every partition held here catches up again (``catchingUp``): the requests taken go to the inbox
    ///   behind what it holds, and a later read decides them in that order (decision 0120).
    func readForwardedWork(before queued: Int?) async {
        guard partitioning != nil, !owned.isEmpty else { return }
        var after: Int64 = 0
        for _ in 0..<(queued == nil ? 1 : Self.inboxReadsBeforeRequests) {
            switch await readInbox(forced: queued != nil, after: after) {
            case .notDue, .whole:
                return
            case .more(let last):
                // (The entries a read decided leave the inbox with the batch's commit: the next read of the
                // same turn starts after them.)
                after = last
            case .failed:
                guard let queued else { return }
                return catchUpAgain(before: queued)
            }
        }
        if let queued { catchUpAgain(before: queued) }
    }

    /// Every partition held here catches up until an inbox read finds it whole: the `queued` requests
    /// taken go through the inbox, behind what it holds that this turn could not decide.
    private func catchUpAgain(before queued: Int) {
        for (partition, epoch) in owned where catchingUp[partition] == nil { catchingUp[partition] = epoch }
        logger.notice("the inbox was not read whole; requests go through it until it is", metadata: ["requests": "\(queued)"])
    }

    /// Reads of the inbox in one turn before the requests it took are decided (``readForwardedWork(before:)``):
    /// 16,384 forwarded entries at most.
    static let inboxReadsBeforeRequests = 8

    /// What one read of the inbox did.
    enum InboxRead {
        /// No read: no notification came and no poll is due.
        case notDue
        /// Everything the inbox held for the partitions here is decided.
        case whole
        /// A full page was decided, up to the entry `last`; more may wait.
        case more(last: Int64)
        /// The read failed or timed out, or an entry's work could not be decided (both tried again with
        /// the next read).
        case failed
    }

    /// One read of the inbox (``readForwardedWork(before:)``): at most ``inboxReadLimit`` entries, decided
    /// in their order, from the entry after `after`. `forced`: read even with no notification and no poll due.
    private func readInbox(forced: Bool, after: Int64) async -> InboxRead {
        guard let partitioning, !owned.isEmpty else { return .notDue }
        let due = lastInboxRead.map { $0.duration(to: monotonic()) >= Self.inboxPollInterval } ?? true
        guard inboxMayHaveWork || due || forced else { return .notDue }
        inboxMayHaveWork = false
        lastInboxRead = monotonic()
        let entries: [InboxEntry]
        let partitions = owned.keys.sorted()
        // The partitions this read can end the catching up of: loaded before it began (a load applied
        // while it awaits the store is not covered by it).
        let covered = catchingUp
        do {
            // At most a second: the commit loop must not wait on a store that is away before it finds
            // out with the commit itself (requests waiting for this batch would wait that much longer).
            // (A read that is under way is abandoned, not awaited: a query postgres-nio has sent runs to its end.)
            entries = try await abandoning(after: Self.inboxReadTimeout, timedOut: {
                StoreError.unavailable(reason: "the inbox was not read within \(Self.inboxReadTimeout)")
            }) { try await partitioning.store.inbox(partitions: partitions, after: after, limit: Self.inboxReadLimit) }
        } catch {
            logger.warning("cannot read the inbox; retrying", metadata: ["error": "\(error)"])
            return .failed
        }
        if entries.count == Self.inboxReadLimit { inboxMayHaveWork = true }
        let held = entries.filter { owned[$0.partition] != nil }
        var index = 0
        while index < held.count {
            // Registry notices one after the other are brought in line with one read (a registry batch
            // of another gateway, or of this one, tells each of its devices so); other work one by one,
            // in order.
            var end = index + 1
            if case .device = held[index].work {
                while end < held.count, case .device = held[end].work { end += 1 }
            }
            let run = held[index..<end]
            do {
                if run.count == 1 {
                    try await apply(run[run.startIndex].work, of: run[run.startIndex].partition)
                } else {
                    try await resync(devices: run.compactMap { if case .device(let device) = $0.work { device } else { nil } })
                }
            } catch {
                // Left in the inbox: tried again with the next read.
                logger.warning("cannot apply forwarded work; retrying", metadata: ["inbox-id": "\(run[run.startIndex].id)", "error": "\(error)"])
                inboxMayHaveWork = true
                return .failed
            }
            pipeline.open.ledger.consumedInbox += run.map(\.id)
            index = end
        }
        // (A full read may have left older work in the inbox.)
        if entries.count == Self.inboxReadLimit, let last = entries.last { return .more(last: last.id) }
        await catchUp(covered)
        return .whole
    }

    /// Ends the catching up (``catchingUp``) of the `covered` partitions, whose inbox a read that began after
    /// their load has found whole and decided: the work the open batch forwards to them (requests decided
    /// while they loaded, or while a commit was in flight after) is decided here now, in its order, and
    /// leaves the batch's forwards. From then on their new work is decided here. (`covered`: partition ->
    /// the lease epoch it was loaded under; one lost and taken again meanwhile is not covered.)
    ///
    /// The request rows and their `forwarded` decisions stay in the batch, and the owner's decisions follow
    /// them in the same commit, as they would in a later one. A piece that cannot be decided now (a read
    /// fails, or the partition was given up meanwhile) goes back to the batch's forwards, with those after
    /// it, and the partition stays catching up: the inbox gets them with the commit.
    func catchUp(_ covered: [Int: Int64]) async {
        while !pipeline.isDegraded {
            let done = covered.filter { catchingUp[$0.key] == $0.value }
            guard !done.isEmpty else { return }
            let waiting = { (entry: InboxEntry) in done[entry.partition] != nil }
            let own = pipeline.open.ledger.forwards.filter(waiting)
            guard !own.isEmpty else {
                for partition in done.keys { catchingUp[partition] = nil }
                return
            }
            pipeline.open.ledger.forwards.removeAll(where: waiting)
            for (offset, entry) in own.enumerated() {
                do {
                    try await apply(entry.work, of: entry.partition)
                } catch {
                    // (Degraded meanwhile: the batch they were in is dropped, their requests refused.)
                    guard !pipeline.isDegraded else { return }
                    // Older than anything forwarded since: first in the forwards.
                    pipeline.open.ledger.forwards.insert(contentsOf: own[offset...], at: 0)
                    logger.warning("cannot decide forwarded work; it goes to the inbox", metadata: ["error": "\(error)"])
                    inboxMayHaveWork = true
                    return
                }
            }
            // Operator commands may have been forwarded to them while this awaited: the next round.
        }
    }

    /// Applies one piece of forwarded work for `partition` to the scheduler, into the open batch.
    /// - Throws: a read's error, or ``PartitionGivenUp`` when `partition` stopped being scheduled here
    ///   before a request could be decided (its next owner decides it).
    private func apply(_ work: ForwardedWork, of partition: Int) async throws {
        guard owned[partition] != nil else { throw PartitionGivenUp(partition: partition) }
        switch work {
        case .request(let forwarded):
            // A target this gateway does not know yet (a device adopted or registered through another
            // gateway whose notice has not been applied here): read its device's registration first, so
            // that the request is decided as the gateway that took it would have.
            for target in forwarded.targets {
                guard let handle = Self.handle(target), !scheduler.isRegistered(handle),
                    let device = try await partitioning?.store.device(ofInstance: target), isLocal(device: device)
                else { continue }
                try await resync(devices: [device])
            }
            // (Given up while the reads awaited: its targets were forgotten here.)
            guard owned[partition] != nil else { throw PartitionGivenUp(partition: partition) }
            let request = ReloadRequest(
                id: forwarded.id,
                targets: forwarded.targets.compactMap(Self.handle),
                priority: Priority(rawValue: forwarded.priority) ?? .high,
                expiration: forwarded.expiration.map(Timestamp.init(milliseconds:)),
                collapseID: forwarded.collapseID,
                team: forwarded.team,
                exempt: forwarded.exempt,
                received: Timestamp(milliseconds: forwarded.received),
                activity: forwarded.activity
            )
            scheduler.receive(request, into: &pipeline.open.ledger.decisions)
            pipeline.open.forwardedArrivals.append((request.id, request.received))
        case .device(let device):
            try await resync(devices: [device])
        case .cancel(let instances, let request):
            for id in instances {
                guard let handle = Self.handle(id) else { continue }
                if let request, scheduler.pendingReload(of: handle)?.requests.contains(request) != true { continue }
                for dropped in scheduler.cancelPending(handle) ?? [] {
                    pipeline.open.ledger.decisions.append(
                        Decision(request: dropped, instance: handle, kind: .cancelled, due: nil, reason: .cancelledByOperator)
                    )
                }
            }
        case .flush(let instances, let ignoringBudget):
            _ = scheduler.flushPending(instances.compactMap(Self.handle), at: Timestamp(now()), ignoringBudget: ignoringBudget)
        }
    }

    /// Brings the scheduler in line with the registrations of `devices` as the store has them now, with
    /// one read for all of them (on a shared store each read is a round trip; one a device held a
    /// registry batch to a few hundred devices a second): widgets gone (or a whole device) are dropped with
    /// a `cancelled` decision, new ones registered, planned reloads of timelines taken over. The devices
    /// are brought in line in their order, each as it would be alone.
    ///
    /// Returns whether the next commit writes something a registration's answer waits for: a dropped
    /// pending reload's `cancelled` decision, or a planned reload set or changed (the rule of a registration
    /// and a timeline on a store of one gateway). A widget registered anew, or removed with nothing pending,
    /// changes only what a restart reads back from the registry.
    @discardableResult
    func resync(devices: [Int64]) async throws -> Bool {
        guard let partitioning else { return false }
        var handles: [(device: Int64, handle: DeviceHandle)] = []
        var seen = Set<Int64>()
        for device in devices where seen.insert(device).inserted {
            if let handle = Self.deviceHandle(device) { handles.append((device, handle)) }
        }
        guard !handles.isEmpty else { return false }
        var byDevice: [Int64: [RegisteredInstance]] = [:]
        // At most ``resyncReadDevices`` devices a read: each read is bounded by the store's deadline, and a
        // registry batch may hold tens of thousands.
        for part in handles.chunks(of: Self.resyncReadDevices) {
            for instance in try await partitioning.store.registeredInstances(devices: part.map(\.device)) {
                byDevice[instance.device, default: []].append(instance)
            }
        }
        // (A device whose partition was given up while the reads awaited is the next owner's: its widgets
        // are not registered here, where nothing would decide for them, and their planned reloads would
        // be released beside the owner's.)
        var needsCommit = false
        for (device, deviceHandle) in handles where isLocal(device: device) {
            let registered = byDevice[device] ?? []
            let now = Set(registered.map(\.instance))
            let gone = scheduler.instances(ofDevice: deviceHandle).filter { !now.contains(Int64($0.rawValue)) }
            if drop(gone, reason: .removedFromRegistry) > 0 { needsCommit = true }
            for instance in registered {
                guard let handle = Self.handle(instance.instance) else { continue }
                let known = scheduler.isRegistered(handle)
                scheduler.register(handle, device: deviceHandle, instance.scheduling)
                if !known || scheduler.snapshot(of: handle)?.plannedReload != instance.plannedReload {
                    if known || instance.plannedReload != nil { needsCommit = true }
                    scheduler.setPlannedReload(handle, instance.plannedReload)
                }
            }
        }
        return needsCommit
    }

    /// Registry changes of `devices` the store has committed: applied here for the devices scheduled here;
    /// returns once committed. The owners of the others were told by the store in the change's own
    /// transaction (``SharedSchedulingStore``), so nothing is forwarded here: a notice that rode this
    /// gateway's next commit would be lost with it when that commit failed or the gateway died.
    func devicesChanged(_ devices: [Int64]) async throws {
        if try await devicesChangedWithoutWaiting(devices) { try await waitForCommit() }
    }

    /// The same without waiting: `true` when the next commit writes what bringing a device scheduled here
    /// in line changed and an answer waits for (``resync(devices:)``).
    func devicesChangedWithoutWaiting(_ devices: [Int64]) async throws -> Bool {
        let local = devices.filter { isLocal(device: $0) }
        guard !local.isEmpty else { return false }
        return try await resync(devices: local)
    }
}

/// Forwarded work for a partition that stopped being scheduled here before it was decided: it stays in
/// the inbox (or goes there) for the partition's next owner.
struct PartitionGivenUp: Error, CustomStringConvertible {
    var partition: Int
    var description: String { "partition \(partition) is no longer scheduled here" }
}
