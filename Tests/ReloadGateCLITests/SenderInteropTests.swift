import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Real push senders that no one here wrote, against the real binary: aioapns (from PyPI), curl with
/// Apple's own command-line recipe, and curl with a client certificate from `reloadgate certs client`.
/// The provider key is registered with `reloadgate keys add` while the server runs.
@Suite(.serialized, .timeLimit(.minutes(15)), .heavy)
struct SenderInteropTests {
    static let bundle = "com.example.scores"
    static let device = String(repeating: "9f", count: 32)
    static let control = String(repeating: "c7", count: 32)
    static let activity = String(repeating: "a9", count: 32)
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Runs a program to completion (killed after `timeout`); returns its status and output.
    static func run(_ executable: String, _ arguments: [String], in directory: URL, timeout: Duration = .seconds(120)) async throws -> (status: Int32, output: String, error: String) {
        try await ChildProcess.run(executable, arguments, in: directory, timeout: timeout)
    }

    /// A gateway (the binary) with an app, a provider key made with openssl and registered with
    /// `reloadgate keys add`, and the ports of its two listeners.
    struct Gateway {
        let directory: TemporaryDirectory
        let process: ReloadGateProcess
        let ingressPort: Int

        var url: URL { directory.url }
    }

    static func withGateway(_ body: (Gateway) async throws -> Void) async throws {
        let directory = try TemporaryDirectory("interop")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", bundle, "--team", "TEAMID1234", "--json"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")
        // Apple hands out .p8 files: PKCS#8 P-256 private keys. The gateway gets the public half only.
        try #require(try await run("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "AuthKey_KEYID12345.p8"], in: directory.url).status == 0)
        try #require(try await run("/usr/bin/openssl", ["pkey", "-in", "AuthKey_KEYID12345.p8", "-pubout", "-out", "KEYID12345.pem"], in: directory.url).status == 0)

        let process = try ReloadGateProcess(
            ["serve"],
            in: directory.url,
            environment: ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"]
        )
        let line = try await process.waitForOutputLine(containing: "APNs pushes to")
        let match = try #require(line.firstMatch(of: /127\.0\.0\.1:(\d+)/))
        let ingressPort = try #require(Int(match.1))
        _ = try await process.waitForOutputLine(containing: "listening on")

        // While the server runs: through its admin socket, for the very next push (no wait).
        let key = try await ReloadGateProcess.run(
            ["keys", "add", "--kid", "KEYID12345", "--team", "TEAMID1234", "--public-key", "KEYID12345.pem", "--topic", bundle],
            in: directory.url
        )
        try #require(key.status == 0, "\(key.stderr)")

        try await body(Gateway(directory: directory, process: process, ingressPort: ingressPort))
        process.send(SIGTERM)
        #expect(try await process.waitForExit() == 0)
    }

    @Test func curlWithApplesOwnRecipeGets200() async throws {
        try await Self.withGateway { gateway in
            let recipe = Self.root.appendingPathComponent("Tests/Interop/apple-curl-push.sh").path
            let result = try await Self.run(
                "/bin/bash",
                [recipe, "AuthKey_KEYID12345.p8", "KEYID12345", "TEAMID1234", Self.bundle, "widgets", Self.device,
                 "localhost:\(gateway.ingressPort)", "certs/ca.pem"],
                in: gateway.url
            )
            #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "200", "\(result.output) \(result.error)")

            let store = try SQLiteStore(directory: gateway.directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 1)
        }
    }

    @Test func curlWithAClientCertificateFromReloadgateCertsClient() async throws {
        try await Self.withGateway { gateway in
            for (name, topic) in [("scores-sender", Self.bundle), ("other-sender", "com.example.other")] {
                let issued = try await ReloadGateProcess.run(["certs", "client", "--topic", topic, "--out", name], in: gateway.url)
                try #require(issued.status == 0, "\(issued.stderr)")
            }
            func push(_ name: String) async throws -> String {
                try await Self.run(
                    "/usr/bin/curl",
                    ["-s", "-w", " %{http_code}", "--http2", "--cacert", "certs/ca.pem", "--cert", "certs/\(name).pem", "--key", "certs/\(name)-key.pem",
                     "-H", "apns-topic: \(Self.bundle).push-type.widgets", "-d", #"{"aps":{"content-changed":true}}"#,
                     "https://localhost:\(gateway.ingressPort)/3/device/\(Self.device)"],
                    in: gateway.url
                ).output
            }
            #expect(try await push("scores-sender") == " 200")
            #expect(try await push("other-sender") == #"{"reason":"TopicDisallowed"} 400"#)
        }
    }

    @Test func aioapnsFromPyPISendsWidgetControlsAndLiveActivityPushesAndSeesAStaleTokenRefused() async throws {
        // A virtual environment under .build, made once per test process (PyPI).
        let python = try await InteropPython.python()

        try await Self.withGateway { gateway in
            let script = Self.root.appendingPathComponent("Tests/Interop/aioapns_send.py").path
            let result = try await Self.run(
                python,
                [
                    script, "localhost", String(gateway.ingressPort), "certs/ca.pem", "AuthKey_KEYID12345.p8", "KEYID12345", "TEAMID1234",
                    Self.bundle, Self.device, Self.control, Self.activity,
                ],
                in: gateway.url
            )
            try #require(result.status == 0, "\(result.output) \(result.error)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
            let fresh = try #require(object["fresh"] as? [[String: Any]])
            #expect(fresh.map { $0["status"] as? String } == ["200", "200", "200"], "\(result.output)")
            // The controls push (issue 29): accepted, and its unknown token adopted as a control.
            let controls = try #require(object["controls"] as? [String: Any])
            #expect(controls["status"] as? String == "200", "\(result.output)")
            // The Live Activity update (issue 45): accepted, its unknown token adopted as an activity.
            let liveactivity = try #require(object["liveactivity"] as? [String: Any])
            #expect(liveactivity["status"] as? String == "200", "\(result.output)")
            let stale = try #require(object["stale"] as? [String: Any])
            #expect(stale["status"] as? String == "403", "\(result.output)")
            #expect(stale["description"] as? String == "ExpiredProviderToken", "\(result.output)")

            let store = try SQLiteStore(directory: gateway.directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 5)
            let app = try #require(try await store.app(bundle: try BundleID(Self.bundle)))
            guard case .active(_, .controls) = try await store.pushDeviceStatus(app: app, token: try DeviceToken(Self.control)) else {
                Issue.record("the control's token was not adopted as a control")
                return
            }
            // The outbox line of the delivery to `token`, once it is there.
            func outboxLine(_ token: String) async throws -> String? {
                var line: String?
                _ = try await eventually {
                    let outbox = (try? String(contentsOfFile: gateway.directory.path("data/outbox.jsonl"), encoding: .utf8)) ?? ""
                    line = outbox.split(separator: "\n").map(String.init).first { $0.contains(token) }
                    return line != nil
                }
                return line
            }
            // Its delivery's outbox line says it is a control.
            let line = try await outboxLine(Self.control)
            #expect(line?.contains(#""pushType":"controls""#) == true, "\(line ?? "no line")")
            #expect(line?.contains(#""topic":"\#(Self.bundle).push-type.controls""#) == true, "\(line ?? "no line")")
            // The activity's line carries the update it was sent.
            let activityLine = try await outboxLine(Self.activity)
            #expect(activityLine?.contains(#""pushType":"liveactivity""#) == true, "\(activityLine ?? "no line")")
            #expect(activityLine?.contains(#""eventDescription":"Power Panda found a sword!""#) == true, "\(activityLine ?? "no line")")
        }
    }

    @Test func keysCommandsListAndRemove() async throws {
        let directory = try TemporaryDirectory("keys")
        defer { directory.remove() }
        try #require(try await Self.run("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "key.p8"], in: directory.url).status == 0)
        try #require(try await Self.run("/usr/bin/openssl", ["pkey", "-in", "key.p8", "-pubout", "-out", "key.pem"], in: directory.url).status == 0)
        let privateKey = try await ReloadGateProcess.run(["keys", "add", "--kid", "K1", "--team", "T1", "--public-key", "key.p8"], in: directory.url)
        #expect(privateKey.status == 2)
        #expect(privateKey.stderr.contains("holds a private key"))
        let added = try await ReloadGateProcess.run(["keys", "add", "--kid", "K1", "--team", "T1", "--public-key", "key.pem", "--environment", "production"], in: directory.url)
        #expect(added.status == 0, "\(added.stderr)")
        let again = try await ReloadGateProcess.run(["keys", "add", "--kid", "K1", "--team", "T1", "--public-key", "key.pem"], in: directory.url)
        #expect(again.status == 1)
        let listed = try await ReloadGateProcess.run(["keys", "list", "--json"], in: directory.url)
        #expect(listed.stdout.contains(#""environment":"production""#))
        #expect(listed.stdout.contains(#""kid":"K1""#))
        #expect(!listed.stdout.contains("PRIVATE"))
        let table = try await ReloadGateProcess.run(["keys", "list"], in: directory.url).stdout.split(separator: "\n")
        #expect(table.first?.split(separator: " ") == ["KID", "TEAM", "ENVIRONMENT", "TOPICS"], "\(table)")
        #expect(table.dropFirst().first?.split(separator: " ") == ["K1", "T1", "production", "any"], "\(table)")
        let removed = try await ReloadGateProcess.run(["keys", "remove", "K1"], in: directory.url)
        #expect(removed.status == 0)
        let gone = try await ReloadGateProcess.run(["keys", "remove", "K1"], in: directory.url)
        #expect(gone.status == 1)
    }
}
