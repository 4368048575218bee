import Crypto
import Foundation
import ReloadGateAPI
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The registered apps as the routes look them up on every call: by bundle for pushes, by bundle with the
/// webhook secret (unsealed once) for the webhook, by API key or registration key for the registry API.
///
/// Apps found are kept in memory; a lookup that finds nothing asks the store again next time, so an app
/// added by `reloadgate apps add` while the server runs is seen at once. The only change to an app,
/// `reloadgate apps rotate-key`, goes through the admin API, which calls ``forget(_:)``. Keys are kept only
/// as their SHA-256, as in the store.
final class AppDirectory: Sendable {
    private struct Entry: Sendable {
        var app: App
        /// Unsealed on the first webhook call: a push never needs it (with another `secrets.key` than the
        /// one that sealed it, pushes still work; the start refuses such a key anyway).
        /// The secret keyed for checking signatures (the text itself is not needed again).
        var webhookKey: WebhookSignature.Key?
    }

    private let store: any GatewayStoreReading
    private let byBundle = Mutex<[String: Entry]>([:])
    private let byKeyHash = Mutex<[Data: (app: App, scope: KeyScope)]>([:])

    init(store: any GatewayStoreReading) {
        self.store = store
    }

    /// The app of `bundle` if it is kept in memory (no store read: the push listener asks on its event loop).
    func cachedApp(bundle: BundleID) -> App? {
        byBundle.withLock({ $0[bundle.rawValue] })?.app
    }

    /// The app of `bundle`, or `nil` when no such app is registered (its secret is not unsealed).
    func app(bundle: BundleID) async throws -> App? {
        if let entry = byBundle.withLock({ $0[bundle.rawValue] }) { return entry.app }
        guard let app = try await store.app(bundle: bundle) else { return nil }
        byBundle.withLock { entries in
            if entries[bundle.rawValue] == nil { entries[bundle.rawValue] = Entry(app: app, webhookKey: nil) }
        }
        return app
    }

    /// The app of `bundle` and its webhook secret keyed for checking signatures, or `nil` when no such app
    /// is registered.
    func appWithWebhookKey(bundle: BundleID) async throws -> (app: App, webhookKey: WebhookSignature.Key)? {
        if let entry = byBundle.withLock({ $0[bundle.rawValue] }), let key = entry.webhookKey {
            return (entry.app, key)
        }
        guard let app = try await store.app(bundle: bundle) else { return nil }
        guard let secret = try await store.webhookSecret(of: app) else {
            throw StoreError.corrupt(reason: "the app \(bundle) has no webhook secret")
        }
        let key = WebhookSignature.Key(secret: secret)
        byBundle.withLock { $0[bundle.rawValue] = Entry(app: app, webhookKey: key) }
        return (app, key)
    }

    /// Drops what is kept of the app (its credentials changed): the old API key and secret stop working.
    func forget(_ bundle: BundleID) {
        byBundle.withLock { $0[bundle.rawValue] = nil }
        byKeyHash.withLock { entries in entries = entries.filter { $0.value.app.bundle != bundle } }
    }

    /// Drops everything kept (another gateway changed an app).
    func forgetAll() {
        byBundle.withLock { $0.removeAll() }
        byKeyHash.withLock { $0.removeAll() }
    }

    /// The app whose API key this is, or `nil`.
    func app(forAPIKey apiKey: String) async throws -> App? {
        guard let found = try await app(forKey: apiKey), found.scope == .apiKey else { return nil }
        return found.app
    }

    /// The app whose API key or registration key (by its prefix, `rgr_`) this is, and what the key may
    /// do; `nil` when it is neither.
    func app(forKey key: String) async throws -> (app: App, scope: KeyScope)? {
        let hash = Data(SHA256.hash(data: Data(key.utf8)))
        if let found = byKeyHash.withLock({ $0[hash] }) { return found }
        let scope = KeyScope(key: key)
        let app = try await scope == .registration ? store.app(forRegistrationKey: key) : store.app(forAPIKey: key)
        guard let app else { return nil }
        byKeyHash.withLock { $0[hash] = (app, scope) }
        return (app, scope)
    }
}
