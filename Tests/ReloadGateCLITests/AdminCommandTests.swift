import AsyncHTTPClient
import Foundation
import NIOHTTP1
import NIOSSL
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The operator's commands against a running `reloadgate serve`, over its admin socket: pending,
/// explain, budget, cancel, flush and stats, their JSON checked against what the test did and their
/// tables for the key columns.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct AdminCommandTests {
    static let bundle = "com.example.admin"
    static let token = String(repeating: "ad", count: 32)

    /// Runs `reloadgate ARGS --json` and parses the object it prints.
    static func json(_ arguments: [String], in directory: TemporaryDirectory) async throws -> [String: Any] {
        let result = try await ReloadGateProcess.run(arguments + ["--json"], in: directory.url)
        try #require(result.status == 0, "\(arguments): \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
    }

    /// The outbox's lines as objects.
    static func outbox(_ directory: TemporaryDirectory) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: directory.path("data/outbox.jsonl"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    static func waitForOutbox(_ directory: TemporaryDirectory, lines: Int) async throws -> [[String: Any]] {
        _ = try await eventually { outbox(directory).count >= lines }
        return outbox(directory)
    }

    @Test func pendingExplainBudgetCancelFlushAndStatsTellWhatTheTestDid() async throws {
        let directory = try TemporaryDirectory("admin-cli")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", Self.bundle, "--json"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")
        let credentials = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: String])
        let secret = try #require(credentials["webhookSecret"])

        // A bucket of one token and no minimum interval: after the first delivery, pushes wait for budget.
        let environment = [
            "RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0",
            "RELOADGATE_SCHEDULING_BURST": "1", "RELOADGATE_SCHEDULING_MINIMUM_INTERVAL": "0",
            // A line per accepted call and push, with its request id.
            "RELOADGATE_LOG_LEVEL": "debug",
        ]
        let (server, port) = try await CrashRecoveryTests.serve(in: directory, environment: environment)
        defer { server.send(SIGKILL) }

        // The admin socket: mode 0600, in the data directory; the admin API is not on the public listener.
        let socket = directory.path("data/admin.sock")
        let mode = try FileManager.default.attributesOfItem(atPath: socket)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)

        let requestIDs = try await CrashRecoveryTests.withClient(directory, port: port) { api in
            let put = try await api.putDevice(
                bundle: Self.bundle,
                token: Self.token,
                apiKey: try #require(credentials["apiKey"]),
                widgets: [["id": "w1", "kind": "scores", "family": "systemSmall", "configuration": ["team": "42"]]]
            )
            try #require(put.status == 200, "\(put.body)")
            for path in ["/v1/pending", "/v1/stats", "/v1/budget/\(Self.token)"] {
                #expect(try await api.send(.GET, path).status == 404, "\(path) answered on the public listener")
            }
            #expect(try await api.send(.POST, "/v1/flush", body: Data("{}".utf8)).status == 404)
            // Three pushes: the first goes at once, the second waits for budget, the third merges into it.
            var ids: [Int] = []
            for _ in 0..<3 {
                let answer = try await api.reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: secret)
                try #require(answer.status == 202, "\(answer.body)")
                ids.append(try #require(answer.json["requestId"] as? Int))
            }
            return ids
        }
        let firstDelivery = try #require(try await Self.waitForOutbox(directory, lines: 1).first)
        let apnsID = try #require(firstDelivery["apnsId"] as? String)

        // pending: one reload, waiting for budget, serving requests 2 and 3.
        let pending = try await Self.json(["pending"], in: directory)
        let rows = try #require(pending["pending"] as? [[String: Any]])
        try #require(rows.count == 1, "\(pending)")
        #expect(rows[0]["widget"] as? String == "w1")
        #expect(rows[0]["kind"] as? String == "scores")
        #expect(rows[0]["device"] as? String == Self.token)
        #expect(rows[0]["configuration"] as? [String: String] == ["team": "42"])
        #expect(rows[0]["requestCount"] as? Int == 2)
        #expect(rows[0]["requests"] as? [Int] == [requestIDs[1], requestIDs[2]])
        #expect(rows[0]["waitsFor"] as? String == "budget")
        #expect((rows[0]["dueInSeconds"] as? Double ?? 0) > 60)
        #expect(try await Self.json(["pending", "--kind", "news"], in: directory)["pending"] as? [Any] != nil)
        #expect((try await Self.json(["pending", "--kind", "news"], in: directory)["pending"] as? [Any])?.isEmpty == true)
        #expect((try await Self.json(["pending", "--due-before", "1m"], in: directory)["pending"] as? [Any])?.isEmpty == true)
        #expect((try await Self.json(["pending", "--device", Self.token, "--bundle", Self.bundle], in: directory)["pending"] as? [Any])?.count == 1)
        let table = try await ReloadGateProcess.run(["pending"], in: directory.url)
        #expect(table.status == 0)
        for column in ["DEVICE", "WIDGET", "KIND", "CONFIGURATION", "DUE", "PRIORITY", "REQUESTS", "WAITS FOR", "budget", "scores", #"{"team":"42"}"#] {
            #expect(table.stdout.contains(column), "pending table lacks \(column): \(table.stdout)")
        }

        // explain: the first request was scheduled and delivered; the delivery by its apns-id; the second deferred.
        let first = try await Self.json(["explain", String(requestIDs[0])], in: directory)
        let firstRequest = try #require(first["request"] as? [String: Any])
        let firstDecisions = try #require(firstRequest["decisions"] as? [[String: Any]])
        #expect(firstDecisions.map { $0["decision"] as? String } == ["scheduled"])
        let deliveries = try #require(first["deliveries"] as? [[String: Any]])
        #expect(deliveries.map { $0["apnsId"] as? String } == [apnsID])
        #expect(deliveries.first?["state"] as? String == "sent")
        let byApnsID = try await Self.json(["explain", apnsID], in: directory)
        #expect((byApnsID["delivery"] as? [String: Any])?["requests"] as? [Int] == [requestIDs[0]])
        #expect(((byApnsID["requests"] as? [[String: Any]])?.first)?["id"] as? Int == requestIDs[0])
        let second = try await Self.json(["explain", String(requestIDs[1])], in: directory)
        let secondDecision = try #require(((second["request"] as? [String: Any])?["decisions"] as? [[String: Any]])?.first)
        #expect(secondDecision["decision"] as? String == "deferred")
        #expect((secondDecision["reason"] as? String ?? "").contains("budget"))
        #expect((second["pending"] as? [Any])?.count == 1)
        let explained = try await ReloadGateProcess.run(["explain", String(requestIDs[1])], in: directory.url)
        #expect(explained.stdout.contains("DECISION") && explained.stdout.contains("deferred") && explained.stdout.contains("REASON"))

        // budget: the one token is spent, the last reload is the first delivery, a reload is pending.
        let budget = try await Self.json(["budget", Self.token], in: directory)
        let instance = try #require((budget["instances"] as? [[String: Any]])?.first)
        #expect(instance["tokens"] as? Int == 0)
        #expect(instance["burst"] as? Int == 1)
        #expect(instance["lastReload"] as? String != nil)
        #expect(instance["nextToken"] as? String != nil)
        #expect((instance["pending"] as? [String: Any])?["requestCount"] as? Int == 2)
        #expect((budget["recentDeliveries"] as? [[String: Any]])?.map { $0["apnsId"] as? String } == [apnsID])
        let budgetTable = try await ReloadGateProcess.run(["budget", Self.token, "--widget", "w1"], in: directory.url)
        #expect(budgetTable.stdout.contains("TOKENS") && budgetTable.stdout.contains("0/1 (daily 40)") && budgetTable.stdout.contains("NEXT TOKEN"))

        // stats: the three decisions, one delivery sent, one reload pending.
        let stats = try await Self.json(["stats"], in: directory)
        let decisions = try #require(stats["decisions"] as? [String: Int])
        #expect(decisions["scheduled"] == 1 && decisions["deferred"] == 1 && decisions["merged"] == 1)
        #expect((stats["deliveries"] as? [String: Int])?["sent"] == 1)
        #expect(stats["pendingReloads"] as? Int == 1)
        #expect(stats["deliveryQueue"] as? Int == 0)
        let statsText = try await ReloadGateProcess.run(["stats"], in: directory.url)
        for part in ["decisions:", "scheduled 1", "deferred 1", "merged 1", "deliveries:", "sent 1", "pending reloads:  1", "delivery queue:   0"] {
            #expect(statsText.stdout.contains(part), "stats lacks \(part): \(statsText.stdout)")
        }

        // flush without --ignore-budget: due now, but the budget still holds it.
        let flushed = try await ReloadGateProcess.run(["flush", "--device", Self.token], in: directory.url)
        #expect(flushed.status == 0)
        #expect(flushed.stdout.contains("flushed 1 pending reload(s)"))
        #expect((try await Self.json(["pending"], in: directory)["pending"] as? [[String: Any]])?.first?["waitsFor"] as? String == "budget")
        #expect(Self.outbox(directory).count == 1)
        // flush --ignore-budget: it goes now, with requests 2 and 3.
        let forced = try await Self.json(["flush", "--bundle", Self.bundle, "--ignore-budget"], in: directory)
        #expect(forced["flushed"] as? Int == 1)
        let lines = try await Self.waitForOutbox(directory, lines: 2)
        #expect(lines.count == 2)
        #expect(lines.last?["requests"] as? [Int] == [requestIDs[1], requestIDs[2]])
        #expect((try await Self.json(["pending"], in: directory)["pending"] as? [Any])?.isEmpty == true)

        // cancel: a fourth push waits for budget; cancelling it leaves nothing pending and nothing sent.
        let fourth = try await CrashRecoveryTests.withClient(directory, port: port) { api in
            try await api.reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: secret).json["requestId"] as? Int
        }
        let fourthID = try #require(fourth)
        let cancelled = try await Self.json(["cancel", String(fourthID)], in: directory)
        #expect((cancelled["cancelled"] as? [[String: Any]])?.first?["requests"] as? [Int] == [fourthID])
        #expect((try await Self.json(["pending"], in: directory)["pending"] as? [Any])?.isEmpty == true)
        let statsAfterCancel = try await Self.json(["stats"], in: directory)
        #expect(statsAfterCancel["pendingReloads"] as? Int == 0)
        #expect((statsAfterCancel["decisions"] as? [String: Any])?["cancelled"] as? Int == 1)
        // explain tells why nothing was sent: the request's decision, then the operator's cancellation.
        let cancelledRequest = try await Self.json(["explain", String(fourthID)], in: directory)
        let cancelledDecisions = try #require((cancelledRequest["request"] as? [String: Any])?["decisions"] as? [[String: Any]])
        #expect(cancelledDecisions.map { $0["decision"] as? String } == ["deferred", "cancelled"])
        #expect((cancelledDecisions.last?["reason"] as? String)?.contains("operator") == true)
        let again = try await ReloadGateProcess.run(["cancel", String(fourthID)], in: directory.url)
        #expect(again.status == 1)
        #expect(again.stderr.contains("has no pending reload"))
        let fifth = try await CrashRecoveryTests.withClient(directory, port: port) { api in
            try await api.reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: secret).json["requestId"] as? Int
        }
        let fifthID = try #require(fifth)
        let cancelText = try await ReloadGateProcess.run(["cancel", String(fifthID)], in: directory.url)
        #expect(cancelText.status == 0)
        #expect(cancelText.stdout.contains("cancelled 1 pending reload(s)") && cancelText.stdout.contains("requests [\(fifthID)]"))
        try await Task.sleep(for: .milliseconds(300))
        #expect(Self.outbox(directory).count == 2)

        // explain by a push's apns-id: the id its sender saw in the answer names the request.
        let sender = ProviderTokenFactory(keyID: "ADMINKEY01", teamID: "ADMINTEAM1")
        try sender.publicKeyPEM.write(toFile: directory.path("sender.pem"), atomically: true, encoding: .utf8)
        let key = try await ReloadGateProcess.run(
            ["keys", "add", "--kid", sender.keyID, "--team", sender.teamID, "--public-key", "sender.pem"], in: directory.url
        )
        try #require(key.status == 0, "\(key.stderr)")
        #expect(key.stdout.contains("the running gateway uses it now"), "\(key.stdout)")
        // The app was added without a team: the key's token is refused for it (and the app is now in the
        // gateway's memory). Bound to the key's team through the running gateway, the next push goes: no
        // wait, no stale app kept.
        let ingress = try #require(server.standardOutput.firstMatch(of: /APNs pushes to https:\/\/127\.0\.0\.1:(\d+)/))
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(directory.path("certs/ca.pem")))
        let before = try await RawHTTP2Client.connect(port: try #require(Int(ingress.1)), tls: tls)
        let refused = try await before.send(
            RawHTTP2Client.push(token: Self.token, [
                ("authorization", "bearer \(sender.token())"), ("apns-topic", Self.bundle + ".push-type.widgets"),
                ("apns-push-type", "widgets"),
            ]),
            body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
        )
        await before.close()
        #expect(refused.status == 400 && refused.reason == "TopicDisallowed", "\(refused.body)")
        let team = try await ReloadGateProcess.run(["apps", "set-team", Self.bundle, "--team", sender.teamID], in: directory.url)
        try #require(team.status == 0, "\(team.stderr)")
        let client = try await RawHTTP2Client.connect(port: try #require(Int(ingress.1)), tls: tls)
        let pushID = "8E1C5A0E-7B7C-4A55-9C39-2F3B4A6D1E01"
        let pushed = try await client.send(
            RawHTTP2Client.push(token: Self.token, [
                ("authorization", "bearer \(sender.token())"), ("apns-topic", Self.bundle + ".push-type.widgets"),
                ("apns-push-type", "widgets"), ("apns-id", pushID),
            ]),
            body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
        )
        await client.close()
        try #require(pushed.status == 200, "\(pushed)")
        let push = try await Self.json(["explain", pushID], in: directory)
        let pushRequest = try #require(push["request"] as? [String: Any])
        #expect(pushRequest["source"] as? String == "push")
        #expect(pushRequest["apnsId"] as? String == pushID.lowercased())
        #expect((pushRequest["decisions"] as? [[String: Any]])?.first?["decision"] as? String == "deferred")

        // The log names each accepted call and push by its request id (and the push by its apns-id).
        let logLines = (server.standardOutput + server.standardError).split(separator: "\n")
        for id in requestIDs {
            #expect(logLines.contains { $0.contains("reload webhook call accepted") && $0.contains("request=\(id) ") }, "no log line for request \(id)")
        }
        let pushRequestID = try #require(pushRequest["id"] as? Int)
        #expect(logLines.contains {
            $0.contains("push accepted") && $0.contains("request=\(pushRequestID) ") && $0.contains("apns-id=\(pushID)")
        })

        // Errors: unknown ids, a bad time, the apns-id of a released delivery.
        let unknown = try await ReloadGateProcess.run(["explain", "999999"], in: directory.url)
        #expect(unknown.status == 1 && unknown.stderr.contains("no request 999999"))
        for time in ["soon", "1e300d", "nans", "infm", "-1h", "99999999999999999999d"] {
            let badTime = try await ReloadGateProcess.run(["pending", "--due-before=\(time)"], in: directory.url)
            #expect(badTime.status == 2 && badTime.stderr.hasPrefix("reloadgate: error: --due-before \(time)"), "\(badTime.stderr)")
        }
        for limit in ["0", "10001", "9223372036854775807", "-9223372036854775808", "99999999999999999999"] {
            let badLimit = try await ReloadGateProcess.run(["pending", "--limit", limit], in: directory.url)
            #expect(badLimit.status != 0 && badLimit.stderr.hasPrefix("reloadgate: error: "), "\(limit): \(badLimit.stderr)")
        }
        let released = try await ReloadGateProcess.run(["cancel", apnsID], in: directory.url)
        #expect(released.status == 1 && released.stderr.contains("cannot be cancelled"))
    }

    /// The CLI's outputs are what they were when it walked `JSONSerialization`'s dictionaries: keys in
    /// Foundation's order (case-insensitive, digit runs by value; `JSONEncoder` sorts by code point) and
    /// `/` escaped in `--json`, as the table shows a configuration.
    @Test func theOutputsKeepTheirKeyOrderAndEscapes() async throws {
        let directory = try TemporaryDirectory("admin-cli-order")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", Self.bundle, "--json"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")
        let credentials = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: String])
        let (server, port) = try await CrashRecoveryTests.serve(in: directory, environment: ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"])
        defer { server.send(SIGKILL) }
        try await CrashRecoveryTests.withClient(directory, port: port) { api in
            let configuration: [String: Any] = ["Team": "42", "a": 1.5, "10": 2, "9": 1]
            let widgets: [[String: Any]] = [["id": "w/1", "kind": "news", "family": "systemSmall", "configuration": configuration]]
            let answer = try await api.putDevice(bundle: Self.bundle, token: Self.token, apiKey: try #require(credentials["apiKey"]), widgets: widgets)
            try #require(answer.status == 200, "\(answer.body)")
        }
        let table = try await ReloadGateProcess.run(["devices", "show", Self.token], in: directory.url)
        #expect(table.stdout.contains(#"w/1  "#) && table.stdout.contains(#"{"9":1,"10":2,"a":1.5,"Team":"42"}"#), "\(table.stdout)")
        let json = try await ReloadGateProcess.run(["devices", "show", Self.token, "--json"], in: directory.url)
        #expect(json.stdout.contains(#""configuration":{"9":1,"10":2,"a":1.5,"Team":"42"}"#) && json.stdout.contains(#""id":"w\/1""#), "\(json.stdout)")
    }

    @Test func devicesAndRotateKeyWorkThroughTheRunningGateway() async throws {
        let directory = try TemporaryDirectory("admin-cli")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", Self.bundle, "--json"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")
        let credentials = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: String])
        let oldKey = try #require(credentials["apiKey"])
        let (server, port) = try await CrashRecoveryTests.serve(in: directory, environment: ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"])
        defer { server.send(SIGKILL) }
        let other = String(repeating: "be", count: 32)
        try await CrashRecoveryTests.withClient(directory, port: port) { api in
            for (token, widgets) in [(Self.token, 2), (other, 1)] {
                let answer = try await api.putDevice(
                    bundle: Self.bundle,
                    token: token,
                    apiKey: oldKey,
                    widgets: (0..<widgets).map { ["id": "w\($0)", "kind": "news", "family": "systemSmall", "configuration": ["lang": "de"]] }
                )
                try #require(answer.status == 200, "\(answer.body)")
            }
        }

        let listed = try #require(try await Self.json(["devices", "list"], in: directory)["devices"] as? [[String: Any]])
        #expect(listed.map { $0["device"] as? String } == [Self.token, other])
        #expect(listed.map { $0["widgets"] as? Int } == [2, 1])
        #expect(listed.allSatisfy { $0["active"] as? Bool == true && $0["bundle"] as? String == Self.bundle })
        let table = try await ReloadGateProcess.run(["devices", "list"], in: directory.url)
        #expect(table.stdout.contains("BUNDLE") && table.stdout.contains("STATUS") && table.stdout.contains(other))
        let shown = try #require((try await Self.json(["devices", "show", Self.token], in: directory)["devices"] as? [[String: Any]])?.first)
        #expect((shown["widgets"] as? [[String: Any]])?.map { $0["id"] as? String } == ["w0", "w1"])
        #expect((shown["widgets"] as? [[String: Any]])?.first?["configuration"] as? [String: String] == ["lang": "de"])
        let removed = try await Self.json(["devices", "remove", other], in: directory)
        #expect((removed["removed"] as? [String: Any])?["widgets"] as? Int == 1)
        #expect((try await Self.json(["devices", "list"], in: directory)["devices"] as? [Any])?.count == 1)
        let missing = try await ReloadGateProcess.run(["devices", "show", other], in: directory.url)
        #expect(missing.status == 1 && missing.stderr.contains("no device"))

        // rotate-key: the new key works at once, the old one no longer (the gateway forgot it).
        let rotated = try await Self.json(["apps", "rotate-key", Self.bundle], in: directory)
        let newKey = try #require(rotated["apiKey"] as? String)
        #expect(newKey != oldKey)
        #expect(rotated["webhookSecret"] is NSNull && rotated["registrationKey"] is NSNull, "kept: \(rotated)")
        let statuses = try await CrashRecoveryTests.withClient(directory, port: port) { api in
            let widgets: [[String: Any]] = [["id": "w0", "kind": "news", "family": "systemSmall"]]
            let old = try await api.putDevice(bundle: Self.bundle, token: Self.token, apiKey: oldKey, widgets: widgets).status
            let new = try await api.putDevice(bundle: Self.bundle, token: Self.token, apiKey: newKey, widgets: widgets).status
            return [old, new]
        }
        #expect(statuses == [401, 200])

        // Without a gateway it changes the data directory itself.
        server.send(SIGTERM)
        _ = try await server.waitForExit()
        let offline = try await Self.json(["apps", "rotate-key", Self.bundle, "--webhook-secret"], in: directory)
        #expect((offline["webhookSecret"] as? String)?.hasPrefix("rgs_") == true)
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let offlineKey = try #require(offline["apiKey"] as? String)
        #expect(try await store.app(forAPIKey: offlineKey) != nil)
        #expect(try await store.app(forAPIKey: newKey) == nil)
    }

    @Test func theAdminAPIOnItsTLSListenerNeedsTheToken() async throws {
        let directory = try TemporaryDirectory("admin-tls")
        defer { directory.remove() }
        let environment = ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0", "RELOADGATE_ADMIN_TLS": "true", "RELOADGATE_ADMIN_PORT": "0"]
        let (server, port) = try await CrashRecoveryTests.serve(in: directory, environment: environment)
        defer { server.send(SIGKILL) }
        let line = try await server.waitForOutputLine(containing: "admin API on https://")
        let adminPort = try #require(line.firstMatch(of: /127\.0\.0\.1:(\d+)/)).1
        #expect(line.contains("data/admin.token"))
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path("data/admin.token"))[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)

        // With the token (data/admin.token and certs/ca.pem by default): the same answers as on the socket.
        let url = "https://localhost:\(adminPort)"
        let stats = try await Self.json(["stats", "--url", url], in: directory)
        #expect((stats["decisions"] as? [String: Int])?["scheduled"] == 0)
        let pending = try await Self.json(["pending", "--url", url], in: directory)
        #expect((pending["pending"] as? [Any])?.isEmpty == true)
        // Without it: refused.
        try "rga_not-the-token-at-all".write(toFile: directory.path("wrong.token"), atomically: true, encoding: .utf8)
        let refused = try await ReloadGateProcess.run(["stats", "--url", url, "--token-file", "wrong.token"], in: directory.url)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("authorization: bearer"))
        // An app's registration key (the one an app may carry) is refused with 403, naming its scope.
        try "rgr_Jc0r9f2sd5ZlWq7v1fB8VqY3Cw4eQx2p0mHn6tKu1aE".write(toFile: directory.path("app.key"), atomically: true, encoding: .utf8)
        let registration = try await ReloadGateProcess.run(["stats", "--url", url, "--token-file", "app.key"], in: directory.url)
        #expect(registration.status == 1)
        #expect(registration.stderr.contains("this is the app's registration key: it may only put and delete"), "\(registration.stderr)")
        // The public listener still does not serve it.
        let publicAnswer = try await CrashRecoveryTests.withClient(directory, port: port) { api in try await api.send(.GET, "/v1/stats").status }
        #expect(publicAnswer == 404)
    }

    @Test func theCommandsSaySoWhenNoGatewayRuns() async throws {
        let directory = try TemporaryDirectory("admin-cli")
        defer { directory.remove() }
        for command in [["pending"], ["stats"], ["explain", "1"], ["budget", Self.token], ["flush"], ["cancel", "1"]] {
            let result = try await ReloadGateProcess.run(command, in: directory.url)
            #expect(result.status == 1, "\(command)")
            #expect(result.stderr.contains("no gateway is running here"), "\(command): \(result.stderr)")
        }
        let elsewhere = try await ReloadGateProcess.run(["stats", "--socket", directory.path("nowhere.sock")], in: directory.url)
        #expect(elsewhere.status == 1 && elsewhere.stderr.contains("nowhere.sock"))
    }
}
