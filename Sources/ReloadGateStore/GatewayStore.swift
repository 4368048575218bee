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
    /// The app whose API key this is (the key is compared by its hash), or `nil`.
    func app(forAPIKey apiKey: String) async throws -> App?
    /// The app whose registration key this is (compared by its hash), or `nil`.
    func app(forRegistrationKey key: String) async throws -> App?
    /// The app registered for `bundle`, or `nil`.
    func app(bundle: BundleID) async throws -> App?
    /// Every registered app, by bundle id.
    func apps() async throws -> [App]
    /// The app's webhook secret, unsealed with the data directory's `secrets.key` (`nil`: no such app).
    func webhookSecret(of app: App) async throws -> String?
    /// Every registered provider key (their public keys), by key id.
    func providerKeys() async throws -> [StoredProviderKey]

    // MARK: Targeting and delivery
    /// What a push to `token` finds: the app's active device (its id and push type), one unregistered
    /// since a time (410), another app's, or none.
    func pushDeviceStatus(app: App, token: DeviceToken) async throws -> PushDeviceStatus
    /// The push-enabled widget instances (their ids) of one device that a push's `kind` and `match`
    /// select, in instance order.
    func pushTargets(device: Int64, kind: String?, match: [String: WidgetConfiguration.Value]) async throws -> [Int64]
    /// The push-enabled instances of the app's active devices that a webhook call's target selects
    /// (configuration values compared by type and value), in instance order, each with its device's id.
    func targetInstances(app: App, target: ReloadTarget) async throws -> [(instance: Int64, device: Int64)]
    /// Where a delivery goes: the device's bundle, token and push type, and the widget ids of those of
    /// `instances` that still exist (`nil`: the device is gone).
    func pushAddress(device: Int64, instances: CompactList<Int64>) async throws -> PushAddress?
    /// ``pushAddress(device:instances:)`` for many deliveries in one read, in their order.
    func pushAddresses(_ deliveries: [(device: Int64, instances: CompactList<Int64>)]) async throws -> [PushAddress?]
    /// The recorded bodies of `requests` (those still in the ledger), for a delivery that carries content
    /// (a Live Activity's merged update).
    func requestBodies(_ requests: [RequestID]) async throws -> [(request: RequestID, body: String)]
    /// The distinct configurations of the app's active widgets and controls (of `kind`), with counts.
    func configurations(app: App, kind: String?) async throws -> [ConfigurationUsage]
    /// Whether the app's device with `token` is active, and since when it is not (`nil`: never registered).
    func deviceStatus(app: App, token: DeviceToken) async throws -> (active: Bool, unregisteredAt: Date?)?

    // MARK: Loading at start
    /// The deliveries in `states` (pending and sending at start: what the worker sends again), in release
    /// order.
    func deliveries(in states: [RecordedDelivery.State]) async throws -> [RecordedDelivery]

    // MARK: Operator queries
    /// The pending reloads that `filter` selects, soonest due first, at most `filter.limit`.
    func pendingReloads(_ filter: PendingFilter) async throws -> [PendingReloadRow]
    /// The instances with a pending reload, of one device or one app (or all): what a flush makes due.
    func pendingInstances(deviceToken: String?, bundle: String?) async throws -> [Int64]
    /// The instances whose pending reload lists the request (its id): what a cancel drops.
    func pendingInstances(listing request: Int64) async throws -> [Int64]
    /// The ids of the requests a push's `apns-id` named (a sender may reuse one), oldest first.
    func requests(apnsID: String) async throws -> [Int64]
    /// A request as the ledger holds it, with every decision made for it (`nil`: no such request).
    func requestRecord(_ id: Int64) async throws -> RequestRecord?
    /// The deliveries that serve the request (its id), in release order.
    func deliveries(serving request: Int64) async throws -> [DeliveryRecord]
    /// The delivery released with this `apns-id`, or `nil`.
    func delivery(apnsID: String) async throws -> DeliveryRecord?
    /// The device's latest deliveries, newest first, at most `limit`.
    func recentDeliveries(bundle: String, deviceToken: String, limit: Int) async throws -> [DeliveryRecord]
    /// The widget instances of the device with `token` (of `bundle`, or of every app that registered it),
    /// with their timelines.
    func instances(ofDevice token: String, bundle: String?) async throws -> [(bundle: String, instance: InstanceRecord)]
    /// Counts by decision kind, delivery state and failure reason, and the oldest pending and open items.
    func statistics() async throws -> LedgerStatistics
    /// Registered devices and controls (of `bundle`, with `token`, or all), at most `limit`, with their
    /// widget and pending-reload counts.
    func devices(bundle: String?, token: String?, limit: Int) async throws -> [DeviceRecord]
    /// How many rows each ledger table holds (tests check that a refused request wrote none).
    func ledgerCounts() async throws -> LedgerCounts
    /// The dashboard's figures for `bundle`'s app, or every app when `nil`, at `now`.
    func dashboardFigures(bundle: String?, now: Timestamp) async throws -> DashboardFigures
    /// The reloads ahead per app, kind and minute, for the herd forecast (``HerdForecast``).
    func herdForecastCounts(start: Timestamp, minutes: Int, bundle: String?, kind: String?) async throws -> [HerdForecast.Count]
    /// The given instances by name (those that no longer exist are left out).
    func instanceDescriptions(_ instances: [Int64]) async throws -> [InstanceDescription]
    /// What `reloadgate export` writes as a trace: the registry's active devices (of `bundle`, or all),
    /// their timelines, and the requests received at or after `since` with their decisions on arrival,
    /// read in one transaction. `progress` (a command's progress line) is told the rows read so far after
    /// each row.
    func exportLedger(since: Timestamp, bundle: String?, progress: (@Sendable (Int) -> Void)?) async throws -> LedgerExport
    /// What the ledger's retention has deleted: the span that deleted `request`, and the newest and
    /// oldest spans (``LedgerPruning``).
    func ledgerPruning(request: Int64?) async throws -> LedgerPruning
}

extension GatewayStoreReading {
    /// ``exportLedger(since:bundle:progress:)`` without progress.
    public func exportLedger(since: Timestamp, bundle: String?) async throws -> LedgerExport {
        try await exportLedger(since: since, bundle: bundle, progress: nil)
    }
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
    /// Registers a device with its whole widget set (kept widgets keep their instance ids, missing ones go,
    /// new ones come); `previousToken` retires the old token (410 from then on).
    func putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    /// Removes a device and its widgets, or a control; with `pushType`, a token of the other type is refused
    /// (``RegistryError/otherPushType(_:registered:)``) and nothing is removed.
    func deleteDevice(app: App, token: DeviceToken, pushType: PushType?, now: Date) async throws -> (device: Int64, instances: [Int64])
    /// Records a widget's reported timeline (its planned reload); returns the instance's id.
    func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) async throws -> Int64
    /// Writes many registry changes in one transaction, in order: each either whole or (refused for what
    /// it asked: a ``RegistryError``) not at all, without failing the others. Throws when the transaction
    /// itself fails: then none is written.
    func writeRegistry(_ writes: [RegistryWrite], now: Date) async throws -> [Result<RegistryWritten, RegistryError>]
    /// Marks an active device unregistered since `since` (Apple's 410) and returns its token (hex); `nil`
    /// when it was not active or registered again after `since`.
    func markDeviceInvalid(device: Int64, since: Date) async throws -> String?

    // MARK: Apps and keys
    /// Registers an app and returns its credentials, shown only now (the store keeps the key's hash and
    /// the secret sealed); an app of that bundle already: ``StoreError/appExists(_:)``.
    func createApp(bundle: BundleID, teamID: String?, allowsExemptions: Bool, now: Date) async throws -> AppCredentials
    /// Binds the app to an Apple team (`nil`: no such app).
    func setTeam(bundle: BundleID, teamID: String) async throws -> App?
    /// Replaces the app's API key (and its webhook secret when asked): the old ones stop working (`nil`: no
    /// such app).
    func rotateCredentials(bundle: BundleID, webhookSecret rotateSecret: Bool) async throws -> AppCredentials?
    /// Replaces only the app's registration key: the old one stops working (`nil`: no such app).
    func rotateRegistrationKey(bundle: BundleID) async throws -> AppCredentials?
    /// Registers a push sender's public key; a key id taken already: ``StoreError/keyExists(_:)``.
    func addProviderKey(_ key: StoredProviderKey) async throws
    /// Removes a provider key (`false`: there was none).
    func removeProviderKey(keyID: String) async throws -> Bool

    // (Health checks: ``SchedulingStore``.)

    // MARK: Retention
    /// Deletes one step of the ledger past retention (``LedgerPruneStep``) in one short transaction. On a
    /// store several gateways share, one gateway prunes at a time: the others' steps are
    /// ``LedgerPruned/skipped``.
    func pruneLedger(_ step: LedgerPruneStep) async throws -> LedgerPruned

    // MARK: What the engine offers
    /// The store as several gateways share it (leases, the inbox, the cluster's views), or `nil` for a
    /// store one gateway owns.
    var cluster: (any ClusterStore)? { get }
    /// Blocking upkeep the server runs every 100 ms on a queue of its own while the store is open
    /// (SQLite: copying the WAL into the database file, ``SQLiteStore/checkpointWAL()``), or `nil` when the
    /// engine needs none (PostgreSQL does its own).
    var periodicUpkeep: (@Sendable () throws -> Void)? { get }

    // MARK: Upkeep
    /// Closes the store's connections; it cannot be used afterwards.
    func close() throws
}

extension GatewayStore {
    /// Removes a device (or control) of either push type.
    public func deleteDevice(app: App, token: DeviceToken, now: Date) async throws -> (device: Int64, instances: [Int64]) {
        try await deleteDevice(app: app, token: token, pushType: nil, now: now)
    }
}
