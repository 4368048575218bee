import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore

// Several gateways on one database (docs/DESIGN.md, scale-out): the engine schedules only the devices of the
// partitions its gateway holds. Requests for other devices are committed to the owner's inbox with the
// request; the owner reads its inbox, decides them under the request's id and deletes them in the same
// commit. Every commit is fenced by the epochs of the leases its decisions were made under.

extension SchedulerEngine {
    /// Whether this engine schedules `device` (always, with one gateway).
    func isLocal(device: Int64) -> Bool {
        partitioning == nil || owned[DevicePartition.of(device: device)] != nil
    }

    /// Whether new requests and operator commands for `partition`'s devices are decided here: it is
    /// scheduled here, and everything forwarded to it before has been decided (``catchingUp``). Otherwise
    /// they are forwarded to its inbox, to be decided after what waits there (in the order one gateway
    /// would have decided them).
    func decidesHere(partition: Int) -> Bool {
        partitioning == nil || (owned[partition] != nil && catchingUp[partition] == nil)
    }

    /// Those of `instances` that this engine does not schedule (none with one gateway).
    func notScheduledHere(_ instances: [Int64]) -> [Int64] {
        guard partitioning != nil else { return [] }
        return instances.filter { id in Self.handle(id).map { !scheduler.isRegistered($0) } ?? false }
    }

    /// A request's targets: those scheduled here, and the others by partition.
    func split(_ submission: ReloadCommand) -> (local: [Int64], forwarded: [Int: [Int64]]) {
        guard partitioning != nil, submission.targetDevices.count == submission.targets.count else {
            return (submission.targets, [:])
        }
        var local: [Int64] = []
        var forwarded: [Int: [Int64]] = [:]
        for (target, device) in zip(submission.targets, submission.targetDevices) {
            let partition = DevicePartition.of(device: device)
            if decidesHere(partition: partition) {
                local.append(target)
            } else {
                forwarded[partition, default: []].append(target)
            }
        }
        return (local, forwarded)
    }

    /// Reads the registration of the devices of `local` targets the scheduler does not know (a widget
    /// registered through another gateway, whose notice waits in this gateway's inbox): the request is
    /// decided as the registry stands when it arrived, not as the inbox has told so far: otherwise such a
    /// target would be left out of the decisions of a push answered 200.
    func learnUnknownTargets(of submission: ReloadCommand, local: [Int64]) async throws {
        guard partitioning != nil, !local.isEmpty, submission.targetDevices.count == submission.targets.count else { return }
        var devices: [Int64] = []
        for (target, device) in zip(submission.targets, submission.targetDevices) {
            guard let handle = Self.handle(target), !scheduler.isRegistered(handle), isLocal(device: device) else { continue }
            devices.append(device)
        }
        // (A device named twice is read once.)
        try await resync(devices: devices)
    }

    /// Adds the forwarded targets of request `id` to the open batch: an inbox entry per partition, and a
    /// `forwarded` decision per target (the owner's decision follows in the ledger).
    func forward(_ forwarded: [Int: [Int64]], of submission: ReloadCommand, id: RequestID) {
        for (partition, targets) in forwarded.sorted(by: { $0.key < $1.key }) {
            pipeline.open.ledger.forwards.append(
                InboxEntry(
                    partition: partition,
                    work: .request(
                        ForwardedRequest(
                            id: id,
                            targets: targets,
                            priority: submission.priority.rawValue,
                            expiration: submission.expiration?.milliseconds,
                            collapseID: submission.collapseID,
                            team: submission.team,
                            exempt: submission.exempt,
                            received: submission.received.milliseconds,
                            activity: submission.activity
                        )
                    )
                )
            )
            for target in targets {
                pipeline.open.ledger.decisions.append(
                    Decision(
                        request: id, instance: Self.handle(target), kind: .forwarded, due: nil,
                        reason: .forwardedToOwner(partition: partition)
                    )
                )
            }
        }
    }

    /// What `batch` depends on: this gateway's fence generation (the one it was begun under, when a
    /// heartbeat changed it since), when it writes any partition's state (decisions of the partitions
    /// scheduled here, instance states, deliveries, forwarded work applied); `nil` for a batch of request
    /// rows and forwarded work only, which any gateway may write.
    func fence(of batch: OpenBatch) -> LeaseFence? {
        guard let partitioning else { return nil }
        let ledger = batch.ledger
        let touchesPartitions = !ledger.deliveries.isEmpty || !ledger.instanceStates.isEmpty || !ledger.consumedInbox.isEmpty
            || ledger.decisions.contains { $0.kind != .forwarded }
        guard touchesPartitions else { return nil }
        return LeaseFence(gateway: partitioning.gateway, generation: batch.generation ?? fenceGeneration)
    }

    /// A heartbeat found the gateway's fence generation changed (another gateway took partitions over;
    /// the caller has given them up first): later batches commit under it. A batch already begun keeps
    /// the old one: it may hold decisions for the partitions lost, and then must not be written.
    func adopt(generation: Int64) {
        guard generation != fenceGeneration else { return }
        if !pipeline.open.ledger.isEmpty, pipeline.open.generation == nil { pipeline.open.generation = fenceGeneration }
        fenceGeneration = generation
    }

    /// An operator command's instances: those scheduled here, and the others by their device's partition
    /// (read from the store; an instance that no longer exists is left out).
    func splitForOperator(_ instances: [Int64]) async throws -> (local: [Int64], forwarded: [Int: [Int64]]) {
        guard let partitioning else { return (instances, [:]) }
        var local: [Int64] = []
        var forwarded: [Int: [Int64]] = [:]
        for id in instances {
            let device: Int64
            if let handle = Self.handle(id), let known = scheduler.device(of: handle) {
                device = Int64(known.rawValue)
            } else if let stored = try await partitioning.store.device(ofInstance: id) {
                device = stored
            } else {
                continue
            }
            let partition = DevicePartition.of(device: device)
            if decidesHere(partition: partition) { local.append(id) } else { forwarded[partition, default: []].append(id) }
        }
        return (local, forwarded)
    }

    // MARK: Leases

    /// Starts scheduling `leases`' partitions (taken by a heartbeat): loads their devices' state and
    /// hands the deliveries their last owner left unfinished (pending, or sending when it stopped) to the
    /// delivery worker, which sends them with the same apns-id. Until they are loaded their requests go to
    /// the inbox, read once they are.
    ///
    /// The load begins only at a moment with no commit in flight and an empty open batch: either may
    /// write these partitions' state (decided before this gateway let them go by its own clock, under a
    /// fence nobody raised), and a load before them would miss it: a pending reload committed and never
    /// delivered, or, with the open batch, a reload released twice. It then runs beside the commit loop
    /// (``startAwaitedLoad()``): the batches committed meanwhile hold nothing of these partitions.
    func takeOver(_ leases: [Int: Int64]) {
        guard partitioning != nil, !leases.isEmpty else { return }
        awaitingLoad.merge(leases) { $1 }
        startAwaitedLoad()
    }

    /// Brings the partitions scheduled here in line with the leases the membership holds after a heartbeat
    /// (`held`, without those being handed back): one held but neither scheduled nor waiting to be loaded
    /// under its epoch waits to be loaded. (A failed commit's answer prunes them by the leases held when it
    /// was made, which may be older than a takeover since: without this, a partition could be held and
    /// never loaded, its inbox never read.)
    func reconcile(with held: [Int: Int64]) {
        guard partitioning != nil else { return }
        for (partition, epoch) in held where owned[partition] != epoch && awaitingLoad[partition] != epoch {
            awaitingLoad[partition] = epoch
        }
    }

    /// Starts loading the partitions waiting for it, when no load runs and the moment allows
    /// (``takeOver(_:)``): called by a heartbeat that took partitions, and at each turn of the commit loop.
    ///
    /// The load runs in a task of its own, not in the commit loop's turn: its reads scan (a partition's
    /// devices, states and unfinished deliveries, the longer read deadline) and the loop must go on
    /// deciding and answering the other partitions' requests meanwhile, also when the database is slow
    /// or a connection dies under the read. A load that fails is begun again at a turn a second later
    /// at the earliest (not at every turn of a busy loop while the database is away).
    func startAwaitedLoad() {
        guard partitionLoad == nil, !awaitingLoad.isEmpty, pipeline.inFlight == nil, pipeline.open.ledger.isEmpty,
            !pipeline.isDegraded, let partitioning,
            lastFailedLoad.map({ $0.duration(to: monotonic()) >= Self.rebuildInterval }) ?? true
        else { return }
        let leases = awaitingLoad
        let generation = stateGeneration
        let store = partitioning.store
        partitionLoad = Task {
            let read: Result<PartitionLoad, any Error>
            do {
                read = .success(try await PartitionLoad.read(leases, from: store))
            } catch {
                read = .failure(error)
            }
            self.finishLoad(read, of: leases, generation: generation)
        }
    }

    /// Waits for the partition load in progress, if one is (tests and the cluster simulation, which
    /// keep the order of events).
    func partitionLoadEnded() async {
        await partitionLoad?.value
    }

    /// Applies a partition load's reads: the partitions still awaited under the epoch they were read for
    /// are scheduled here from now on, unless the state was rebuilt since the reads began (they are read
    /// again). The others were given up meanwhile and are left out.
    private func finishLoad(_ read: Result<PartitionLoad, any Error>, of leases: [Int: Int64], generation: Int) {
        partitionLoad = nil
        let loaded: PartitionLoad
        switch read {
        case .success(let value): loaded = value
        case .failure(let error):
            // (Stopping: the load was cancelled, and nothing is retried.)
            if !isStopping { logger.warning("cannot load the partitions taken; retrying", metadata: ["error": "\(error)"]) }
            lastFailedLoad = monotonic()
            return
        }
        guard generation == stateGeneration, !pipeline.isDegraded else {
            // Read before the state was rebuilt: read again (by the next turn).
            inbox.wake()
            return
        }
        let taken = Set(leases.filter { awaitingLoad[$0.key] == $0.value && owned[$0.key] != $0.value }.keys)
        guard !taken.isEmpty else {
            inbox.wake()   // (others may have been taken meanwhile)
            return
        }
        let ofTaken = { (device: Int64) in taken.contains(DevicePartition.of(device: device)) }
        let instances = loaded.instances.filter { ofTaken($0.device) }
        var unfinished = loaded.unfinished.filter { ofTaken($0.device) }
        for index in unfinished.indices { unfinished[index].leaseEpoch = leases[DevicePartition.of(device: unfinished[index].device)] }
        do {
            try Self.restore(instances, loaded.snapshots, into: &scheduler)
        } catch {
            logger.error("cannot load the partitions taken; retrying", metadata: ["error": "\(error)"])
            lastFailedLoad = monotonic()
            return
        }
        for partition in taken {
            owned[partition] = leases[partition]
            awaitingLoad[partition] = nil
            // Requests forwarded to it while it loaded (or before it was taken) are decided first.
            catchingUp[partition] = leases[partition]
        }
        logger.info(
            "partitions taken",
            metadata: [
                "partitions": "\(taken.count)", "instances": "\(instances.count)", "unfinished-deliveries": "\(unfinished.count)",
            ]
        )
        if !unfinished.isEmpty {
            metrics.deliveriesQueued(unfinished.count)
            deliveries.yield(unfinished)
        }
        inboxChanged()
    }

    /// Hands deliveries back to the worker (left behind while this gateway's lease counted as lost by its
    /// own clock, renewed since): those of partitions still scheduled here.
    func requeue(_ left: [RecordedDelivery]) {
        let kept = left.filter { owned[DevicePartition.of(device: $0.device)] != nil }
        guard !kept.isEmpty else { return }
        metrics.deliveriesQueued(kept.count)
        deliveries.yield(kept)
    }

    /// Stops scheduling `partitions`: their devices are forgotten without writing anything (their state
    /// is the next owner's). When `handingBack`, what was decided for them so far goes into the open batch
    /// (requests arriving meanwhile are forwarded): the caller waits for its commit (``waitForCommit()``)
    /// before it releases the leases.
    func giveUp(_ partitions: [Int], handingBack: Bool) {
        let given = Set(partitions.filter { awaitingLoad[$0] != nil || owned[$0] != nil })
        guard !given.isEmpty else { return }
        // Handed back: everything decided for them so far goes into the open batch (their states as they
        // are now, the deliveries due by now) before they are forgotten, so nothing more is decided for
        // them, and that batch commits before the caller releases the leases (a free lease is taken
        // without raising this gateway's fence generation: only the order keeps the next owner's load
        // after the last write). Lost: forgotten without writing anything (the state is the next owner's).
        // (Not while degraded: the state in memory is not the store's, and the next owner loads the store's.)
        // The tick comes while they are still owned: its deliveries carry the lease's epoch (without one, a
        // copy loaded again by this gateway's next tenure would be sent too).
        if handingBack, !pipeline.isDegraded { collectTick() }
        for partition in given {
            owned[partition] = nil
            awaitingLoad[partition] = nil
            catchingUp[partition] = nil
        }
        var forgotten = 0
        for device in scheduler.devices(where: { given.contains(DevicePartition.of(device: Int64($0.rawValue))) }) {
            for instance in scheduler.instances(ofDevice: device) {
                scheduler.forget(instance)
                forgotten += 1
            }
        }
        logger.info(
            handingBack ? "partitions handed back" : "partitions lost to another gateway",
            metadata: ["partitions": "\(given.count)", "instances": "\(forgotten)"]
        )
    }

    /// The partitions this engine schedules now, with their epochs.
    var ownedPartitions: [Int: Int64] { owned }
}

/// What a partition load reads of the store: the partitions' instances with their stored states, and the
/// deliveries their last owner left unfinished.
struct PartitionLoad: Sendable {
    var instances: [RegisteredInstance]
    var snapshots: [(instance: Int64, snapshot: InstanceSnapshot)]
    var unfinished: [RecordedDelivery]

    static func read(_ leases: [Int: Int64], from store: any SharedSchedulingStore) async throws -> PartitionLoad {
        let partitions = leases.keys.sorted()
        return PartitionLoad(
            instances: try await store.registeredInstances(partitions: partitions),
            snapshots: try await store.instanceSnapshots(partitions: partitions),
            unfinished: try await store.deliveries(in: [.sending, .pending], partitions: partitions)
        )
    }
}
