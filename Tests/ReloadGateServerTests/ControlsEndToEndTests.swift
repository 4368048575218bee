import Foundation
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateMockAPNs
import ReloadGateTesting
import Testing

/// WidgetKit controls end to end (issue 29): control tokens registered through the registry API, controls
/// pushes through the APNs listener (docs/APNS.md's controls rows), the webhook's `reloadControls(ofKind:)`, and
/// deliveries to the mock APNs server, which checks a controls push's push type, topic, priority and
/// expiration as Apple does.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct ControlsEndToEndTests {
    static let bundle = "com.example.garage"
    static let device = String(repeating: "a1", count: 32)
    static let front = String(repeating: "c1", count: 32)
    static let back = String(repeating: "c2", count: 32)
    /// The front door control's token before the app got `front`.
    static let retired = String(repeating: "c0", count: 32)
    static let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)

    struct Fixture: Sendable {
        let gateway: TestGateway
        let mock: MockAPNsServer
        let sender: ProviderTokenFactory
        let api: GatewayAPIClient
        let credentials: AppCredentials

        /// A push through the APNs listener; `topic` and `pushType` as sent (`nil`: left out).
        func push(
            _ token: String,
            pushType: String? = "controls",
            topic: String? = "\(ControlsEndToEndTests.bundle).push-type.controls",
            priority: String? = nil
        ) async throws -> RawHTTP2Client.Answer {
            let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
            defer { Task { await client.close() } }
            var fields = [("authorization", "bearer \(sender.token())")]
            if let topic { fields.append(("apns-topic", topic)) }
            if let pushType { fields.append(("apns-push-type", pushType)) }
            if let priority { fields.append(("apns-priority", priority)) }
            return try await client.send(RawHTTP2Client.push(token: token, fields), body: ControlsEndToEndTests.body)
        }

        /// A widgets push to `token`.
        func widgetPush(_ token: String) async throws -> RawHTTP2Client.Answer {
            try await push(token, pushType: "widgets", topic: "\(ControlsEndToEndTests.bundle).push-type.widgets")
        }

        /// Waits until the mock has received `count` requests (``eventually(within:every:_:)``).
        func waitForMock(_ count: Int) async throws -> [MockAPNsServer.Received] {
            _ = try await eventually { mock.received.count >= count }
            return mock.received
        }

        func store() throws -> SQLiteStore {
            try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
        }

        func reload(_ body: String) async throws -> GatewayAPIClient.Answer {
            try await api.reload(bundle: ControlsEndToEndTests.bundle, body: body, secret: credentials.webhookSecret)
        }
    }

    /// A gateway delivering to the mock, with a widgets device and two garage door controls (the front
    /// one's token replaced `retired`), registered through the registry API.
    static func withFixture(
        configure: @escaping @Sendable (inout GatewayConfiguration) -> Void = { _ in },
        _ body: @Sendable (Fixture) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory("controls")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey_CTKEY00001.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "CTKEY00001", teamID: "CTTEAM0001")
        defer { Task { await mock.stop() } }
        let sender = ProviderTokenFactory(keyID: "SENDER0002", teamID: "SENDTEAM02")
        let credentials: AppCredentials
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            credentials = try await store.createApp(bundle: try BundleID(bundle), teamID: sender.teamID, now: Date())
            try await store.addProviderKey(
                StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
            )
        }
        try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
            configure(&configuration)
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let key = credentials.apiKey
                let widgets = try await api.putDevice(
                    bundle: bundle, token: device, apiKey: key,
                    widgets: [["id": "w1", "kind": "status", "family": "systemSmall", "configuration": [String: Any]()]]
                )
                try #require(widgets.status == 200, "\(widgets.body)")
                for (token, door, previous) in [(retired, "front", nil), (front, "front", retired), (back, "back", nil)] as [(String, String, String?)] {
                    let answer = try await api.putControl(
                        bundle: bundle, token: token, apiKey: key, kind: "garage", configuration: ["door": door], previousToken: previous
                    )
                    try #require(answer.status == 200, "\(answer.body)")
                }
                try await body(Fixture(gateway: gateway, mock: mock, sender: sender, api: api, credentials: credentials))
            }
        }
    }

    // MARK: The APNs listener

    @Test func aControlsPushIsAcceptedAndScheduledForItsControl() async throws {
        try await Self.withFixture { fixture in
            let answer = try await fixture.push(Self.front)
            #expect(answer.status == 200, "\(answer.body)")
            #expect(answer.header("reloadgate-decision") == "scheduled")
        }
    }

    /// docs/APNS.md's controls rows: a push type and a topic suffix that disagree, another push type, no topic.
    @Test func aControlsPushWithTheWrongTopicOrPushTypeIsRefusedWithApplesReason() async throws {
        try await Self.withFixture { fixture in
            let wrongSuffix = try await fixture.push(Self.front, topic: "\(Self.bundle).push-type.widgets")
            #expect(wrongSuffix.status == 400)
            #expect(wrongSuffix.reason == "BadTopic", "\(wrongSuffix.body)")
            let wrongType = try await fixture.push(Self.front, pushType: "alert")
            #expect(wrongType.status == 400)
            #expect(wrongType.reason == "InvalidPushType", "\(wrongType.body)")
            let widgetsTypeOnControlsTopic = try await fixture.push(Self.front, pushType: "widgets")
            #expect(widgetsTypeOnControlsTopic.reason == "BadTopic", "\(widgetsTypeOnControlsTopic.body)")
            let noTopic = try await fixture.push(Self.front, topic: nil)
            #expect(noTopic.status == 400)
            #expect(noTopic.reason == "MissingTopic", "\(noTopic.body)")
            // A device's token in a controls push, a control's in a widgets push: not the token's topic.
            let deviceInControls = try await fixture.push(Self.device)
            #expect(deviceInControls.status == 400)
            #expect(deviceInControls.reason == "DeviceTokenNotForTopic", "\(deviceInControls.body)")
            let controlInWidgets = try await fixture.widgetPush(Self.front)
            #expect(controlInWidgets.reason == "DeviceTokenNotForTopic", "\(controlInWidgets.body)")
            // The control's retired token.
            let retired = try await fixture.push(Self.retired)
            #expect(retired.status == 410)
            #expect(retired.reason == "Unregistered", "\(retired.body)")
            // Nothing of the refused ones was recorded: one request, the widgets device's registration
            // and the controls' aside.
            let store = try fixture.store()
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 0)
        }
    }

    /// An unknown control token is adopted as a control of kind `*`; when the app registers it, the control
    /// keeps its instance (and so its budget).
    @Test func anUnknownControlTokenIsAdoptedAndKeepsItsInstanceWhenRegistered() async throws {
        try await Self.withFixture { fixture in
            let unknown = String(repeating: "c9", count: 32)
            let answer = try await fixture.push(unknown)
            #expect(answer.status == 200, "\(answer.body)")
            let store = try fixture.store()
            defer { try? store.close() }
            let adopted = try await store.instances(ofDevice: unknown, bundle: Self.bundle)
            try #require(adopted.count == 1)
            #expect(adopted[0].instance.kind == "*")
            #expect(adopted[0].instance.family == "control")
            // A widgets push to it now: the token is a control's.
            #expect(try await fixture.widgetPush(unknown).reason == "DeviceTokenNotForTopic")

            let registered = try await fixture.api.putControl(bundle: Self.bundle, token: unknown, apiKey: fixture.credentials.apiKey, kind: "garage")
            #expect(registered.status == 200, "\(registered.body)")
            #expect(registered.json["instance"] as? Int == Int(adopted[0].instance.instance))
            let now = try await store.instances(ofDevice: unknown, bundle: Self.bundle)
            #expect(now.map(\.instance.kind) == ["garage"])
            // And the registry refuses to make a device's token a control's, or the other way round.
            let asDevice = try await fixture.api.putDevice(bundle: Self.bundle, token: unknown, apiKey: fixture.credentials.apiKey, widgets: [])
            #expect(asDevice.status == 409, "\(asDevice.body)")
            let asControl = try await fixture.api.putControl(bundle: Self.bundle, token: Self.device, apiKey: fixture.credentials.apiKey, kind: "garage")
            #expect(asControl.status == 409, "\(asControl.body)")
        }
    }

    @Test func anUnknownControlTokenIsRefusedWhenUnknownDevicesAreRejected() async throws {
        try await Self.withFixture(configure: { $0.ingress.unknownDevices = .reject }) { fixture in
            let answer = try await fixture.push(String(repeating: "c8", count: 32))
            #expect(answer.status == 400)
            #expect(answer.reason == "BadDeviceToken", "\(answer.body)")
        }
    }

    // MARK: Delivery

    /// One gateway, a widgets push and a controls push: each delivery's headers at the mock are its own.
    @Test func controlsAndWidgetPushesLeaveWithTheirOwnHeaders() async throws {
        try await Self.withFixture { fixture in
            // Priority 5 and an expiration asked of the control: a controls push still leaves at 10 and "0".
            #expect(try await fixture.push(Self.front, priority: "10").status == 200)
            #expect(try await fixture.widgetPush(Self.device).status == 200)
            let received = try await fixture.waitForMock(2)
            try #require(received.count == 2)
            let control = try #require(received.first { $0.deviceToken == Self.front })
            #expect(control.headers["apns-push-type"] == "controls")
            #expect(control.headers["apns-topic"] == "\(Self.bundle).push-type.controls")
            #expect(control.headers["apns-priority"] == "10")
            #expect(control.headers["apns-expiration"] == "0")
            #expect(control.body == #"{"aps":{"content-changed":true}}"#)
            let widget = try #require(received.first { $0.deviceToken == Self.device })
            #expect(widget.headers["apns-push-type"] == "widgets")
            #expect(widget.headers["apns-topic"] == "\(Self.bundle).push-type.widgets")
            #expect(widget.headers["apns-expiration"] == nil)
            // The mock accepted both (its checks passed): both deliveries are sent.
            let store = try fixture.store()
            defer { try? store.close() }
            _ = try await eventually { try await store.deliveries(in: [.sent]).count >= 2 }
            #expect(try await store.deliveries(in: [.sent]).count == 2)
        }
    }

    /// Apple's 410 for a control's token retires the control: its next push is answered 410.
    @Test func an410RetiresTheControlsToken() async throws {
        try await Self.withFixture { fixture in
            let appleSaid = Int64(Date().timeIntervalSince1970 * 1000)
            fixture.mock.answer { _ in .status(410, reason: "Unregistered", timestamp: appleSaid) }
            #expect(try await fixture.push(Self.back).status == 200)
            _ = try await fixture.waitForMock(1)
            var next = try await fixture.push(Self.back)
            _ = try await eventually {
                guard next.status == 200 else { return true }
                next = try await fixture.push(Self.back)
                return false
            }
            #expect(next.status == 410)
            #expect(next.reason == "Unregistered")
            // The other control is untouched.
            fixture.mock.answer { _ in .status(200) }
            #expect(try await fixture.push(Self.front).status == 200)
        }
    }

    // MARK: The operator

    /// `pending`, `budget`, `explain` and `devices list` show a control with the controls' policy.
    @Test func theOperatorsCommandsShowAControl() async throws {
        try await Self.withFixture { fixture in
            #expect(try await fixture.push(Self.front).status == 200)
            try await Task.sleep(for: .milliseconds(100))
            let deferred = try await fixture.push(Self.front)
            #expect(deferred.header("reloadgate-decision") == "deferred")
            let apnsID = try #require(deferred.header("apns-id"))
            let socket = fixture.gateway.configuration.adminSocketPath
            func cli(_ arguments: [String]) async throws -> [String: Any] {
                let result = try await ReloadGateProcess.run(arguments + ["--json", "--socket", socket], in: fixture.gateway.directory.url)
                try #require(result.status == 0, "\(arguments): \(result.stderr)")
                return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            }
            let pending = try #require(try await cli(["pending"])["pending"] as? [[String: Any]])
            #expect(pending.map { $0["device"] as? String } == [Self.front])
            #expect(pending.first?["widget"] as? String == "control")
            #expect(pending.first?["kind"] as? String == "garage")

            let budget = try #require((try await cli(["budget", Self.front])["instances"] as? [[String: Any]])?.first)
            #expect(budget["family"] as? String == "control")
            #expect(budget["dailyBudget"] as? Int == 96)
            #expect(budget["burst"] as? Int == 8)
            #expect(budget["tokens"] as? Int == 7)

            let explained = try await cli(["explain", apnsID.lowercased()])
            let decisions = (explained["request"] as? [String: Any])?["decisions"] as? [[String: Any]] ?? []
            #expect(decisions.map { $0["decision"] as? String } == ["deferred"], "\(explained)")
            #expect((decisions.first?["reason"] as? String)?.contains("minimum interval 60 s") == true, "\(decisions)")

            let devices = try #require(try await cli(["devices", "list"])["devices"] as? [[String: Any]])
            #expect(devices.first { $0["device"] as? String == Self.front }?["pushType"] as? String == "controls")
            #expect(devices.first { $0["device"] as? String == Self.device }?["pushType"] as? String == "widgets")
        }
    }

    // MARK: The webhook

    /// `reloadControls(ofKind:)` with `match` reaches the matching control only; `reloadAllControls()` every
    /// control and no widget; a widgets target never reaches a control.
    @Test func theWebhookReloadsControlsOfAKindMatchingTheirConfiguration() async throws {
        try await Self.withFixture { fixture in
            let one = try await fixture.reload(#"{"pushType":"controls","kind":"garage","match":{"door":"front"}}"#)
            #expect(one.status == 202, "\(one.body)")
            #expect(one.json["targets"] as? Int == 1)
            let all = try await fixture.reload(#"{"pushType":"controls"}"#)
            #expect(all.json["targets"] as? Int == 2, "\(all.body)")
            let widgets = try await fixture.reload(#"{"kind":"garage"}"#)
            #expect(widgets.json["targets"] as? Int == 0, "\(widgets.body)")
            let everyWidget = try await fixture.reload(#"{}"#)
            #expect(everyWidget.json["targets"] as? Int == 1, "\(everyWidget.body)")
            let wrong = try await fixture.reload(#"{"pushType":"alerts"}"#)
            #expect(wrong.status == 422, "\(wrong.body)")

            // The matched control's delivery and the other control's (from `reloadAllControls()`) reach the mock
            // as controls pushes, one each (the front door's second reload waits its minimum interval, or merged
            // with the first); the widget's (from `{}`) as a widgets push; in any order: the worker may send
            // them in one group.
            let received = try await fixture.waitForMock(3)
            let controls = received.filter { $0.headers["apns-push-type"] == "controls" }.map(\.deviceToken)
            #expect(controls.sorted() == [Self.front, Self.back].sorted(), "\(received.map(\.deviceToken))")
            let widgetPushes = received.filter { $0.headers["apns-push-type"] == "widgets" }.map(\.deviceToken)
            #expect(widgetPushes == [Self.device], "\(received.map(\.deviceToken))")
        }
    }
}
