import Foundation
import GRDB
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

struct AppStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func anAppGetsAnAPIKeyAndAWebhookSecretThatAreNotStoredInTheClear() async throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }

        let credentials = try await store.createApp(bundle: try BundleID("com.example.scores"), now: now)
        #expect(credentials.apiKey.hasPrefix("rgk_") && credentials.apiKey.count == 47)
        #expect(credentials.webhookSecret.hasPrefix("rgs_") && credentials.webhookSecret.count == 47)
        #expect(credentials.app.environment == .sandbox)

        #expect(try await store.app(forAPIKey: credentials.apiKey) == credentials.app)
        #expect(try await store.app(forAPIKey: credentials.apiKey + "x") == nil)
        #expect(try await store.app(forAPIKey: credentials.webhookSecret) == nil)
        #expect(try await store.webhookSecret(of: credentials.app) == credentials.webhookSecret)

        // Neither secret appears in the database file, whatever is read from it.
        try store.close()
        let raw = try Data(contentsOf: directory.url.appendingPathComponent("data/reloadgate.sqlite"))
        #expect(raw.range(of: Data(credentials.apiKey.utf8)) == nil)
        #expect(raw.range(of: Data(credentials.webhookSecret.utf8)) == nil)
        let key = try #require(FileManager.default.attributesOfItem(atPath: directory.path("data/secrets.key"))[.posixPermissions] as? NSNumber)
        #expect(key.intValue == 0o600)
    }

    @Test func secretsSurviveAReopenAndKeysAreUnique() async throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        let first = try SQLiteStore(directory: directory.path("data"), environment: .production, now: now)
        let scores = try await first.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: true, now: now)
        let news = try await first.createApp(bundle: try BundleID("com.example.news"), now: now)
        #expect(scores.apiKey != news.apiKey)
        try first.close()

        let reopened = try SQLiteStore(directory: directory.path("data"), environment: .production, now: now)
        defer { try? reopened.close() }
        #expect(try await reopened.webhookSecret(of: scores.app) == scores.webhookSecret)
        #expect(try await reopened.app(forAPIKey: news.apiKey)?.bundle == (try BundleID("com.example.news")))
        #expect(try await reopened.apps().map(\.bundle.rawValue) == ["com.example.news", "com.example.scores"])
        #expect(try await reopened.app(bundle: try BundleID("com.example.scores"))?.allowsExemptions == true)
    }

    @Test func aBundleIsRegisteredOnce() async throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let bundle = try BundleID("com.example.scores")
        _ = try await store.createApp(bundle: bundle, teamID: "TEAM1", allowsExemptions: false, now: now)
        await #expect(throws: StoreError.appExists(bundle)) { try await store.createApp(bundle: bundle, now: now) }
        // Regardless of case: the error names the registered spelling.
        await #expect(throws: StoreError.appExists(bundle)) { try await store.createApp(bundle: try BundleID("COM.example.Scores"), now: now) }
        #expect(try await store.apps().map(\.bundle) == [bundle])
        #expect(try await store.apps().first?.teamID == "TEAM1")
    }

    @Test func setTeamBindsAnAppAndReportsUnknownOnes() async throws {
        let directory = try TemporaryDirectory("apps")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let bundle = try BundleID("com.example.scores")
        #expect(try await store.createApp(bundle: bundle, now: now).app.teamID == nil)
        #expect(try await store.setTeam(bundle: bundle, teamID: "TEAM2")?.teamID == "TEAM2")
        #expect(try await store.app(bundle: bundle)?.teamID == "TEAM2")
        #expect(try await store.setTeam(bundle: try BundleID("com.example.none"), teamID: "TEAM2") == nil)
    }

    /// Migration v13's rule (docs/DECISIONS.md, "Apps belong to a team"): the team of the keys naming
    /// the app, when they are of one team; else the one team of all keys; else none.
    @Test(arguments: [
        // (keys as (team, topics), expected teams of scores, news, weather)
        ([("T1", "com.example.scores"), ("T2", "com.example.news"), ("T2", "")], ["T1", "T2", nil]),
        ([("T1", "com.example.scores com.example.news"), ("T1", "")], ["T1", "T1", "T1"]),
        ([("T1", "com.example.scores"), ("T2", "com.example.scores")], [nil, nil, nil]),
        ([], [nil, nil, nil]),
    ] as [([(String, String)], [String?])])
    func appsOfAnOlderStoreGetTheTeamOfTheirKeys(_ keys: [(String, String)], _ expected: [String?]) async throws {
        let directory = try TemporaryDirectory("apps-migration")
        defer { directory.remove() }
        let keyRows = keys.enumerated().map { index, key in
            "INSERT INTO provider_key (keyId, teamId, publicKey, topics, environments, createdAt) VALUES ('K\(index)', '\(key.0)', 'pem', '\(key.1)', 'both', 0);"
        }
        try StoreFixture.writeOlderStore(in: directory, upTo: "v12-request-first-decision", sql: """
            INSERT INTO app (id, bundle, environment, apiKeyHash, webhookSecret, createdAt) VALUES
                (2, 'com.example.news', 'sandbox', x'03', x'04', 0), (3, 'com.example.weather', 'sandbox', x'05', x'06', 0);
            \(keyRows.joined(separator: "\n"))
            """)
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        #expect(try await store.apps().map(\.bundle.rawValue) == ["com.example.news", "com.example.scores", "com.example.weather"])
        var teams: [String?] = []
        for bundle in ["com.example.scores", "com.example.news", "com.example.weather"] { teams.append(try await store.app(bundle: try BundleID(bundle))?.teamID) }
        #expect(teams == expected)
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
