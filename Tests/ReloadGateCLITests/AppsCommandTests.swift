import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

@Suite(.timeLimit(.minutes(10)), .heavy)
struct AppsCommandTests {
    @Test func appsAddPrintsTheCredentialsOnceAsJSONAndTheStoreKnowsTheApp() async throws {
        let directory = try TemporaryDirectory("apps-cli")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", "com.example.scores", "--team", "ABCDE12345", "--json"], in: directory.url)
        #expect(added.status == 0, "\(added.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: Any])
        #expect(object["bundle"] as? String == "com.example.scores")
        #expect(object["environment"] as? String == "sandbox")
        #expect(object["team"] as? String == "ABCDE12345")
        let apiKey = try #require(object["apiKey"] as? String)
        let secret = try #require(object["webhookSecret"] as? String)

        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let app = try #require(try await store.app(forAPIKey: apiKey))
        #expect(app.bundle == (try BundleID("com.example.scores")))
        #expect(app.teamID == "ABCDE12345")
        #expect(try await store.webhookSecret(of: app) == secret)

        // Bundle ids are unique regardless of case.
        for spelling in ["com.example.scores", "COM.Example.Scores"] {
            let again = try await ReloadGateProcess.run(["apps", "add", spelling], in: directory.url)
            #expect(again.status == 1)
            #expect(again.stderr.contains("the app com.example.scores is registered already"), "\(again.stderr)")
        }
        let badTeam = try await ReloadGateProcess.run(["apps", "add", "com.example.other", "--team", "not a team"], in: directory.url)
        #expect(badTeam.status == 2 && badTeam.stderr.contains("--team must be 1 to 64 letters or digits"))

        let listed = try await ReloadGateProcess.run(["apps", "list"], in: directory.url)
        #expect(listed.status == 0)
        let rows = listed.stdout.split(separator: "\n").map { $0.split(separator: " ") }
        #expect(rows.first == ["BUNDLE", "ENVIRONMENT", "TEAM", "EXEMPTIONS", "CREATED"], "\(listed.stdout)")
        #expect(rows.dropFirst().first?.prefix(4) == ["com.example.scores", "sandbox", "ABCDE12345", "no"], "\(listed.stdout)")
        #expect(!listed.stdout.contains(apiKey))
    }

    @Test func appsAddWorksWhileTheServerRuns() async throws {
        let directory = try TemporaryDirectory("apps-cli")
        defer { directory.remove() }
        let server = try ReloadGateProcess(["serve"], in: directory.url, environment: ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"])
        _ = try await server.waitForOutputLine(containing: "listening on")
        let added = try await ReloadGateProcess.run(["apps", "add", "com.example.news", "--json"], in: directory.url)
        #expect(added.status == 0, "\(added.stderr)")
        server.send(SIGTERM)
        #expect(try await server.waitForExit() == 0)
    }

    @Test func badInputChangesNothing() async throws {
        let directory = try TemporaryDirectory("apps-cli")
        defer { directory.remove() }
        let badBundle = try await ReloadGateProcess.run(["apps", "add", "com example"], in: directory.url)
        #expect(badBundle.status == 2)
        #expect(badBundle.stderr.contains("a bundle identifier holds only letters"))
        let otherEnvironment = try await ReloadGateProcess.run(
            ["apps", "add", "com.example.scores", "--environment", "production"],
            in: directory.url
        )
        #expect(otherEnvironment.status == 2)
        #expect(otherEnvironment.stderr.contains("for sandbox apps, not production"))
        let listed = try await ReloadGateProcess.run(["apps", "list", "--json"], in: directory.url)
        #expect(listed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
    }
}
