import Foundation
import GRDB
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

struct AppStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func anAppGetsAnAPIKeyAndAWebhookSecretThatAreNotStoredInTheClear() throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }

        let credentials = try store.createApp(bundle: try BundleID("com.example.scores"), now: now)
        #expect(credentials.apiKey.hasPrefix("rgk_") && credentials.apiKey.count == 47)
        #expect(credentials.webhookSecret.hasPrefix("rgs_") && credentials.webhookSecret.count == 47)
        #expect(credentials.app.environment == .sandbox)

        #expect(try store.app(forAPIKey: credentials.apiKey) == credentials.app)
        #expect(try store.app(forAPIKey: credentials.apiKey + "x") == nil)
        #expect(try store.app(forAPIKey: credentials.webhookSecret) == nil)
        #expect(try store.webhookSecret(of: credentials.app) == credentials.webhookSecret)

        // Neither secret appears in the database file, whatever is read from it.
        try store.close()
        let raw = try Data(contentsOf: directory.url.appendingPathComponent("data/reloadgate.sqlite"))
        #expect(raw.range(of: Data(credentials.apiKey.utf8)) == nil)
        #expect(raw.range(of: Data(credentials.webhookSecret.utf8)) == nil)
        let key = try #require(FileManager.default.attributesOfItem(atPath: directory.path("data/secrets.key"))[.posixPermissions] as? NSNumber)
        #expect(key.intValue == 0o600)
    }

    @Test func secretsSurviveAReopenAndKeysAreUnique() throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        let first = try SQLiteStore(directory: directory.path("data"), environment: .production, now: now)
        let scores = try first.createApp(bundle: try BundleID("com.example.scores"), allowsExemptions: true, now: now)
        let news = try first.createApp(bundle: try BundleID("com.example.news"), now: now)
        #expect(scores.apiKey != news.apiKey)
        try first.close()

        let reopened = try SQLiteStore(directory: directory.path("data"), environment: .production, now: now)
        defer { try? reopened.close() }
        #expect(try reopened.webhookSecret(of: scores.app) == scores.webhookSecret)
        #expect(try reopened.app(forAPIKey: news.apiKey)?.bundle == (try BundleID("com.example.news")))
        #expect(try reopened.apps().map(\.bundle.rawValue) == ["com.example.news", "com.example.scores"])
        #expect(try reopened.app(bundle: try BundleID("com.example.scores"))?.allowsExemptions == true)
    }

    @Test func aBundleIsRegisteredOnce() throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let bundle = try BundleID("com.example.scores")
        _ = try store.createApp(bundle: bundle, now: now)
        #expect(throws: StoreError.appExists(bundle)) { try store.createApp(bundle: bundle, now: now) }
        #expect(try store.apps().count == 1)
    }

    @Test func aDamagedSecretsKeyIsRefused() throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.path("data"), withIntermediateDirectories: true)
        try Data([1, 2, 3]).write(to: directory.url.appendingPathComponent("data/secrets.key"))
        #expect(throws: StoreError.self) {
            try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        }
    }
}
