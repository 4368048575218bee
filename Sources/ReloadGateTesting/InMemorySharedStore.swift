public import Foundation
public import ReloadGateCore
public import ReloadGateStore
import Synchronization

/// The shared store's semantics (``PostgresStore`` as the scheduler engine and the cluster membership use
/// it: ``SharedSchedulingStore``) in memory, for the cluster simulation: each call is one transaction,
/// whole or not at all; a commit under a fence that no longer holds writes nothing and throws
/// ``StoreError/fenced(generation:held:)``; leases with epochs and fence generations
/// (``InMemoryLeaseTable``); the inbox of forwarded work in the order it was written; request ids in
/// blocks. Time is the caller's (`clock`, milliseconds), and faults are set by the caller (``fault``).
///
/// What it leaves out: registry writes other than the few the simulation makes (``register(app:token:kinds:now:)``,
/// ``addWidget(device:kind:)``, ``removeWidget(_:)``), timelines, the operator's reads. `SharedStoreTests`
/// run the same cases against it and PostgreSQL, so that the two stay the same.
public final class InMemorySharedStore: SharedSchedulingStore {
    /// A fault of the whole store (the database), set and healed by the simulation.
    public enum Fault: Sendable, Hashable {
        /// The server does not answer: every call fails.
        case down
        /// Writes cannot be made (a table locked, a full disk): commits and the commit probe fail, reads work.
        case locked
    }

    public struct Device: Sendable, Hashable {
        public var id: Int64
        public var app: Int64
        public var token: String
        public var active: Bool
        /// A device's widgets, or one control.
        public var pushType: PushType = .widgets
    }

    public struct Instance: Sendable, Hashable {
        public var id: Int64
        public var device: Int64
        public var widgetID: String
        public var kind: String
        /// The reload its timeline plans, if any.
        public var plannedReload: Timestamp? = nil
    }

    /// What a commit wrote, in commit order: the ledger the simulation checks its invariants against.
    public struct Ledger: Sendable {
        public var requests: [RequestID: RecordedRequest] = [:]
        public var decisions: [Decision] = []
        /// Deliveries by apns-id, with their state as last written.
        public var deliveries: [String: RecordedDelivery] = [:]
        public var commits = 0
    }

    struct State: Sendable {
        var fault: Fault?
        var devices: [Int64: Device] = [:]
        var deviceByToken: [String: Int64] = [:]
        var instances: [Int64: Instance] = [:]
        var snapshots: [Int64: InstanceSnapshot] = [:]
        var idempotent: [IdempotencyKey: IdempotentAnswer] = [:]
        var inbox: [InboxEntry] = []
        var ledger = Ledger()
        var leases = InMemoryLeaseTable()
        var nextDevice: Int64 = 1
        var nextInstance: Int64 = 1
        var nextInboxID: Int64 = 1
        var nextBlock: Int64 = 1
    }

    private let state = Mutex(State())
    private let clock: @Sendable () -> Int64

    /// Request ids come in blocks of this many (PostgreSQL's `requestBlockSize`).
    public static let requestBlockSize: Int64 = 1024
    /// Device ids are 1, 1 + stride, 1 + 2 x stride, ...: PostgreSQL's sequence counts by one and fills
    /// the 1,024 partitions evenly with many devices; a simulation of a few devices spreads them with a stride.
    private let deviceIDStride: Int64

    /// - Parameters:
    ///   - clock: the database's time in milliseconds (heartbeats without a time of their own).
    ///   - deviceIDStride: the distance between consecutive device ids.
    public init(clock: @escaping @Sendable () -> Int64, deviceIDStride: Int64 = 1) {
        self.clock = clock
        self.deviceIDStride = deviceIDStride
    }

    /// The fault in effect (`nil`: none).
    public var fault: Fault? {
        get { state.withLock { $0.fault } }
        set { state.withLock { $0.fault = newValue } }
    }

    /// Everything committed so far.
    public var ledger: Ledger { state.withLock { $0.ledger } }

    /// A device's widget instances (active or not).
    public func instances(ofDevice device: Int64) -> [Instance] {
        state.withLock { state in state.instances.values.filter { $0.device == device }.sorted { $0.id < $1.id } }
    }

    /// The device of an instance, as the simulation's registry sees it.
    public func instance(_ id: Int64) -> Instance? { state.withLock { $0.instances[id] } }

    /// Whether a device's token is a device's (widgets) or a control's; widgets for an unknown device.
    public func pushType(ofDevice device: Int64) -> PushType { state.withLock { $0.devices[device]?.pushType ?? .widgets } }

    /// Whether an active device shows `instance` now.
    public func isRegistered(instance id: Int64) -> Bool {
        state.withLock { state in state.instances[id].map { state.devices[$0.device]?.active == true } ?? false }
    }

    // MARK: The simulation's registry writes

    /// Registers a device with one widget instance per kind (one transaction); returns the device and its instances.
    public func register(app: Int64, token: String, kinds: [String], now: Timestamp) throws -> (device: Int64, instances: [Int64]) {
        try writing { state in
            let device = state.nextDevice
            state.nextDevice += deviceIDStride
            state.devices[device] = Device(id: device, app: app, token: token, active: true)
            state.deviceByToken["\(app)/\(token)"] = device
            var instances: [Int64] = []
            for (index, kind) in kinds.enumerated() {
                instances.append(Self.insertInstance(&state, device: device, widgetID: "w\(index)", kind: kind))
            }
            Self.noticeOwner(of: device, in: &state)
            return (device, instances)
        }
    }

    /// Adds a widget instance to a device.
    public func addWidget(device: Int64, kind: String) throws -> Int64 {
        try writing { state in
            let count = state.instances.values.count { $0.device == device }
            Self.noticeOwner(of: device, in: &state)
            return Self.insertInstance(&state, device: device, widgetID: "w\(count)-\(state.nextInstance)", kind: kind)
        }
    }

    /// Removes a widget instance (its stored state with it).
    public func removeWidget(_ instance: Int64) throws {
        try writing { state in
            if let device = state.instances[instance]?.device { Self.noticeOwner(of: device, in: &state) }
            state.instances[instance] = nil
            state.snapshots[instance] = nil
        }
    }

    /// Sets the reload an instance's timeline plans (a timeline written), or none.
    public func setPlannedReload(_ instance: Int64, _ plannedReload: Timestamp?) throws {
        try writing { state in
            guard let device = state.instances[instance]?.device else { return }
            Self.noticeOwner(of: device, in: &state)
            state.instances[instance]?.plannedReload = plannedReload
        }
    }

    /// Writes a delivery's state (the delivery worker's state log).
    public func setDeliveryState(_ apnsID: String, _ new: RecordedDelivery.State) throws {
        try writing { state in
            state.ledger.deliveries[apnsID]?.state = new
        }
    }

    /// The notice to the owner of `device`'s partition that its registration changed, in the change's own
    /// transaction (``SharedSchedulingStore``).
    private static func noticeOwner(of device: Int64, in state: inout State) {
        state.inbox.append(InboxEntry(id: state.nextInboxID, partition: DevicePartition.of(device: device), work: .device(id: device)))
        state.nextInboxID += 1
    }

    private static func insertInstance(_ state: inout State, device: Int64, widgetID: String, kind: String) -> Int64 {
        let id = state.nextInstance
        state.nextInstance += 1
        state.instances[id] = Instance(id: id, device: device, widgetID: widgetID, kind: kind)
        return id
    }

    // MARK: SchedulingStore

    private func reading<T>(_ body: (State) throws -> T) throws -> T {
        try state.withLock { state in
            if state.fault == .down { throw StoreError.unavailable(reason: "simulated: the database does not answer") }
            return try body(state)
        }
    }

    private func writing<T>(_ body: (inout State) throws -> T) throws -> T {
        try state.withLock { state in
            if let fault = state.fault { throw StoreError.unavailable(reason: "simulated: \(fault)") }
            // One transaction: the changes are made on a copy and kept only when the body succeeds.
            var copy = state
            let result = try body(&copy)
            state = copy
            return result
        }
    }

    public func registeredInstances() async throws -> [RegisteredInstance] {
        try reading { Self.registered($0) { _ in true } }
    }

    public func instanceSnapshots() async throws -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        try reading { Self.snapshots($0) { _ in true } }
    }

    public func lastRequestID() async throws -> RequestID {
        try reading { $0.ledger.requests.keys.max() ?? 0 }
    }

    public func commit(_ batch: LedgerBatch) async throws {
        try batch.checkNoKeptAnswers()
        try writing { state in
            if let fence = batch.fence {
                let generation = state.leases.generation(of: fence.gateway)
                guard generation == fence.generation else {
                    throw StoreError.fenced(generation: generation, held: state.leases.partitions(heldBy: fence.gateway))
                }
            }
            if let expiredBy = batch.expiredBy {
                let own = Set(batch.idempotentAnswers.map(\.name))
                let expired = state.idempotent.values.filter { $0.isReplaceable(at: expiredBy) && !own.contains($0.name) }
                    .sorted { $0.expiresAt < $1.expiresAt }.prefix(batch.pruneLimit)
                for answer in expired { state.idempotent[answer.name] = nil }
            }
            for answer in batch.idempotentAnswers {
                // As PostgreSQL's primary key: a live answer (another gateway's, given after this one looked
                // the key up) fails the whole batch; an expired one is replaced.
                if let stored = state.idempotent[answer.name], !stored.isReplaceable(at: answer.createdAt) {
                    throw StoreError.keyAnsweredMeanwhile(key: answer.key)
                }
                state.idempotent[answer.name] = answer
            }
            for request in batch.requests {
                guard state.ledger.requests[request.id] == nil else {
                    throw StoreError.corrupt(reason: "request \(request.id) recorded twice")
                }
                state.ledger.requests[request.id] = request
            }
            state.ledger.decisions += batch.decisions
            for (instance, snapshot) in batch.instanceStates where state.instances[instance] != nil {
                state.snapshots[instance] = snapshot   // (nil: deleted)
            }
            for delivery in batch.deliveries { state.ledger.deliveries[delivery.apnsID] = delivery }
            let consumed = Set(batch.consumedInbox)
            state.inbox.removeAll { consumed.contains($0.id) }
            for var entry in batch.forwards {
                entry.id = state.nextInboxID
                state.nextInboxID += 1
                state.inbox.append(entry)
            }
            state.ledger.commits += 1
        }
    }

    public func idempotentAnswers(for keys: [IdempotencyKey]) async throws -> [IdempotencyKey: IdempotentAnswer] {
        try reading { state in
            var found: [IdempotencyKey: IdempotentAnswer] = [:]
            for name in keys { found[name] = state.idempotent[name] }
            return found
        }
    }


    public func adoptDevice(app: App, token: DeviceToken, pushType: PushType, pushToStart: Bool, now: Date) async throws -> (device: Int64, instance: Int64) {
        try writing { state in
            let name = "\(app.id)/\(token.hex)"
            let device: Int64
            if let existing = state.deviceByToken[name] {
                device = existing
                if let registered = state.devices[existing]?.pushType, registered != pushType {
                    throw RegistryError.otherPushType(token, registered: registered)
                }
            } else {
                device = state.nextDevice
                state.nextDevice += deviceIDStride
                state.devices[device] = Device(id: device, app: app.id, token: token.hex, active: true, pushType: pushType)
                state.deviceByToken[name] = device
            }
            let implicit = ImplicitInstance.of(pushType, pushToStart: pushToStart).widgetID
            if let instance = state.instances.values.first(where: { $0.device == device && $0.widgetID == implicit }) {
                return (device, instance.id)
            }
            // The owner reads the device again whenever the adoption added the implicit instance, to a new
            // device or to one registered before (the SQL stores' `devices(changedBy:)`; SharedStoreTests).
            Self.noticeOwner(of: device, in: &state)
            return (device, Self.insertInstance(&state, device: device, widgetID: implicit, kind: ImplicitInstance.kind))
        }
    }

    public func isReachable(within timeout: Duration) async -> Bool {
        state.withLock { $0.fault != .down }
    }

    public func commitProbe(within timeout: Duration) async -> String? {
        state.withLock { $0.fault.map { "simulated: \($0)" } }
    }

    // MARK: SharedSchedulingStore

    public func heartbeat(gateway: String, address: String?, startedAt: Int64, leaseMilliseconds: Int64, now: Int64?) async throws
        -> LeaseState
    {
        let time = now ?? clock()
        return try writing { state in
            state.leases.heartbeat(gateway: gateway, address: address, startedAt: startedAt, leaseMilliseconds: leaseMilliseconds, now: time)
        }
    }

    public func release(_ leases: [Int: Int64], gateway: String) async throws {
        try writing { $0.leases.release(leases, gateway: gateway) }
    }

    public func leave(gateway: String) async throws {
        try writing { $0.leases.leave(gateway: gateway) }
    }

    public func requestIDBlock() async throws -> ClosedRange<RequestID> {
        try writing { state in
            let first = state.nextBlock * Self.requestBlockSize
            state.nextBlock += 1
            return RequestID(first)...RequestID(first + Self.requestBlockSize - 1)
        }
    }

    public func inbox(partitions: [Int], after: Int64, limit: Int) async throws -> [InboxEntry] {
        await inboxReadHold.pass()
        let wanted = Set(partitions)
        return try reading { state in Array(state.inbox.lazy.filter { $0.id > after && wanted.contains($0.partition) }.prefix(limit)) }
    }

    /// Holds the reads of a partition load (``registeredInstances(partitions:)``): a read on a connection
    /// that died under it, or a database slow to scan.
    public let partitionReadHold = ReadHold()
    /// Holds the reads of devices' registrations (``registeredInstances(devices:)``): a registry change
    /// brought in line while the database is slow, and the gateway's heartbeat goes on meanwhile.
    public let registrationReadHold = ReadHold()
    /// Holds the inbox's reads (``inbox(partitions:after:limit:)``): the engine abandons such a read at its
    /// deadline and goes on without the forwarded work.
    public let inboxReadHold = ReadHold()

    public func registeredInstances(partitions: [Int]) async throws -> [RegisteredInstance] {
        await partitionReadHold.pass()
        let wanted = Set(partitions)
        return try reading { Self.registered($0) { wanted.contains(DevicePartition.of(device: $0)) } }
    }

    public func instanceSnapshots(partitions: [Int]) async throws -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        let wanted = Set(partitions)
        return try reading { Self.snapshots($0) { wanted.contains(DevicePartition.of(device: $0)) } }
    }

    public func deliveries(in states: [RecordedDelivery.State], partitions: [Int]) async throws -> [RecordedDelivery] {
        let wanted = Set(partitions)
        let kept = Set(states)
        return try reading { state in
            state.ledger.deliveries.values
                .filter { kept.contains($0.state) && wanted.contains(DevicePartition.of(device: $0.device)) }
                .sorted { $0.apnsID < $1.apnsID }
        }
    }

    public func device(ofInstance instance: Int64) async throws -> Int64? {
        try reading { $0.instances[instance]?.device }
    }

    /// How many times ``registeredInstances(devices:)`` was called (each is a round trip on PostgreSQL).
    public var registrationReads: Int { registrationReadCount.withLock { $0 } }
    private let registrationReadCount = Mutex(0)

    public func registeredInstances(devices: [Int64]) async throws -> [RegisteredInstance] {
        registrationReadCount.withLock { $0 += 1 }
        await registrationReadHold.pass()
        let devices = Set(devices)
        return try reading { Self.registered($0) { devices.contains($0) } }
    }

    /// The instances of active devices whose device id passes `devices`, by instance id.
    private static func registered(_ state: State, devices: (Int64) -> Bool) -> [RegisteredInstance] {
        state.instances.values
            .filter { state.devices[$0.device]?.active == true && devices($0.device) }
            .sorted { $0.id < $1.id }
            .map { instance in
                RegisteredInstance(
                    instance: instance.id, device: instance.device, kind: instance.kind,
                    pushType: state.devices[instance.device]?.pushType ?? .widgets, plannedReload: instance.plannedReload
                )
            }
    }

    private static func snapshots(_ state: State, devices: (Int64) -> Bool) -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        state.snapshots
            .filter { entry in state.instances[entry.key].map { state.devices[$0.device]?.active == true && devices($0.device) } ?? false }
            .sorted { $0.key < $1.key }
            .map { ($0.key, $0.value) }
    }
}
