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
@Suite(.timeLimit(.minutes(10)), .heavy)
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
            let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
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

    /// Controls (issue 29) in an exported trace: control tokens registered and adopted, controls pushes
    /// scheduled, deferred by the controls' interval, merged, expired, and a webhook call to the controls of
    /// a kind with `match`; the replay, on the controls' policies, makes every decision the gateway made,
    /// and the report shows the controls under their own kind.
    @Test(arguments: stores)
    func anExportedTraceWithControlPushesReplaysToTheGatewaysDecisions(store kind: String) async throws {
        let directory = try TemporaryDirectory("simulate-controls")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let sender = ProviderTokenFactory(keyID: "SIMSEND002", teamID: "SIMTEAM002")
        var yaml = "data:\n  directory: \(directory.path("data"))\n"
        let url = kind == "postgres" ? try await TestPostgres.newDatabase() : nil
        let credentials: AppCredentials
        if let url {
            yaml += "store:\n  kind: postgres\n  url: \(url)\n"
            let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
            defer { try? store.close() }
            credentials = try await sender.createApp(bundle: Self.bundle, in: store)
        } else {
            credentials = try await sender.createApp(bundle: Self.bundle, inStoreAt: directory.path("data"))
        }
        let config = directory.path("reloadgate.yaml")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let front = String(repeating: "f1", count: 32), back = String(repeating: "f2", count: 32), adopted = String(repeating: "f3", count: 32)
        let device = Self.devices[0]
        let recorded: [String: Int] = try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            if let url {
                configuration.store.kind = .postgres
                configuration.store.url = url
            }
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let widgets: [[String: Any]] = [["id": "w1", "kind": "garage", "family": "systemSmall"]]
                #expect(try await api.putDevice(bundle: Self.bundle, token: device, apiKey: credentials.apiKey, widgets: widgets).status == 200)
                for (token, door) in [(front, "front"), (back, "back")] {
                    let answer = try await api.putControl(
                        bundle: Self.bundle, token: token, apiKey: credentials.apiKey, kind: "garage", configuration: ["door": door]
                    )
                    #expect(answer.status == 200, "\(answer.body)")
                }
            }
            var decisions: [String] = []
            func send(_ token: String, pushType: String = "controls", priority: String = "10", expiration: Int64? = nil) async throws {
                let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
                defer { Task { await client.close() } }
                var headers = [
                    ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(Self.bundle).push-type.\(pushType)"),
                    ("apns-push-type", pushType), ("apns-priority", priority),
                ]
                if let expiration { headers.append(("apns-expiration", String(expiration))) }
                let answer = try await client.send(RawHTTP2Client.push(token: token, headers), body: Array(#"{"aps":{"content-changed":true}}"#.utf8))
                #expect(answer.status == 200, "\(answer.body)")
                decisions.append(answer.header("reloadgate-decision") ?? "?")
            }
            try await send(front)  // scheduled
            try await Task.sleep(for: .milliseconds(200))
            try await send(front)  // deferred: the controls' minute
            try await send(front)  // merged
            try await send(back, priority: "5")  // deferred: priority 5
            try await send(front, expiration: Int64(Date().timeIntervalSince1970) + 10)  // merged into a reload due in a minute: expired
            try await send(adopted)  // an unknown control token: adopted, scheduled
            try await send(device, pushType: "widgets")  // the widget of the same kind: scheduled
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let call = try await api.reload(
                    bundle: Self.bundle, body: #"{"pushType":"controls","kind":"garage","match":{"door":"back"}}"#, secret: credentials.webhookSecret
                )
                #expect(call.status == 202, "\(call.body)")
                #expect(call.json["targets"] as? Int == 1)
            }
            #expect(decisions == ["scheduled", "deferred", "merged", "deferred", "expired", "scheduled", "scheduled"])
            let stats = try await ReloadGateProcess.run(["stats", "--json", "--socket", gateway.configuration.adminSocketPath], in: Self.root)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
            return try #require(object["decisions"] as? [String: Int])
        }

        let trace = directory.path("trace.jsonl")
        let exported = try await ReloadGateProcess.run(["export", "--since", "1h", "--config", config, "--output", trace], in: Self.root)
        try #require(exported.status == 0, "\(exported.stderr)")
        let text = try String(contentsOfFile: trace, encoding: .utf8)
        #expect(text.components(separatedBy: #""pushType":"controls""#).count - 1 == 3, "three control tokens registered: \(text)")

        let replayed = try await ReloadGateProcess.run(["simulate", trace, "--check", "--json", "--no-report"], in: Self.root)
        #expect(replayed.status == 0, "\(replayed.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(replayed.stdout.utf8)) as? [String: Any])
        let decided = recorded.filter { $0.key != "cancelled" && $0.key != "forwarded" }.values.reduce(0, +)
        #expect(decided == 8, "\(recorded)")
        #expect(report["compared"] as? Int == decided, "\(recorded) \(replayed.stdout)")
        #expect(report["mismatchCount"] as? Int == 0)
        let kinds = try #require(report["kinds"] as? [[String: Any]])
        let names = kinds.compactMap { $0["kind"] as? String }
        #expect(names.contains("control:garage") && names.contains("garage"), "\(names)")

        // The same trace on a policy with a 1 s interval for controls: the push deferred by the controls'
        // minute goes at once in the replay, and the check says so: the controls' policy is what decided.
        let slow = directory.path("slow.yaml")
        try "scheduling:\n  controls:\n    minimumInterval: 1\n".write(toFile: slow, atomically: true, encoding: .utf8)
        let other = try await ReloadGateProcess.run(["simulate", trace, "--check", "--policy", slow, "--no-report"], in: Self.root)
        #expect(other.status == 1, "a controls' policy of 1 s changes the deferred push's decision: \(other.stderr)")
    }
}
