import AsyncHTTPClient
import Foundation
import Logging
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// `reloadgate export` of a running gateway's traffic, replayed by `reloadgate simulate --check`: the
/// replay makes every decision the gateway made (pushes scheduled, deferred, merged, absorbed by a
/// timeline, expired, a webhook call to every widget of three devices, a push that matched
/// nothing). Changing one recorded decision in the trace makes the check fail: the comparison is real.
/// On SQLite and on PostgreSQL.
@Suite(.timeLimit(.minutes(5)))
struct SimulationExportTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let bundle = "com.example.sim"
    static let devices = [String(repeating: "a1", count: 32), String(repeating: "b2", count: 32), String(repeating: "c3", count: 32)]

    static func push(
        _ token: String, kind: String, priority: String = "10", expiration: Int64? = nil, gateway: TestGateway, sender: ProviderTokenFactory
    ) async throws -> RawHTTP2Client.Answer {
        let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
        defer { Task { await client.close() } }
        var headers = [
            ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(bundle).push-type.widgets"), ("apns-push-type", "widgets"),
            ("apns-priority", priority),
        ]
        if let expiration { headers.append(("apns-expiration", String(expiration))) }
        return try await client.send(
            RawHTTP2Client.push(token: token, headers),
            body: Array(#"{"aps":{"content-changed":true},"reloadgate":{"kind":"\#(kind)"}}"#.utf8)
        )
    }

    /// The stores the test runs on: SQLite, and PostgreSQL where a test cluster is given (always on CI).
    static let stores = TestPostgres.isEnabled ? ["sqlite", "postgres"] : ["sqlite"]

    @Test(arguments: stores)
    func anExportedTraceReplaysToTheGatewaysDecisions(store kind: String) async throws {
        let directory = try TemporaryDirectory("simulate-export")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let sender = ProviderTokenFactory(keyID: "SIMSEND001", teamID: "SIMTEAM001")
        // The gateway and `reloadgate export` read one configuration: the data directory, and on
        // PostgreSQL the database of this test.
        var yaml = "data:\n  directory: \(directory.path("data"))\n"
        let url = kind == "postgres" ? try await TestPostgres.newDatabase() : nil
        let credentials: AppCredentials
        if let url {
            yaml += "store:\n  kind: postgres\n  url: \(url)\n"
            let store = try await PostgresStore(
                location: try PostgresLocation(url: url), secretsDirectory: directory.path("data"),
                environment: .sandbox, now: Date(), logger: .init(label: "test")
            )
            defer { try? store.close() }
            credentials = try await sender.createApp(bundle: Self.bundle, in: store)
        } else {
            credentials = try await sender.createApp(bundle: Self.bundle, inStoreAt: directory.path("data"))
        }
        let config = directory.path("reloadgate.yaml")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let configure: (inout GatewayConfiguration) -> Void = { configuration in
            if let url {
                configuration.store.kind = .postgres
                configuration.store.url = url
            }
        }
        let recorded: [String: Int] = try await TestGateway.withRunning(in: directory, pki: pki, configure: configure) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let widgets: [[String: Any]] = [
                    ["id": "w1", "kind": "scores", "family": "systemSmall"],
                    ["id": "w2", "kind": "news", "family": "systemMedium"],
                ]
                for token in Self.devices {
                    #expect(try await api.putDevice(bundle: Self.bundle, token: token, apiKey: credentials.apiKey, widgets: widgets).status == 200)
                }
                // Device C's news widget reloads by its timeline in two minutes: a push now is absorbed.
                let timeline = try await api.putTimeline(
                    bundle: Self.bundle, token: Self.devices[2], widget: "w2", apiKey: credentials.apiKey,
                    entries: [Date()], policy: ["after": Date().addingTimeInterval(120).timeIntervalSince1970]
                )
                #expect(timeline.status == 200 || timeline.status == 204)
            }
            let a = Self.devices[0], b = Self.devices[1], c = Self.devices[2]
            var headers: [String] = []
            func send(_ token: String, _ kind: String, priority: String = "10", expiration: Int64? = nil) async throws {
                let answer = try await Self.push(token, kind: kind, priority: priority, expiration: expiration, gateway: gateway, sender: sender)
                #expect(answer.status == 200)
                headers.append(answer.header("reloadgate-decision") ?? "?")
            }
            try await send(a, "scores")  // scheduled
            try await send(b, "scores")  // scheduled
            try await Task.sleep(for: .milliseconds(200))
            try await send(a, "scores")  // deferred (interval)
            try await send(a, "scores")  // merged
            try await send(b, "news", priority: "5")  // deferred (priority 5)
            try await send(c, "news")  // absorbed (timeline in 2 min)
            // Expires in 10 s, but the interval holds it for 5 min: expired.
            try await send(b, "scores", expiration: Int64(Date().timeIntervalSince1970) + 10)
            try await send(a, "weather")  // no widget of that kind: no-match
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let call = try await api.reload(bundle: Self.bundle, body: "{}", secret: credentials.webhookSecret)
                #expect(call.status == 202, "\(call.body)")
            }
            #expect(headers.contains("scheduled") && headers.contains("deferred") && headers.contains("merged"), "\(headers)")
            #expect(headers.contains("absorbed") && headers.contains("expired") && headers.contains("no-match"), "\(headers)")
            let stats = try await ReloadGateProcess.run(["stats", "--json", "--socket", gateway.configuration.adminSocketPath], in: Self.root)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
            return try #require(object["decisions"] as? [String: Int])
        }

        let trace = directory.path("trace.jsonl")
        let exported = try await ReloadGateProcess.run(["export", "--since", "1h", "--config", config, "--output", trace], in: Self.root)
        try #require(exported.status == 0, "\(exported.stderr)")
        let text = try String(contentsOfFile: trace, encoding: .utf8)
        // No token in the clear: pseudonyms.
        for token in Self.devices { #expect(!text.contains(token)) }

        let replayed = try await ReloadGateProcess.run(["simulate", trace, "--check", "--json", "--no-report"], in: Self.root)
        #expect(replayed.status == 0, "\(replayed.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(replayed.stdout.utf8)) as? [String: Any])
        let decided = recorded.filter { $0.key != "cancelled" && $0.key != "forwarded" }.values.reduce(0, +)
        #expect(decided >= 14, "\(recorded)")
        #expect(report["compared"] as? Int == decided, "\(recorded) \(replayed.stdout)")
        #expect(report["mismatchCount"] as? Int == 0)
        #expect(report["requests"] as? Int == 9)
        // The replay's own counts by kind are the gateway's.
        let kinds = try #require(report["kinds"] as? [[String: Any]])
        for field in ["scheduled", "merged", "absorbed", "deferred"] {
            let total = kinds.compactMap { $0[field] as? Int }.reduce(0, +)
            #expect(total == recorded[field, default: 0], "\(field)")
        }
        #expect(report["unmatchedRequests"] as? Int == recorded["no-match"])

        // One recorded decision changed: the check finds it and fails.
        let altered = directory.path("altered.jsonl")
        let changed = text.replacingOccurrences(of: #""decided":["scheduled"]"#, with: #""decided":["merged"]"#, options: [], range: text.range(of: #""decided":["scheduled"]"#))
        #expect(changed != text)
        try changed.write(toFile: altered, atomically: true, encoding: .utf8)
        let failed = try await ReloadGateProcess.run(["simulate", altered, "--check", "--no-report"], in: Self.root)
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("1 of \(decided) decisions differ"), "\(failed.stderr)")
    }
}
