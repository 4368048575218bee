import Foundation
import Logging
public import ReloadGateCore
public import ReloadGateStore

/// A change of the gateway's state, carried out by ``GatewayDoor/execute(_:)``: committed to the store,
/// then applied to the scheduler and the caches, before its typed outcome is returned.
protocol GatewayCommand: Sendable {
    associatedtype Outcome: Sendable
    func execute(at door: GatewayDoor) async throws -> Outcome
}

// MARK: Reloads

/// A reload request, a push or a webhook call, as the listener or the route hands it to the door
/// (``GatewayDoor/reload(_:render:)``, ``GatewayDoor/enqueue(_:render:reply:)``): targets resolved,
/// credentials checked. The door decides it with the scheduler, checks its idempotency key, commits it
/// in the next group commit and answers.
struct ReloadCommand: Sendable {
    var app: App
    var source: RecordedRequest.Source
    var targets: [Int64]
    var priority: Priority
    /// `expiration: 0` arrives here as the received time.
    var expiration: Timestamp?
    var collapseID: String?
    var team: String?
    var exempt: Bool
    /// The request as sent, for `explain`.
    var summary: String
    /// A push's apns-id, for `explain`.
    var apnsID: String? = nil
    var received: Timestamp
    var idempotency: Idempotency?

    /// An `idempotency-key` and the hash of the body it came with.
    struct Idempotency: Hashable, Sendable {
        var key: String
        var bodyHash: [UInt8]
    }
}

// MARK: Registry

/// `PUT /v1/apps/<bundle>/devices/<token>`: the device's widget set (and a retired previous token).
/// Removed widgets' pending reloads are dropped with a `cancelled` decision.
struct PutDevice: GatewayCommand {
    var app: App
    var token: DeviceToken
    var widgets: [WidgetRegistration]
    var previousToken: DeviceToken?

    func execute(at door: GatewayDoor) async throws -> DeviceRegistration {
        let registration = try door.store.putDevice(app: app, token: token, widgets: widgets, previousToken: previousToken, now: door.now())
        door.pushDevices.invalidate()
        try await door.engine.apply(registration)
        return registration
    }
}

/// `DELETE /v1/apps/<bundle>/devices/<token>` and `reloadgate devices remove`: the device and its widgets
/// are gone; their pending reloads are dropped with a `cancelled` decision.
struct DeleteDevice: GatewayCommand {
    var app: App
    var token: DeviceToken

    func execute(at door: GatewayDoor) async throws -> (device: Int64, instances: [Int64]) {
        let removed = try door.store.deleteDevice(app: app, token: token)
        door.pushDevices.invalidate()
        try await door.engine.remove(instances: removed.instances)
        return removed
    }
}

/// `PUT .../widgets/<widget>/timeline`: answered once the instance's planned reload is written through.
struct SetTimeline: GatewayCommand {
    var app: App
    var token: DeviceToken
    var widgetID: String
    var timeline: Timeline

    func execute(at door: GatewayDoor) async throws -> Int64 {
        let instance = try door.store.putTimeline(app: app, token: token, widgetID: widgetID, timeline: timeline, now: door.now())
        try await door.engine.setTimeline(instance: instance, timeline)
        return instance
    }
}

/// Apple answered 410 for a device: it is unregistered since `since` in the store, the push path answers
/// `Unregistered` for it, and the scheduler forgets its instances, dropping their pending reloads with a
/// `cancelled` decision. The outcome is instance -> dropped requests, or `nil` when the device was not
/// active (or registered again after `since`): nothing changed.
struct MarkUnregistered: GatewayCommand {
    var device: Int64
    var since: Timestamp

    func execute(at door: GatewayDoor) async throws -> [Int64: [RequestID]]? {
        guard try door.store.markDeviceInvalid(device: device, since: since.date) else { return nil }
        door.pushDevices.invalidate()
        return try await door.engine.unregister(device: device, since: since)
    }
}

// MARK: Operator

/// `reloadgate cancel REQUEST`: drops the pending reloads listing the request; instance -> the requests
/// dropped with it (empty: none was pending).
struct CancelRequest: GatewayCommand {
    var request: Int64

    func execute(at door: GatewayDoor) async throws -> [Int64: [RequestID]] {
        let instances = try door.store.pendingInstances(listing: request)
        return try await door.engine.cancel(instances: instances, listing: RequestID(bitPattern: request))
    }
}

/// `reloadgate flush`: the pending reloads of a device, an app or all go now; the instances that had one.
struct FlushPending: GatewayCommand {
    var deviceToken: String?
    var bundle: String?
    var ignoringBudget: Bool

    func execute(at door: GatewayDoor) async throws -> [Int64] {
        let instances = try door.store.pendingInstances(deviceToken: deviceToken, bundle: bundle)
        return try await door.engine.flush(instances: instances, ignoringBudget: ignoringBudget)
    }
}

// MARK: Apps and keys

/// A change to apps or provider keys. It runs at the door of a running gateway (the admin API), which
/// also updates the caches holding what changed, or at ``OfflineDoor`` when no gateway runs (the CLI on a
/// data directory).
public protocol CatalogCommand: Sendable {
    associatedtype Outcome: Sendable
    /// Writes the change.
    func write(to store: any GatewayStore) throws -> Outcome
    /// Brings the running gateway's caches in line (after the write committed).
    func apply(_ outcome: Outcome, toCachesOf door: GatewayDoorCaches)
}

/// The caches a catalog change may touch.
public struct GatewayDoorCaches: Sendable {
    let apps: AppDirectory
    let keys: ProviderKeyDirectory
}

/// `reloadgate apps add`.
public struct AddApp: CatalogCommand {
    public var bundle: BundleID
    public var team: String?
    public var allowsExemptions: Bool

    public init(bundle: BundleID, team: String?, allowsExemptions: Bool) {
        self.bundle = bundle
        self.team = team
        self.allowsExemptions = allowsExemptions
    }

    public func write(to store: any GatewayStore) throws -> AppCredentials {
        try store.createApp(bundle: bundle, teamID: team, allowsExemptions: allowsExemptions, now: Date())
    }

    public func apply(_ outcome: AppCredentials, toCachesOf door: GatewayDoorCaches) {
        door.apps.forget(bundle)
    }
}

/// `reloadgate apps set-team`: the app's provider-token pushes only from that team's keys; `nil`: no app.
public struct SetTeam: CatalogCommand {
    public var bundle: BundleID
    public var team: String

    public init(bundle: BundleID, team: String) {
        self.bundle = bundle
        self.team = team
    }

    public func write(to store: any GatewayStore) throws -> App? {
        try store.setTeam(bundle: bundle, teamID: team)
    }

    public func apply(_ outcome: App?, toCachesOf door: GatewayDoorCaches) {
        door.apps.forget(bundle)
    }
}

/// `reloadgate apps rotate-key`: a new API key (and webhook secret); `nil`: no app.
public struct RotateCredentials: CatalogCommand {
    public var bundle: BundleID
    public var webhookSecret: Bool

    public init(bundle: BundleID, webhookSecret: Bool) {
        self.bundle = bundle
        self.webhookSecret = webhookSecret
    }

    public func write(to store: any GatewayStore) throws -> AppCredentials? {
        try store.rotateCredentials(bundle: bundle, webhookSecret: webhookSecret)
    }

    public func apply(_ outcome: AppCredentials?, toCachesOf door: GatewayDoorCaches) {
        door.apps.forget(bundle)
    }
}

/// `reloadgate keys add`: the next push verifies with the key.
public struct AddProviderKey: CatalogCommand {
    public var key: StoredProviderKey

    public init(_ key: StoredProviderKey) {
        self.key = key
    }

    public func write(to store: any GatewayStore) throws {
        try store.addProviderKey(key)
    }

    public func apply(_ outcome: Void, toCachesOf door: GatewayDoorCaches) {
        door.keys.refresh()
    }
}

/// `reloadgate keys remove`: the next push signed with the key is refused; `false`: no such key.
public struct RemoveProviderKey: CatalogCommand {
    public var keyID: String

    public init(keyID: String) {
        self.keyID = keyID
    }

    public func write(to store: any GatewayStore) throws -> Bool {
        try store.removeProviderKey(keyID: keyID)
    }

    public func apply(_ outcome: Bool, toCachesOf door: GatewayDoorCaches) {
        door.keys.refresh()
    }
}

extension GatewayDoor {
    /// Carries out a catalog change: written, then the caches holding it brought in line.
    func execute<Command: CatalogCommand>(_ command: Command) throws -> Command.Outcome {
        let outcome = try command.write(to: store)
        command.apply(outcome, toCachesOf: GatewayDoorCaches(apps: apps, keys: keys))
        return outcome
    }
}

/// The door of a data directory with no gateway running (the CLI's `apps` and `keys` commands): catalog
/// changes are written; there are no caches to update.
public struct OfflineDoor: Sendable {
    private let store: any GatewayStore

    public init(store: any GatewayStore) {
        self.store = store
    }

    public func execute<Command: CatalogCommand>(_ command: Command) throws -> Command.Outcome {
        try command.write(to: store)
    }
}
