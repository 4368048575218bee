public import Foundation
public import ReloadGateCore
public import ReloadGateStore

/// A change to apps or provider keys. It runs at the door of a running gateway (the admin API), which
/// also updates the caches holding what changed, or at ``OfflineDoor`` when no gateway runs (the CLI on a
/// data directory).
public protocol CatalogCommand: Sendable {
    associatedtype Outcome: Sendable
    /// Writes the change; `now` is the door's wall clock.
    func write(to store: any GatewayStore, now: Date) async throws -> Outcome
    /// Brings the running gateway's caches in line (after the write committed).
    func apply(_ outcome: Outcome, toCachesOf door: GatewayDoorCaches) async
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

    public func write(to store: any GatewayStore, now: Date) async throws -> AppCredentials {
        try await store.createApp(bundle: bundle, teamID: team, allowsExemptions: allowsExemptions, now: now)
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

    public func write(to store: any GatewayStore, now: Date) async throws -> App? {
        try await store.setTeam(bundle: bundle, teamID: team)
    }

    public func apply(_ outcome: App?, toCachesOf door: GatewayDoorCaches) {
        door.apps.forget(bundle)
    }
}

/// `reloadgate apps rotate-key`: a new API key (and webhook secret), or (`registration`) only a new
/// registration key; `nil`: no app.
public struct RotateCredentials: CatalogCommand {
    public var bundle: BundleID
    public var webhookSecret: Bool
    public var registration: Bool

    public init(bundle: BundleID, webhookSecret: Bool, registration: Bool = false) {
        self.bundle = bundle
        self.webhookSecret = webhookSecret
        self.registration = registration
    }

    public func write(to store: any GatewayStore, now: Date) async throws -> AppCredentials? {
        registration
            ? try await store.rotateRegistrationKey(bundle: bundle)
            : try await store.rotateCredentials(bundle: bundle, webhookSecret: webhookSecret)
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

    public func write(to store: any GatewayStore, now: Date) async throws {
        try await store.addProviderKey(key)
    }

    public func apply(_ outcome: Void, toCachesOf door: GatewayDoorCaches) async {
        await door.keys.refresh()
    }
}

/// `reloadgate keys remove`: the next push signed with the key is refused; `false`: no such key.
public struct RemoveProviderKey: CatalogCommand {
    public var keyID: String

    public init(keyID: String) {
        self.keyID = keyID
    }

    public func write(to store: any GatewayStore, now: Date) async throws -> Bool {
        try await store.removeProviderKey(keyID: keyID)
    }

    public func apply(_ outcome: Bool, toCachesOf door: GatewayDoorCaches) async {
        await door.keys.refresh()
    }
}

extension GatewayDoor {
    /// Carries out a catalog change: written (on a shared store, the other gateways are told by the
    /// write's own commit: ``SQLSession/catalogChanged(_:)``), then the caches holding it brought in line.
    func execute<Command: CatalogCommand>(_ command: Command) async throws -> Command.Outcome {
        let outcome = try await command.write(to: store, now: now())
        await command.apply(outcome, toCachesOf: GatewayDoorCaches(apps: apps, keys: keys))
        return outcome
    }
}
