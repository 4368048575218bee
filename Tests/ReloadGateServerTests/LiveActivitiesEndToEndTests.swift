import Foundation
import ReloadGateCore
import ReloadGateMockAPNs
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Live Activities end to end (issue 45): activity tokens registered through the registry API, pushes
/// shaped as Apple's examples in "Starting and updating Live Activities with ActivityKit push
/// notifications" through the APNs listener, their refusals as Apple answers them, and deliveries to the
/// mock of Apple, which checks the headers and that an activity's timestamps never go back.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct LiveActivitiesEndToEndTests {
    static let bundle = "com.example.adventure"
    static let topic = "com.example.adventure.push-type.liveactivity"
    static let activity = String(repeating: "a7", count: 32)
    static let frequent = String(repeating: "a8", count: 32)
    static let pushToStart = String(repeating: "5a", count: 32)

    /// An update as Apple's example shows one (content state and an alert), with `timestamp`.
    static func update(_ timestamp: Int64, health: Double = 0.941, alert: String? = "Power Panda found a sword!") -> [UInt8] {
        let alertField = alert.map { #","alert":{"title":"\#($0)","body":"In a cave.","sound":"chime.aiff"}"# } ?? ""
        return Array(#"""
            {"aps":{"timestamp":\#(timestamp),"event":"update","content-state":{"currentHealthLevel":\#(health),"eventDescription":"Power Panda found a sword!"}\#(alertField)}}
            """#.utf8)
    }

    /// An end as Apple's example shows one (a final content state and a dismissal date).
    static func end(_ timestamp: Int64) -> [UInt8] {
        Array(#"""
            {"aps":{"timestamp":\#(timestamp),"event":"end","content-state":{"currentHealthLevel":0,"eventDescription":"Adventure over."},"dismissal-date":\#(timestamp + 7200)}}
            """#.utf8)
    }

    /// A start to a push-to-start token as Apple's example shows one (attributes type and attributes).
    static func start(_ timestamp: Int64) -> [UInt8] {
        Array(#"""
            {"aps":{"timestamp":\#(timestamp),"event":"start","content-state":{"currentHealthLevel":100,"eventDescription":"Adventure has begun!"},"attributes-type":"AdventureAttributes","attributes":{"hero":"Power Panda"},"alert":{"title":"Adventure started","body":"Power Panda set off.","sound":"chime.aiff"}}}
            """#.utf8)
    }

    struct Fixture: Sendable {
        let gateway: TestGateway
        let mock: MockAPNsServer
        let sender: ProviderTokenFactory
        let api: GatewayAPIClient
        let credentials: AppCredentials

        /// A push on a new connection; the fields of a token-authenticated Live Activity push by default.
        func push(_ token: String, _ body: [UInt8], priority: String = "10", fields: [(String, String)]? = nil) async throws -> RawHTTP2Client.Answer {
            let client = try await connect()
            defer { Task { await client.close() } }
            return try await push(token, body, priority: priority, fields: fields, on: client)
        }

        /// A push on a connection opened before (``connect()``).
        func push(_ token: String, _ body: [UInt8], priority: String = "10", fields: [(String, String)]? = nil, on client: RawHTTP2Client) async throws -> RawHTTP2Client.Answer {
            let sent = fields ?? [
                ("authorization", "bearer \(sender.token())"), ("apns-topic", LiveActivitiesEndToEndTests.topic),
                ("apns-push-type", "liveactivity"), ("apns-priority", priority),
            ]
            return try await client.send(RawHTTP2Client.push(token: token, sent), body: body)
        }

        func connect() async throws -> RawHTTP2Client {
            try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
        }

        func reload(_ body: String) async throws -> GatewayAPIClient.Answer {
            try await api.reload(bundle: LiveActivitiesEndToEndTests.bundle, body: body, secret: credentials.webhookSecret)
        }

        /// The operator's command with `--json`, on the gateway's admin socket.
        func cli(_ arguments: [String]) async throws -> [String: Any] {
            let result = try await ReloadGateProcess.run(arguments + ["--json", "--socket", gateway.configuration.adminSocketPath], in: gateway.directory.url)
            try #require(result.status == 0, "\(arguments): \(result.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        }

        /// The mock's accepted Live Activity pushes to `token`, as JSON objects.
        func delivered(to token: String) -> [[String: Any]] {
            mock.received.filter { $0.deviceToken == token && $0.headers["apns-push-type"] == "liveactivity" }.compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.body.utf8))) as? [String: Any]
            }
        }
    }

    /// `interval`, when given, replaces the activities' minimum interval of 5 s (`activity:interval=`): a
    /// test whose checks must land within one interval takes a longer one, so that a loaded machine's
    /// stalls do not end the interval before they are made.
    static func withFixture(interval: Int? = nil, _ body: @Sendable (Fixture) async throws -> Void) async throws {
        let directory = try TemporaryDirectory("live-activities")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey_LAKEY00001.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "LAKEY00001", teamID: "LATEAM0001")
        defer { Task { await mock.stop() } }
        let sender = ProviderTokenFactory(keyID: "SENDER0045", teamID: "SENDTEAM45")
        let credentials = try await sender.createApp(bundle: bundle, inStoreAt: directory.path("data"))
        try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
            if let interval { #expect(configuration.scheduling.set("activity:interval=\(interval)") == nil) }
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                for (token, frequentUpdates) in [(activity, false), (frequent, true)] {
                    let answer = try await api.putActivity(
                        bundle: bundle, token: token, apiKey: credentials.apiKey, attributesType: "AdventureAttributes",
                        attributes: ["hero": "Power Panda"], frequentUpdates: frequentUpdates
                    )
                    try #require(answer.status == 200, "\(answer.body)")
                }
                try await body(Fixture(gateway: gateway, mock: mock, sender: sender, api: api, credentials: credentials))
            }
        }
    }

    // MARK: Apple's examples, accepted

    @Test func anUpdateAnEndAndAStartAreAcceptedAndDeliveredAsLiveActivityPushes() async throws {
        try await Self.withFixture { fixture in
            let now = Int64(Date().timeIntervalSince1970)
            let update = try await fixture.push(Self.activity, Self.update(now))
            #expect(update.status == 200, "\(update.body)")
            #expect(update.header("reloadgate-decision") == "scheduled")
            let start = try await fixture.push(Self.pushToStart, Self.start(now))
            #expect(start.status == 200, "\(start.body)")
            _ = try await eventually { fixture.delivered(to: Self.activity).count == 1 && fixture.delivered(to: Self.pushToStart).count == 1 }
            // The end waits for the activity's 5 s interval, then goes with its dismissal date.
            let end = try await fixture.push(Self.activity, Self.end(now + 1))
            #expect(end.status == 200, "\(end.body)")
            _ = try await eventually(within: .seconds(15)) { fixture.delivered(to: Self.activity).count == 2 }
            let received = fixture.mock.received.filter { $0.deviceToken == Self.activity }
            for push in received {
                #expect(push.headers["apns-push-type"] == "liveactivity")
                #expect(push.headers["apns-topic"] == Self.topic)
                #expect(push.headers["apns-priority"] == "10")
            }
            let aps = fixture.delivered(to: Self.activity).compactMap { $0["aps"] as? [String: Any] }
            #expect(aps.map { $0["event"] as? String } == ["update", "end"])
            #expect(aps.map { ($0["timestamp"] as? NSNumber)?.int64Value } == [now, now + 1])
            #expect((aps[0]["content-state"] as? [String: Any])?["currentHealthLevel"] as? Double == 0.941)
            #expect((aps[1]["dismissal-date"] as? NSNumber)?.int64Value == now + 1 + 7200)
            let started = fixture.delivered(to: Self.pushToStart).first?["aps"] as? [String: Any]
            #expect(started?["attributes-type"] as? String == "AdventureAttributes")
            #expect(fixture.mock.timestampsWentBack.isEmpty)
            // After the end, an update is refused by its decision, and nothing more is sent.
            let after = try await fixture.push(Self.activity, Self.update(now + 2))
            #expect(after.status == 200)
            #expect(after.header("reloadgate-decision") == "after-end")
        }
    }

    // MARK: Refusals, as Apple answers them

    @Test func pushesAppleRefusesAreRefusedWithApplesReasons() async throws {
        try await Self.withFixture { fixture in
            let now = Int64(Date().timeIntervalSince1970)
            let noTimestamp = Array(#"{"aps":{"event":"update","content-state":{"currentHealthLevel":1}}}"#.utf8)
            let missing = try await fixture.push(Self.activity, noTimestamp)
            #expect(missing.status == 400)
            #expect(missing.reason == "InvalidPayload")
            let startWithoutAttributes = Array(#"{"aps":{"timestamp":\#(now),"event":"start","content-state":{}}}"#.utf8)
            #expect(try await fixture.push(Self.pushToStart, startWithoutAttributes).reason == "InvalidPayload")
            // A Live Activity push to a widgets topic: the suffix is not the push type's.
            let wrongTopic = try await fixture.push(Self.activity, Self.update(now), fields: [
                ("authorization", "bearer \(fixture.sender.token())"), ("apns-topic", "\(Self.bundle).push-type.widgets"),
                ("apns-push-type", "liveactivity"),
            ])
            #expect(wrongTopic.status == 400)
            #expect(wrongTopic.reason == "BadTopic")
            // Larger than 4 KB.
            let padding = String(repeating: "x", count: 4096)
            let large = Array(#"{"aps":{"timestamp":\#(now),"event":"update","content-state":{"note":"\#(padding)"}}}"#.utf8)
            let tooLarge = try await fixture.push(Self.activity, large)
            #expect(tooLarge.status == 413)
            #expect(tooLarge.reason == "PayloadTooLarge")
            // Apple takes priorities 5 and 10 for Live Activities.
            #expect(try await fixture.push(Self.activity, Self.update(now), priority: "1").reason == "BadPriority")
            // Provider tokens only: a client certificate for the bundle is refused.
            let tls = try fixture.gateway.pki.clientTLSConfiguration(clientCertificateFor: [try BundleID(Self.bundle)])
            let client = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: tls)
            let certificate = try await client.send(
                RawHTTP2Client.push(token: Self.activity, [("apns-topic", Self.topic), ("apns-push-type", "liveactivity")]), body: Self.update(now)
            )
            await client.close()
            #expect(certificate.status == 400)
            #expect(certificate.reason == "TopicDisallowed")
            // None of them was decided or delivered.
            try await Task.sleep(for: .milliseconds(300))
            #expect(fixture.delivered(to: Self.activity).isEmpty)
        }
    }

    // MARK: Merging by timestamp

    @Test func updatesWithinTheIntervalDeliverOnlyTheNewestContentAndNeverGoBack() async throws {
        try await Self.withFixture(interval: 20) { fixture in
            let now = Int64(Date().timeIntervalSince1970)
            let connections = try await [fixture.connect(), fixture.connect(), fixture.connect()]
            defer { Task { for connection in connections { await connection.close() } } }
            #expect(try await fixture.push(Self.activity, Self.update(now, health: 1.0, alert: nil)).header("reloadgate-decision") == "scheduled")
            _ = try await eventually { fixture.delivered(to: Self.activity).count == 1 }
            // Within the interval, in whatever order they arrive: the newest timestamp's content and the
            // newest alert go. The three are sent at once on connections opened before, with an interval of
            // 20 s, so that they land in it even on a loaded machine (with 5 s and a new connection each, a
            // full run on two slow cores had one arrive after the interval).
            async let third = fixture.push(Self.activity, Self.update(now + 3, health: 0.7, alert: "Third"), on: connections[0])
            async let first = fixture.push(Self.activity, Self.update(now + 1, health: 0.9, alert: "First"), on: connections[1])
            async let second = fixture.push(Self.activity, Self.update(now + 2, health: 0.8, alert: nil), on: connections[2])
            let decisions = try await [third, first, second].map { $0.header("reloadgate-decision") ?? "-" }
            #expect(decisions.sorted() == ["deferred", "merged", "merged"], "\(decisions)")
            _ = try await eventually(within: .seconds(40)) { fixture.delivered(to: Self.activity).count == 2 }
            let aps = try #require(fixture.delivered(to: Self.activity).last?["aps"] as? [String: Any])
            #expect((aps["timestamp"] as? NSNumber)?.int64Value == now + 3)
            #expect((aps["content-state"] as? [String: Any])?["currentHealthLevel"] as? Double == 0.7)
            #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Third")
            // `explain` of the merged delivery names the request whose content won, and why.
            let merged = try #require(fixture.mock.received.last { $0.deviceToken == Self.activity }?.headers["apns-id"])
            let explained = try await fixture.cli(["explain", merged.lowercased()])
            let content = try #require((explained["delivery"] as? [String: Any])?["content"] as? [String: Any], "\(explained)")
            #expect((content["timestamp"] as? NSNumber)?.int64Value == now + 3)
            #expect((content["merged"] as? NSNumber)?.intValue == 3)
            #expect(content["request"] as? Int == content["alertRequest"] as? Int)
            let text = try await ReloadGateProcess.run(["explain", merged.lowercased(), "--socket", fixture.gateway.configuration.adminSocketPath], in: fixture.gateway.directory.url)
            #expect(text.stdout.contains("(timestamp \(now + 3)): the newest of 3 merged update(s)"), "\(text.stdout)")
            // Older than what the activity shows: dropped with its own decision.
            let older = try await fixture.push(Self.activity, Self.update(now + 2))
            #expect(older.status == 200)
            #expect(older.header("reloadgate-decision") == "outdated")
            try await Task.sleep(for: .milliseconds(300))
            #expect(fixture.delivered(to: Self.activity).count == 2)
            #expect(fixture.mock.timestampsWentBack.isEmpty)
        }
    }
}

extension LiveActivitiesEndToEndTests {
    // MARK: The webhook

    /// A webhook call updates every activity of an attributes type whose attributes match, with the
    /// payload it carries; a push-to-start token of the type is not an activity and gets nothing.
    @Test func aWebhookUpdatesTheActivitiesOfAnAttributesTypeWithItsPayload() async throws {
        try await Self.withFixture { fixture in
            let registered = try await fixture.api.putActivity(
                bundle: Self.bundle, token: Self.pushToStart, apiKey: fixture.credentials.apiKey, attributesType: "AdventureAttributes", pushToStart: true
            )
            #expect(registered.status == 200, "\(registered.body)")
            let now = Int64(Date().timeIntervalSince1970)
            let payload = String(decoding: Self.update(now, health: 0.5, alert: nil), as: UTF8.self)
            let call = try await fixture.reload(#"{"pushType":"liveactivity","kind":"AdventureAttributes","match":{"hero":"Power Panda"},"payload":\#(payload)}"#)
            #expect(call.status == 202, "\(call.body)")
            _ = try await eventually { fixture.delivered(to: Self.activity).count == 1 && fixture.delivered(to: Self.frequent).count == 1 }
            for token in [Self.activity, Self.frequent] {
                let aps = fixture.delivered(to: token).first?["aps"] as? [String: Any]
                #expect((aps?["timestamp"] as? NSNumber)?.int64Value == now)
                #expect((aps?["content-state"] as? [String: Any])?["currentHealthLevel"] as? Double == 0.5)
            }
            // The delivered body is the payload, not the webhook's envelope.
            #expect(fixture.delivered(to: Self.activity).first?["pushType"] == nil)
            try await Task.sleep(for: .milliseconds(300))
            #expect(fixture.delivered(to: Self.pushToStart).isEmpty)
            // Refused with what is wrong: a start, no payload, a payload without a timestamp.
            let start = String(decoding: Self.start(now), as: UTF8.self)
            for (body, says) in [
                (#"{"pushType":"liveactivity","payload":\#(start)}"#, "a start goes to a push-to-start token"),
                (#"{"pushType":"liveactivity"}"#, "payload must be an object"),
                (#"{"pushType":"liveactivity","payload":{"aps":{"event":"update"}}}"#, "aps.timestamp"),
                (#"{"payload":{"aps":{"event":"update","timestamp":1}}}"#, "payload is only for pushType liveactivity"),
            ] {
                let refused = try await fixture.reload(body)
                #expect(refused.status == 422, "\(body)")
                #expect(refused.body.contains(says), "\(refused.body)")
            }
        }
    }

    // MARK: The operator

    /// `pending`, `budget`, `devices list` and `stats` show an activity with its attributes type and the
    /// Live Activities' policy (raised for frequent updates).
    @Test func theOperatorsCommandsShowAnActivity() async throws {
        // An interval longer than the test: the deferred update stays pending while the commands read it.
        try await Self.withFixture(interval: 600) { fixture in
            let now = Int64(Date().timeIntervalSince1970)
            #expect(try await fixture.push(Self.activity, Self.update(now)).status == 200)
            let deferred = try await fixture.push(Self.activity, Self.update(now + 1))
            #expect(deferred.header("reloadgate-decision") == "deferred")
            let pending = try #require(try await fixture.cli(["pending"])["pending"] as? [[String: Any]])
            #expect(pending.map { $0["device"] as? String } == [Self.activity])
            #expect(pending.first?["widget"] as? String == "activity")
            #expect(pending.first?["kind"] as? String == "AdventureAttributes")

            let budget = try #require((try await fixture.cli(["budget", Self.activity])["instances"] as? [[String: Any]])?.first)
            #expect(budget["family"] as? String == "activity")
            #expect(budget["dailyBudget"] as? Int == 240)
            #expect(budget["burst"] as? Int == 12)
            // One token spent by the first update; the deferred one spends the next when it is released.
            #expect(budget["tokens"] as? Int == 11)
            let frequent = try #require((try await fixture.cli(["budget", Self.frequent])["instances"] as? [[String: Any]])?.first)
            #expect(frequent["family"] as? String == "activity-frequent")
            #expect(frequent["dailyBudget"] as? Int == 960)
            #expect(frequent["burst"] as? Int == 48)

            let devices = try #require(try await fixture.cli(["devices", "list"])["devices"] as? [[String: Any]])
            #expect(devices.first { $0["device"] as? String == Self.activity }?["pushType"] as? String == "liveactivity")
        }
    }
}
