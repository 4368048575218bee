import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore

/// The engine's loading: the scheduler built from the store on start and on a rebuild (with one gateway
/// every device, on a shared store the partitions held), and the handles of stored ids.
extension SchedulerEngine {
    /// Builds the scheduler from the store: registers every instance of an active device, restores its
    /// budget, history and pending reload, and rebuilds the timers. Request ids continue after the
    /// highest recorded one.
    func load() async throws {
        stateGeneration += 1
        var scheduler = ReloadScheduler(configuration: configuration)
        var instances: [RegisteredInstance]
        let snapshots: [(instance: Int64, snapshot: InstanceSnapshot)]
        if let partitioning {
            // Only the partitions this gateway holds (none before its first heartbeat).
            let held = owned
            instances = try await partitioning.store.registeredInstances(partitions: held.keys.sorted())
            snapshots = try await partitioning.store.instanceSnapshots(partitions: held.keys.sorted())
            // A heartbeat may have given partitions up while the reads ran (a rebuild runs beside the
            // commit loop): their instances are the next owner's, not scheduled here.
            if owned != held {
                instances.removeAll { owned[DevicePartition.of(device: $0.device)] != held[DevicePartition.of(device: $0.device)] }
            }
            // What was forwarded to them meanwhile is decided before new work (``catchingUp``).
            catchingUp = owned
            inboxMayHaveWork = true
        } else {
            instances = try await store.registeredInstances()
            snapshots = try await store.instanceSnapshots()
            nextRequestID = try await store.lastRequestID() &+ 1
        }
        try Self.restore(instances, snapshots, into: &scheduler)
        self.scheduler = scheduler
        logger.info(
            "scheduler loaded",
            metadata: ["instances": "\(instances.count)", "pending": "\(scheduler.pendingCount)"]
        )
    }

    /// Registers `instances` with `scheduler` and restores their stored state (their budget, history
    /// and pending reload, and their timers).
    static func restore(
        _ instances: [RegisteredInstance],
        _ snapshots: [(instance: Int64, snapshot: InstanceSnapshot)],
        into scheduler: inout ReloadScheduler
    ) throws {
        var registered = Set<Int64>()
        for instance in instances {
            guard let handle = Self.handle(instance.instance), let device = Self.deviceHandle(instance.device) else {
                throw StoreError.corrupt(reason: "instance \(instance.instance) or device \(instance.device) exceeds 2^31")
            }
            scheduler.register(handle, device: device, instance.scheduling)
            registered.insert(instance.instance)
        }
        var restored = Set<Int64>()
        for (instance, snapshot) in snapshots where registered.contains(instance) {
            scheduler.restore(InstanceHandle(Int32(instance)), snapshot)
            restored.insert(instance)
        }
        // A timeline reported but not yet written through (the gateway stopped in between): its planned
        // reload comes from the timeline itself.
        for instance in instances where !restored.contains(instance.instance) {
            if let planned = instance.plannedReload {
                scheduler.restore(
                    InstanceHandle(Int32(instance.instance)),
                    InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: planned, pending: nil)
                )
            }
        }
    }

    static func handle(_ id: Int64) -> InstanceHandle? { Int32(exactly: id).map(InstanceHandle.init) }
    static func deviceHandle(_ id: Int64) -> DeviceHandle? { Int32(exactly: id).map(DeviceHandle.init) }
}
