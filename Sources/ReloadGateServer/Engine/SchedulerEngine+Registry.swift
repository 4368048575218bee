import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The engine's side of the registry: devices, widgets and timelines the store has committed, mirrored
/// into the scheduler (on a shared store, the owner of a changed device is told through its inbox).
extension SchedulerEngine {
    /// Applies committed registry writes in their order (the registry's group commit) and says whether
    /// their effects wait for a commit (dropped pending reloads, planned reloads, forwarded changes): the
    /// caller then awaits ``waitForCommit()`` once for all of them.
    func applyWithoutWaiting(_ written: [(RegistryWrite, RegistryWritten)]) async throws -> Bool {
        try checkAccepting()
        var needsCommit = false
        // On a shared store, the devices of registrations one after the other are brought in line with
        // one read (``resync(devices:)``); before any other write, in the batch's order.
        var changed: [Int64] = []
        for (write, result) in written {
            if partitioning != nil, case .device(let registration) = result {
                changed += registration.devices
                continue
            }
            if !changed.isEmpty {
                if try await devicesChangedWithoutWaiting(changed) { needsCommit = true }
                changed = []
            }
            switch (write, result) {
            case (_, .device(let registration)):
                if try await applyWithoutWaiting(registration) { needsCommit = true }
            case (.putTimeline(_, _, _, let timeline), .timeline(let instance)):
                if try await setTimelineWithoutWaiting(instance: instance, timeline) { needsCommit = true }
            case (.adoptDevice(_, _, let pushType, let pushToStart), .adopted(let adopted)):
                register(adopted: adopted, pushType: pushType, pushToStart: pushToStart)
            default:
                break
            }
        }
        if !changed.isEmpty, try await devicesChangedWithoutWaiting(changed) { needsCommit = true }
        return needsCommit
    }

    /// The scheduler's side of a registration; `true` when it waits for a commit.
    func applyWithoutWaiting(_ registration: DeviceRegistration) async throws -> Bool {
        if partitioning != nil {
            return try await devicesChangedWithoutWaiting([registration.device] + (registration.retired.map { [$0.device] } ?? []))
        }
        let removed = registration.removedInstances + (registration.retired?.instances ?? [])
        let dropped = drop(removed.compactMap(Self.handle), reason: .removedFromRegistry)
        if let device = Self.deviceHandle(registration.device) {
            for (id, widget) in registration.instances {
                if let handle = Self.handle(id) {
                    scheduler.register(handle, device: device, registration.pushType.descriptor.scheduling(kind: widget.kind, family: widget.family))
                }
            }
        }
        return dropped > 0
    }

    /// Forgets removed instances (a deleted device); their pending reloads are dropped with a `cancelled`
    /// decision, committed before this returns.
    func remove(instances: [Int64], of device: Int64) async throws {
        try checkAccepting()
        if partitioning != nil { return try await devicesChanged([device]) }
        if drop(instances.compactMap(Self.handle), reason: .removedFromRegistry) > 0 { try await waitForCommit() }
    }

    /// Forgets the instances of a device Apple unregistered (410) that the store has marked: their pending
    /// reloads are dropped with a `cancelled` decision naming Apple's time, and their state is deleted in
    /// the same commit. Returns the instance -> dropped requests, once committed.
    func unregister(device: Int64, since: Timestamp) async throws -> [Int64: [RequestID]] {
        try checkAccepting()
        guard let handle = Self.deviceHandle(device) else { return [:] }
        if partitioning != nil, !isLocal(device: device) {
            try await devicesChanged([device])
            return [:]
        }
        var dropped: [Int64: [RequestID]] = [:]
        for instance in scheduler.instances(ofDevice: handle) {
            let requests = scheduler.remove(instance)
            record(dropped: requests, of: instance, reason: .deviceUnregistered(since: since))
            dropped[Int64(instance.rawValue)] = requests
        }
        try await waitForCommit()
        return dropped
    }

    /// Removes `instances` from the scheduler, recording a `cancelled` decision for each request of their
    /// pending reloads; returns how many instances had one.
    func drop(_ instances: [InstanceHandle], reason: DecisionReason) -> Int {
        var count = 0
        for instance in instances {
            let requests = scheduler.remove(instance)
            if !requests.isEmpty { count += 1 }
            record(dropped: requests, of: instance, reason: reason)
        }
        return count
    }

    func record(dropped requests: [RequestID], of instance: InstanceHandle, reason: DecisionReason) {
        for request in requests {
            pipeline.open.ledger.decisions.append(Decision(request: request, instance: instance, kind: .cancelled, due: nil, reason: reason))
        }
    }

    /// The scheduler's side of a timeline; `true` when it waits for a commit.
    func setTimelineWithoutWaiting(instance: Int64, _ timeline: Timeline) async throws -> Bool {
        guard let handle = Self.handle(instance) else { return false }
        if let partitioning, scheduler.device(of: handle) == nil {
            // Not scheduled here: its owner reads the device again (when it is here, it is registered).
            guard let device = try await partitioning.store.device(ofInstance: instance) else { return false }
            return try await devicesChangedWithoutWaiting([device])
        }
        scheduler.setTimeline(handle, timeline)
        return true
    }
}
