import Foundation
import ReloadGateCore
import ReloadGateMockAPNs
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Apple's documented recipes, sent as Apple shows them with three senders no one here wrote (curl with
/// Apple's command-line recipe, aioapns and pyapns_client from PyPI) to the real binary, and followed to the
/// delivery at the mock of Apple: the widget push (no apns-priority, no apns-expiration) to a registered and
/// to a new device; the controls push (apns-expiration 0, apns-priority 10) to a new and to a registered
/// control; and each push type to a token of the other, which Apple answers `DeviceTokenNotForTopic`. Every
/// push answered 200 reaches the mock with the headers Apple documents, and none is `expired`.
@Suite(.serialized, .timeLimit(.minutes(15)), .heavy)
struct AppleRecipeTests {
    static let bundle = "com.example.recipes"
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    enum Sender: String, CaseIterable {
        case curl, aioapns, pyapnsClient = "pyapns_client"
    }

    /// The tokens of one sender: its own devices and controls, so that no two pushes meet in the scheduler.
    struct Tokens {
        let widget, newWidget, control, newControl: String

        init(_ sender: Int) {
            func token(_ kind: Int) -> String { String(format: "%02x%02x", sender, kind) + String(repeating: "5a", count: 30) }
            (widget, newWidget, control, newControl) = (token(1), token(2), token(3), token(4))
        }
    }

    /// One push of a recipe and the answer Apple documents for it.
    struct Push {
        let pushType: String
        let token: String
        let status: String
        let reason: String
    }

    static func pushes(_ tokens: Tokens) -> [Push] {
        [
            Push(pushType: "widgets", token: tokens.widget, status: "200", reason: ""),
            Push(pushType: "widgets", token: tokens.newWidget, status: "200", reason: ""),
            Push(pushType: "controls", token: tokens.newControl, status: "200", reason: ""),
            Push(pushType: "controls", token: tokens.control, status: "200", reason: ""),
            Push(pushType: "widgets", token: tokens.control, status: "400", reason: "DeviceTokenNotForTopic"),
            Push(pushType: "controls", token: tokens.widget, status: "400", reason: "DeviceTokenNotForTopic"),
        ]
    }

    @Test func applesRecipesReachTheMockAsAppleDocumentsThemFromEverySender() async throws {
        // aioapns and pyapns_client in a virtual environment under .build, made once per test process (PyPI).
        let python = try await InteropPython.python()

        let directory = try TemporaryDirectory("recipes")
        defer { directory.remove() }
        // The sender's key, as Apple hands it out (a .p8), and its public half for the gateway.
        try #require(try await ChildProcess.run("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "AuthKey_RECIPEKEY1.p8"], in: directory.url).status == 0)
        try #require(try await ChildProcess.run("/usr/bin/openssl", ["pkey", "-in", "AuthKey_RECIPEKEY1.p8", "-pubout", "-out", "RECIPEKEY1.pem"], in: directory.url).status == 0)
        // The mock of Apple, and the gateway's own key for it.
        let pki = try TestPKI(in: directory)
        let upstreamKey = directory.path("AuthKey_UPSTREAM01.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: upstreamKey, keyID: "UPSTREAM01", teamID: "UPTEAM0001")
        defer { Task { await mock.stop() } }

        let senders = Sender.allCases.enumerated().map { ($1, Tokens($0)) }
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let app = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: "RECIPETEAM", now: Date()).app
            let publicKey = try String(contentsOfFile: directory.path("RECIPEKEY1.pem"), encoding: .utf8)
            try await store.addProviderKey(
                StoredProviderKey(keyID: "RECIPEKEY1", teamID: "RECIPETEAM", publicKeyPEM: publicKey, topics: [], environments: "both", createdAt: Date())
            )
            for (_, tokens) in senders {
                _ = try await store.putDevice(
                    app: app, token: try DeviceToken(tokens.widget),
                    widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
                    previousToken: nil, now: Date()
                )
                _ = try await store.putControl(app: app, token: try DeviceToken(tokens.control), control: ControlRegistration(kind: "toggle"), previousToken: nil, now: Date())
            }
        }
        var environmentOfServe = mock.upstreamEnvironment(keyFile: upstreamKey, caFile: pki.caCertificatePath)
        environmentOfServe["RELOADGATE_LISTEN_PORT"] = "0"
        environmentOfServe["RELOADGATE_INGRESS_PORT"] = "0"
        let process = try ReloadGateProcess(["serve"], in: directory.url, environment: environmentOfServe)
        defer { process.send(SIGKILL) }
        let line = try await process.waitForOutputLine(containing: "APNs pushes to")
        let match = try #require(line.firstMatch(of: /127\.0\.0\.1:(\d+)/))
        let port = try #require(Int(match.1))

        for (sender, tokens) in senders {
            let pushes = Self.pushes(tokens)
            let answers: [(status: String, reason: String)]
            switch sender {
            case .curl:
                var collected: [(String, String)] = []
                for push in pushes {
                    let result = try await ChildProcess.run(
                        "/bin/bash",
                        [Self.root.appendingPathComponent("Tests/Interop/apple-curl-push.sh").path, "AuthKey_RECIPEKEY1.p8", "RECIPEKEY1",
                         "RECIPETEAM", Self.bundle, push.pushType, push.token, "localhost:\(port)", "certs/ca.pem"],
                        in: directory.url
                    )
                    let output = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
                    let status = String(output.prefix(3))
                    let body = output.dropFirst(3).trimmingCharacters(in: .whitespaces)
                    let reason = (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["reason"] as? String ?? ""
                    collected.append((status, reason))
                }
                answers = collected
            case .aioapns, .pyapnsClient:
                let list = try JSONSerialization.data(withJSONObject: pushes.map { ["pushType": $0.pushType, "token": $0.token] })
                let result = try await ChildProcess.run(
                    python,
                    [Self.root.appendingPathComponent("Tests/Interop/recipe_send.py").path, sender.rawValue, "localhost", String(port), "certs/ca.pem",
                     "AuthKey_RECIPEKEY1.p8", "RECIPEKEY1", "RECIPETEAM", Self.bundle, String(decoding: list, as: UTF8.self)],
                    in: directory.url
                )
                try #require(result.status == 0, "\(sender): \(result.output) \(result.error)")
                let objects = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [[String: String]], "\(result.output)")
                answers = objects.map { ($0["status"] ?? "", $0["reason"] ?? "") }
            }
            try #require(answers.count == pushes.count, "\(sender): \(answers)")
            for (push, answer) in zip(pushes, answers) {
                #expect(answer.status == push.status && answer.reason == push.reason, "\(sender): \(push.pushType) to \(push.token): \(answer)")
            }
        }

        // Every push answered 200 reaches the mock once, with the headers Apple documents for its type.
        let delivered = senders.flatMap { Self.pushes($0.1).filter { $0.status == "200" } }
        #expect(try await eventually { Set(mock.received.map(\.deviceToken)).isSuperset(of: delivered.map(\.token)) }, "not every push reached the mock")
        let received = mock.received
        for push in delivered {
            let requests = received.filter { $0.deviceToken == push.token }
            #expect(requests.count == 1, "\(push.pushType) to \(push.token): \(requests.count) deliveries")
            guard let request = requests.first else { continue }
            #expect(request.headers["apns-push-type"] == push.pushType)
            #expect(request.headers["apns-topic"] == "\(Self.bundle).push-type.\(push.pushType)")
            #expect(request.headers["apns-priority"] == "10")
            #expect(request.headers["apns-expiration"] == (push.pushType == "controls" ? "0" : nil), "\(push.pushType): \(request.headers)")
            #expect(request.body == #"{"aps":{"content-changed":true}}"#)
        }
        let stats = try await ReloadGateProcess.run(["stats", "--json"], in: directory.url)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any], "\(stats.stderr)")
        let decisions = try #require(object["decisions"] as? [String: Int])
        #expect(decisions["expired", default: 0] == 0, "\(decisions)")
        process.send(SIGTERM)
        #expect(try await process.waitForExit() == 0)
    }
}
