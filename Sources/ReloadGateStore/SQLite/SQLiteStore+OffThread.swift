public import Foundation
import GRDB
public import ReloadGateCore

/// The store's writes as the server calls them (through ``GatewayStore`` and ``SchedulingStore``): off the
/// caller's thread.
///
/// A synchronous write waits for SQLite's write lock up to the store's deadline (`store.deadline`, 5 s) when
/// another process holds it (an operator's `sqlite3` shell, a backup, a command of another gateway
/// version). Called from a task it would hold one of the Swift concurrency pool's threads, as many as the
/// machine has cores, for that long: two registrations and an adoption waiting for a locked file were enough
/// to stop every task of a 2-core gateway, `/ready` and the answers of other connections included
/// (ConnectionTimeoutTests found it). Here each write waits on the store's own queue, and the task that
/// asked is suspended meanwhile. The synchronous forms stay for the operator's commands and the tests.
extension SQLiteStore {
    /// Runs `write` (a synchronous write of this store) on the store's write queue; the caller's task is
    /// suspended until it is done.
    func offThread<T: Sendable>(_ write: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            writeQueue.async { continuation.resume(with: Result { try write() }) }
        }
    }

    public func putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    {
        try await offThread { try self.putDevice(app: app, token: token, widgets: widgets, previousToken: previousToken, now: now) }
    }

    public func deleteDevice(app: App, token: DeviceToken, pushType: PushType? = nil) async throws -> (device: Int64, instances: [Int64]) {
        try await offThread { try self.deleteDevice(app: app, token: token, pushType: pushType) }
    }

    public func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) async throws -> Int64 {
        try await offThread { try self.putTimeline(app: app, token: token, widgetID: widgetID, timeline: timeline, now: now) }
    }

    public func writeRegistry(_ writes: [RegistryWrite], now: Date) async throws -> [Result<RegistryWritten, RegistryError>] {
        try await offThread { try self.writeRegistry(writes, now: now) }
    }

    public func markDeviceInvalid(device: Int64, since: Date) async throws -> Bool {
        try await offThread { try self.markDeviceInvalid(device: device, since: since) }
    }

    public func adoptDevice(app: App, token: DeviceToken, pushType: PushType, now: Date) async throws -> (device: Int64, instance: Int64) {
        try await offThread { try self.adoptDevice(app: app, token: token, pushType: pushType, now: now) }
    }

    public func createApp(bundle: BundleID, teamID: String?, allowsExemptions: Bool, now: Date) async throws -> AppCredentials {
        try await offThread { try self.createApp(bundle: bundle, teamID: teamID, allowsExemptions: allowsExemptions, now: now) }
    }

    public func setTeam(bundle: BundleID, teamID: String) async throws -> App? {
        try await offThread { try self.setTeam(bundle: bundle, teamID: teamID) }
    }

    public func rotateCredentials(bundle: BundleID, webhookSecret rotateSecret: Bool) async throws -> AppCredentials? {
        try await offThread { try self.rotateCredentials(bundle: bundle, webhookSecret: rotateSecret) }
    }

    public func addProviderKey(_ key: StoredProviderKey) async throws {
        try await offThread { try self.addProviderKey(key) }
    }

    public func removeProviderKey(keyID: String) async throws -> Bool {
        try await offThread { try self.removeProviderKey(keyID: keyID) }
    }
}
