import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateMockAPNs
import ReloadGateTesting
import Testing

/// Whether the browser tests run: Chromium and its driver are installed (Debian's `chromium` and
/// `chromium-driver`), or this is CI, where their absence must fail the run rather than skip it.
let browserTestsEnabled =
    (FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"))
    || ProcessInfo.processInfo.environment["CI"] == "true"

/// The dashboard end to end: a gateway with known traffic (pushes, webhook calls, a flush, a 410 from the
/// mock APNs), `reloadgate dashboard` in front of its admin socket, and the page opened in headless
/// Chromium (selenium from PyPI, in `.build/browser-venv`). The numbers on the page must be those of
/// `reloadgate stats --json` and `pending --json`, the explain box must find a push by its apns-id, and
/// a browser without the token is refused. Screenshots go to `.build/dashboard-screenshots/`.
@Suite(.timeLimit(.minutes(10)), .enabled(if: browserTestsEnabled), .heavy)
struct DashboardBrowserTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let bundle = "com.example.scores"
    static let deviceA = String(repeating: "a1", count: 32)
    static let deviceB = String(repeating: "b2", count: 32)
    /// A garage door control's token (issue 29).
    static let control = String(repeating: "c1", count: 32)
    /// A Live Activity's token (issue 45).
    static let activity = String(repeating: "a7", count: 32)

    /// The virtual environment's python with selenium. Made once per test process: the browser suites run
    /// in parallel, and two of them making the same venv at once left one with a python but no pip yet
    /// ("No module named pip" in a CI run).
    static func python() async throws -> String { try await preparedPython.value }

    private static let preparedPython = Task<String, any Error> {
        let environment = root.appendingPathComponent(".build/browser-venv")
        let python = environment.appendingPathComponent("bin/python").path
        if FileManager.default.isExecutableFile(atPath: python),
            (try? await ChildProcess.run(python, ["-c", "import selenium"], in: root))?.status == 0
        {
            return python
        }
        // --clear: a venv left half-made (a python without pip) by an interrupted run is made again.
        let made = try await ChildProcess.run("/usr/bin/env", ["python3", "-m", "venv", "--clear", environment.path], in: root)
        guard made.status == 0 else { throw BrowserSetupError(message: "python3 -m venv: \(made.error)") }
        let installed = try await ChildProcess.run(
            python, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "selenium>=4.20"], in: root, timeout: .seconds(600)
        )
        guard installed.status == 0 else {
            throw BrowserSetupError(message: "pip install selenium: \(installed.output) \(installed.error)")
        }
        return python
    }

    struct BrowserSetupError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    static func push(_ token: String, kind: String, gateway: TestGateway, sender: ProviderTokenFactory) async throws -> RawHTTP2Client.Answer {
        let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
        defer { Task { await client.close() } }
        return try await client.send(
            RawHTTP2Client.push(token: token, [
                ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(bundle).push-type.widgets"), ("apns-push-type", "widgets"),
            ]),
            body: Array(#"{"aps":{"content-changed":true},"reloadgate":{"kind":"\#(kind)"}}"#.utf8)
        )
    }

    /// Whether a budget's share on the page ("88%") is that of one token spent of `burst`, plus at most the
    /// tokens a daily budget refills in `after`.
    static func share(_ shown: String, spentOne burst: Int, daily: Int, after: Duration) -> Bool {
        guard shown.hasSuffix("%"), let percent = Int(shown.dropLast()) else { return false }
        let seconds = Double(after.components.seconds) + 1
        let least = Double(burst - 1) / Double(burst) * 100
        let most = min(Double(burst), Double(burst - 1) + seconds * Double(daily) / 86_400) / Double(burst) * 100
        return Double(percent) >= least.rounded() && Double(percent) <= most.rounded()
    }

    /// `reloadgate ARGS --json --socket SOCKET` as a JSON object.
    static func cli(_ arguments: [String], socket: String) async throws -> [String: Any] {
        let result = try await ReloadGateProcess.run(arguments + ["--json", "--socket", socket], in: root)
        try #require(result.status == 0, "reloadgate \(arguments): \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    @Test func thePageShowsWhatStatsAndPendingSayExplainsAPushAndRefusesWithoutTheToken() async throws {
        let python = try await Self.python()
        let directory = try TemporaryDirectory("dashboard")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey_DASHKEY001.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "DASHKEY001", teamID: "DASHTEAM01")
        defer { Task { await mock.stop() } }
        // Apple says device B is no longer valid.
        mock.answer { received in
            received.deviceToken == Self.deviceB ? .status(410, reason: "Unregistered", timestamp: Int64(Date().timeIntervalSince1970 * 1000)) : .status(200)
        }
        let sender = ProviderTokenFactory(keyID: "DASHSEND01", teamID: "DASHTEAM02")
        let credentials = try await sender.createApp(bundle: Self.bundle, inStoreAt: directory.path("data"))
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let widgets = [
                WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration()),
                WidgetRegistration(id: "w2", kind: "news", family: .systemMedium, configuration: WidgetConfiguration()),
            ]
            for token in [Self.deviceA, Self.deviceB] {
                _ = try await store.putDevice(app: credentials.app, token: try DeviceToken(token), widgets: widgets, previousToken: nil, now: Date())
            }
            _ = try await store.putControl(
                app: credentials.app, token: try DeviceToken(Self.control), control: ControlRegistration(kind: "garage"), previousToken: nil, now: Date()
            )
            _ = try await store.putActivity(
                app: credentials.app, token: try DeviceToken(Self.activity), activity: ActivityRegistration(attributesType: "DeliveryAttributes"),
                previousToken: nil, now: Date()
            )
        }
        try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
            // The deferred control and activity wait an hour, not their minute and 5 s: the page is read
            // later than `stats` and `pending`, and on a loaded machine that can be more than a minute.
            configuration.scheduling[.controls].defaultPolicy.minimumInterval = 3600
            configuration.scheduling[.liveactivity].defaultPolicy.minimumInterval = 3600
        }) { gateway in
            let socket = gateway.configuration.adminSocketPath
            // Known traffic: scores to both devices now (B's answered 410), a second one deferred by the
            // minimum interval, a flush that sends it, then news merged and deferred, a webhook call that
            // matches nothing.
            #expect(try await Self.push(Self.deviceA, kind: "scores", gateway: gateway, sender: sender).status == 200)
            #expect(try await Self.push(Self.deviceB, kind: "scores", gateway: gateway, sender: sender).status == 200)
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await Self.push(Self.deviceA, kind: "scores", gateway: gateway, sender: sender).header("reloadgate-decision") == "deferred")
            _ = try await Self.cli(["flush", "--device", Self.deviceA, "--ignore-budget"], socket: socket)
            try await Task.sleep(for: .milliseconds(500))
            let deferred = try await Self.push(Self.deviceA, kind: "news", gateway: gateway, sender: sender)
            #expect(deferred.status == 200)
            let apnsID = try #require(deferred.header("apns-id"))
            let secret = credentials.webhookSecret
            let calls = try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                return [
                    try await api.reload(bundle: Self.bundle, body: #"{"kind":"weather"}"#, secret: secret).status,
                    try await api.reload(bundle: Self.bundle, body: #"{"kind":"news","priority":5}"#, secret: secret).status,
                ]
            }
            #expect(calls == [202, 202])
            // The garage door control: one push goes now, the next waits for the controls' interval.
            let spent = ContinuousClock.now
            for expected in ["scheduled", "deferred"] {
                let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
                let answer = try await client.send(
                    RawHTTP2Client.push(token: Self.control, [
                        ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(Self.bundle).push-type.controls"),
                        ("apns-push-type", "controls"),
                    ]),
                    body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
                )
                await client.close()
                #expect(answer.header("reloadgate-decision") == expected, "\(answer.body)")
            }
            // The activity: one update goes now, the next waits for the activity's interval.
            let now = Int64(Date().timeIntervalSince1970)
            for (offset, expected) in [(0, "scheduled"), (1, "deferred")] {
                let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
                let answer = try await client.send(
                    RawHTTP2Client.push(token: Self.activity, [
                        ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(Self.bundle).push-type.liveactivity"),
                        ("apns-push-type", "liveactivity"),
                    ]),
                    body: Array(#"{"aps":{"timestamp":\#(now + Int64(offset)),"event":"update","content-state":{"eta":12}}}"#.utf8)
                )
                await client.close()
                #expect(answer.header("reloadgate-decision") == expected, "\(answer.body)")
            }
            // Settled: every delivery released has its outcome, device B is unregistered.
            var stats: [String: Any] = [:]
            _ = try await eventually(every: .milliseconds(50)) {
                stats = try await Self.cli(["stats"], socket: socket)
                return stats["deliveryQueue"] as? Int == 0 && (stats["deliveries"] as? [String: Int])?["failed"] == 1
            }
            let pending = try await Self.cli(["pending"], socket: socket)
            let forecast = try await Self.cli(["forecast"], socket: socket)
            let freshness = try await Self.cli(["freshness"], socket: socket)

            let dashboard = try ReloadGateProcess(["dashboard", "--socket", socket], in: Self.root)
            defer { dashboard.send(SIGTERM) }
            let line = try await dashboard.waitForOutputLine(containing: "dashboard on")
            let url = String(try #require(line.firstMatch(of: /http:\/\/127\.0\.0\.1:\d+\/dashboard#token=[A-Za-z0-9_-]+/)).0)
            let base = String(try #require(url.firstMatch(of: /http:\/\/127\.0\.0\.1:\d+/)).0)

            // Without the token, and with a wrong one: refused.
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await client.shutdown() } }
            for request in [HTTPClientRequest(url: base + "/v1/stats"), HTTPClientRequest(url: base + "/dashboard?token=wrong")] {
                #expect(try await client.execute(request, timeout: .seconds(30)).status == .unauthorized)
            }

            let shots = Self.root.appendingPathComponent(".build/dashboard-screenshots").path
            let script = Self.root.appendingPathComponent("Tests/Browser/dashboard_check.py").path
            let result = try await ChildProcess.run(python, [script, url, shots, apnsID.lowercased()], in: Self.root, timeout: .seconds(180))
            try #require(result.status == 0, "\(result.output) \(result.error)")
            let page = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
            let read = ContinuousClock.now - spent
            let figures = try #require(page["figures"] as? [String: String])

            #expect(page["address"] as? String == base + "/dashboard", "the token stays out of the address")
            #expect((page["cookies"] as? [String]) == [], "the dashboard set a cookie")
            for (kind, count) in try #require(stats["decisions"] as? [String: Int]) {
                #expect(figures["decisions.\(kind)"] == String(count), "decisions \(kind)")
            }
            for (state, count) in try #require(stats["deliveries"] as? [String: Int]) {
                #expect(figures["deliveries.\(state)"] == String(count), "deliveries \(state)")
            }
            #expect(figures["pendingReloads"] == String(try #require(stats["pendingReloads"] as? Int)))
            #expect(figures["unregistered"] == "1")
            #expect(figures["deliveryQueue"] == String(try #require(stats["deliveryQueue"] as? Int)))
            let listed = (pending["pending"] as? [[String: Any]] ?? []).compactMap { $0["instance"] as? Int }
            #expect(!listed.isEmpty)
            #expect(page["pending"] as? [Int] == listed)
            // The control's pending reload, named as a control, and the controls' budget beside the widgets'.
            let controlRow = try #require((pending["pending"] as? [[String: Any]] ?? []).first { $0["device"] as? String == Self.control })
            let controlInstance = try #require(controlRow["instance"] as? Int)
            #expect((page["pendingKinds"] as? [String: String])?[String(controlInstance)] == "control: garage", "\(page["pendingKinds"] ?? "")")
            let policies = try #require(page["policies"] as? [[String]])
            let controls = try #require(policies.first { $0.first == "other controls" }, "\(policies)")
            // One control, one token spent of 8 (one reload sent): 7 of 8 = 88%; the controls' 96 a day, burst 8.
            // Tokens refill (one a day's share at a time), so a page read later on a slow machine shows what
            // has come back since: at most `read` seconds of the daily budget.
            #expect(controls.count == 5 && [controls[0], controls[1], controls[3], controls[4]] == ["other controls", "1", "0", "96 / 8"], "\(controls)")
            #expect(Self.share(controls[2], spentOne: 8, daily: 96, after: read), "\(controls) after \(read)")
            // The activity's pending update, named by its attributes type, and the activities' budget: one
            // token spent of 12 = 92%; 240 a day, burst 12 (and what refilled since).
            let activityRow = try #require((pending["pending"] as? [[String: Any]] ?? []).first { $0["device"] as? String == Self.activity })
            let activityInstance = try #require(activityRow["instance"] as? Int)
            #expect((page["pendingKinds"] as? [String: String])?[String(activityInstance)] == "activity: DeliveryAttributes", "\(page["pendingKinds"] ?? "")")
            let activities = try #require(policies.first { $0.first == "other activities" }, "\(policies)")
            #expect(activities.count == 5 && [activities[0], activities[1], activities[3], activities[4]] == ["other activities", "1", "0", "240 / 12"], "\(activities)")
            #expect(Self.share(activities[2], spentOne: 12, daily: 240, after: read), "\(activities) after \(read)")
            #expect(policies.contains { $0.first == "other kinds" }, "\(policies)")
            // The traffic made every kind the test expects (so the comparison is not of zeros).
            let decisions = stats["decisions"] as? [String: Int] ?? [:]
            #expect(decisions["scheduled", default: 0] >= 2 && decisions["deferred", default: 0] >= 1 && decisions["no-match"] == 1)
            #expect((stats["deliveries"] as? [String: Int])?["failed"] == 1)

            let explained = try #require(page["explain"] as? String)
            #expect(explained.contains("apns-id \(apnsID.lowercased())"), "\(explained)")
            // The same decisions and reasons `reloadgate explain` gives.
            let cli = try await ReloadGateProcess.run(["explain", apnsID.lowercased(), "--json", "--socket", socket], in: Self.root)
            let explanation = try #require(try JSONSerialization.jsonObject(with: Data(cli.stdout.utf8)) as? [String: Any])
            let reasons = ((explanation["request"] as? [String: Any])?["decisions"] as? [[String: Any]] ?? []).compactMap { $0["reason"] as? String }
            #expect(!reasons.isEmpty)
            for reason in reasons { #expect(explained.contains(reason), "\(reason) not in \(explained)") }
            #expect(page["charts"] as? Int == 4)
            // The herd forecast's panel: what `reloadgate forecast` says (the pending reloads, here).
            let forecastTotal = try #require(forecast["total"] as? Int)
            #expect(forecastTotal == stats["pendingReloads"] as? Int, "\(forecast)")
            #expect(figures["forecast.total"] == String(forecastTotal))
            #expect(figures["forecast.peak"] == String(try #require((forecast["peak"] as? [String: Any])?["count"] as? Int)))
            #expect(figures["forecast.breaches"] == "0")
            // The freshness panel: what `reloadgate freshness` says. Device A's pushes were served (the
            // scores one at once, the deferred one by the flush); device B's failed with Apple's 410 (a miss
            // of `upstream`); the controls' and the activity's first went at once.
            let kinds = try #require(freshness["kinds"] as? [[String: Any]])
            let hours = kinds.compactMap { $0["hour"] as? [String: Any] }
            let judged = hours.filter { $0["met"] is Bool }
            #expect(figures["freshness.kinds"] == String(kinds.count))
            #expect(figures["freshness.met"] == String(judged.filter { $0["met"] as? Bool == true }.count))
            #expect(figures["freshness.below"] == String(judged.filter { $0["met"] as? Bool == false }.count))
            #expect(figures["freshness.requests"] == String(hours.compactMap { $0["requests"] as? Int }.reduce(0, +)))
            let scoresHour = try #require(kinds.first { $0["kind"] as? String == "scores" }?["hour"] as? [String: Any])
            #expect(scoresHour["served"] as? Int == 2 && scoresHour["requests"] as? Int == 3, "\(scoresHour)")
            #expect((scoresHour["misses"] as? [[String: Any]])?.contains { $0["cause"] as? String == "upstream" } == true, "\(scoresHour)")
            #expect(kinds.contains { $0["kind"] as? String == "control:garage" }, "\(kinds)")
            #expect((page["freshnessKinds"] as? [String]) == kinds.compactMap { $0["kind"] as? String }, "\(page["freshnessKinds"] ?? "")")
            #expect((page["phoneOverflow"] as? Int ?? 1) <= 0, "the page is wider than a phone")
            #expect((page["withoutToken"] as? String)?.contains("unauthorized") == true)
            #expect(FileManager.default.fileExists(atPath: shots + "/desktop.png"))

            // "What if": the commands the page shows, run as they are (in the test's directory, whose
            // reloadgate.yaml names the gateway's data): the export holds today's pushes, and the replay
            // runs the gateway's policy and the page's second one, which starts from today's budgets.
            let defaults = gateway.configuration.scheduling.defaultPolicy
            let lines = try #require(page["whatIf"] as? String).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            try #require(lines.count == 2, "\(lines)")
            #expect(Array(lines[0].prefix(4)) == ["reloadgate", "export", "--since", "24h"], "\(lines[0])")
            #expect(Array(lines[1].prefix(3)) == ["reloadgate", "simulate", "last-24h.jsonl"], "\(lines[1])")
            let changes = zip(lines[1], lines[1].dropFirst()).filter { $0.0 == "--compare-set" }.map(\.1)
            #expect(changes.contains("daily=\(defaults.dailyBudget)") && changes.contains("burst=\(defaults.burst)"), "\(changes)")
            try "data:\n  directory: \(directory.path("data"))\n".write(toFile: directory.path("reloadgate.yaml"), atomically: true, encoding: .utf8)
            let exported = try await ReloadGateProcess.run(Array(lines[0].dropFirst()), in: directory.url)
            try #require(exported.status == 0, "\(lines[0]): \(exported.stderr)")
            let simulated = try await ReloadGateProcess.run(Array(lines[1].dropFirst()) + ["--json"], in: directory.url)
            try #require(simulated.status == 0, "\(lines[1]): \(simulated.stderr)")
            let replay = try #require(try JSONSerialization.jsonObject(with: Data(simulated.stdout.utf8)) as? [String: Any])
            let runs = try #require(replay["runs"] as? [[String: Any]])
            #expect(runs.count == 2)
            // Device A's three pushes, the control's two, the activity's two and the two webhook calls: device B's push is
            // left out of the export, since Apple's 410 unregistered B (its widgets are gone from the registry).
            #expect(runs.first?["requestsBySource"] as? [String: Int] == ["push": 7, "webhook": 2], "\(runs.first ?? [:])")
            #expect(FileManager.default.fileExists(atPath: directory.path("last-24h.html")))
        }
    }
}
