public import Foundation
public import ReloadGateCore

/// What the gateway reads from its durable state: for targeting a push or webhook call, for the delivery
/// worker's addresses, for the operator's queries (pending, explain, budget, stats) and for loading the
/// scheduler at start.
///
/// Routes, ingress handlers, workers and the CLI hold a store only as this protocol: reading is all they
/// may do. Every change goes through the gateway's door (`GatewayDoor` in ReloadGateServer), which holds
/// the store as ``GatewayStore``.
public protocol GatewayStoreReading: Sendable {
    /// The environment the store was created for.
    var environment: DeploymentEnvironment { get }
    /// Where the store lives, for log lines and messages (a file path, or a database URL without secrets).
    var path: String { get }

    // MARK: Apps and keys
    func app(forAPIKey apiKey: String) async throws -> App?
    func app(bundle: BundleID) async throws -> App?
    func apps() async throws -> [App]
    func webhookSecret(of app: App) async throws -> String?
    func providerKeys() async throws -> [StoredProviderKey]

    // MARK: Targeting and delivery
    func pushDeviceStatus(app: App, token: DeviceToken) async throws -> PushDeviceStatus
    func pushTargets(device: Int64, kind: String?, match: [String: WidgetConfiguration.Value]) async throws -> [Int64]
    func targetInstances(app: App, target: ReloadTarget) async throws -> [(instance: Int64, device: Int64)]
    func pushAddress(device: Int64, instances: [Int64]) async throws -> PushAddress?
    func pushAddresses(_ deliveries: [(device: Int64, instances: [Int64])]) async throws -> [PushAddress?]
    func configurations(app: App, kind: String?) async throws -> [ConfigurationUsage]
    func deviceStatus(app: App, token: DeviceToken) async throws -> (active: Bool, unregisteredAt: Date?)?

    // MARK: Loading at start
    func deliveries(in states: [RecordedDelivery.State]) async throws -> [RecordedDelivery]

    // MARK: Operator queries
    func pendingReloads(_ filter: PendingFilter) async throws -> [PendingReloadRow]
    func pendingInstances(deviceToken: String?, bundle: String?) async throws -> [Int64]
    func pendingInstances(listing request: Int64) async throws -> [Int64]
    func requests(apnsID: String) async throws -> [Int64]
    func requestRecord(_ id: Int64) async throws -> RequestRecord?
    func deliveries(serving request: Int64) async throws -> [DeliveryRecord]
    func delivery(apnsID: String) async throws -> DeliveryRecord?
    func recentDeliveries(bundle: String, deviceToken: String, limit: Int) async throws -> [DeliveryRecord]
    func instances(ofDevice token: String, bundle: String?) async throws -> [(bundle: String, instance: InstanceRecord)]
    func statistics() async throws -> LedgerStatistics
    func devices(bundle: String?, token: String?, limit: Int) async throws -> [DeviceRecord]
    func ledgerCounts() async throws -> LedgerCounts
    /// The dashboard's figures for `bundle`'s app, or every app when `nil`, at `now`.
    func dashboardFigures(bundle: String?, now: Timestamp) async throws -> DashboardFigures
    /// The given instances by name (those that no longer exist are left out).
    func instanceDescriptions(_ instances: [Int64]) async throws -> [InstanceDescription]
    /// What `reloadgate export` writes as a trace: the registry's active devices (of `bundle`, or all),
    /// their timelines, and the requests received at or after `since` with their decisions on arrival,
    /// read in one transaction.
    func exportLedger(since: Timestamp, bundle: String?) async throws -> LedgerExport
}

/// The gateway's durable state, read and written: ``GatewayStoreReading`` plus the writes the door makes.
/// ``SQLiteStore`` implements it (the embedded default); the store test suite runs against this protocol,
/// parameterized over the implementations, so a second one (PostgreSQL) is tested by the same cases.
///
/// Every write is one transaction: it is durable when the call returns.
public protocol GatewayStore: GatewayStoreReading, SchedulingStore {
    // MARK: The group commit
    // (The commit itself and idempotency keys: ``SchedulingStore``.)
    /// Writes delivery state changes (pending -> sending -> sent | failed) in one transaction.
    func setDeliveryStates(_ changes: [DeliveryStateChange], at now: Date) async throws

    // MARK: Registry
    func putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    /// Removes a device and its widgets, or a control; with `pushType`, a token of the other type is refused
    /// (``RegistryError/otherPushType(_:registered:)``) and nothing is removed.
    func deleteDevice(app: App, token: DeviceToken, pushType: PushType?) async throws -> (device: Int64, instances: [Int64])
    func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) async throws -> Int64
    /// Writes many registry changes in one transaction, in order: each either whole or (refused for what
    /// it asked: a ``RegistryError``) not at all, without failing the others. Throws when the transaction
    /// itself fails: then none is written.
    func writeRegistry(_ writes: [RegistryWrite], now: Date) async throws -> [Result<RegistryWritten, RegistryError>]
    /// Marks an active device unregistered since `since` (Apple's 410); `false` when it was not active or
    /// registered again after `since`.
    func markDeviceInvalid(device: Int64, since: Date) async throws -> Bool

    // MARK: Apps and keys
    func createApp(bundle: BundleID, teamID: String?, allowsExemptions: Bool, now: Date) async throws -> AppCredentials
    func setTeam(bundle: BundleID, teamID: String) async throws -> App?
    func rotateCredentials(bundle: BundleID, webhookSecret rotateSecret: Bool) async throws -> AppCredentials?
    func addProviderKey(_ key: StoredProviderKey) async throws
    func removeProviderKey(keyID: String) async throws -> Bool

    // (Health checks: ``SchedulingStore``.)

    // MARK: Upkeep
    /// Closes the store's connections; it cannot be used afterwards. (Store-specific upkeep, such as
    /// SQLite's WAL checkpoints, is run by the server with the concrete type: ``SQLiteStore/checkpointWAL()``.)
    func close() throws
}

extension SQLiteStore: GatewayStore {
    /// The file is local: always.
    public func isReachable(within timeout: Duration) async -> Bool { true }
}

extension SQLiteStore {
    /// The devices of `bundle` (all apps when nil), at most `limit`.
    public func devices(bundle: String?, limit: Int) throws -> [DeviceRecord] {
        try devices(bundle: bundle, token: nil, limit: limit)
    }

    /// A new app without a team and without exemptions.
    public func createApp(bundle: BundleID, now: Date) throws -> AppCredentials {
        try createApp(bundle: bundle, teamID: nil, allowsExemptions: false, now: now)
    }

    /// A new app of `teamID`, without exemptions.
    public func createApp(bundle: BundleID, teamID: String?, now: Date) throws -> AppCredentials {
        try createApp(bundle: bundle, teamID: teamID, allowsExemptions: false, now: now)
    }

    /// A new app without a team.
    public func createApp(bundle: BundleID, allowsExemptions: Bool, now: Date) throws -> AppCredentials {
        try createApp(bundle: bundle, teamID: nil, allowsExemptions: allowsExemptions, now: now)
    }
}

extension GatewayStore {
    /// Removes a device (or control) of either push type.
    public func deleteDevice(app: App, token: DeviceToken) async throws -> (device: Int64, instances: [Int64]) {
        try await deleteDevice(app: app, token: token, pushType: nil)
    }
}
