import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateMockAPNs
import ReloadGateTesting
import Synchronization
import Testing

/// Delivery to Apple, with the mock APNs server in Apple's place (HTTP/2, TLS, checking the gateway's
/// provider token): pushes enter through the APNs listener, the scheduler releases them, the `apns`
/// upstream sends them, and Apple's answers act on the registry.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct APNsUpstreamTests {
    static let bundle = "com.example.scores"
    static let topic = "com.example.scores.push-type.widgets"
    static let token = String(repeating: "7e", count: 32)
    static let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)

    struct Fixture: Sendable {
        let gateway: TestGateway
        let mock: MockAPNsServer
        let sender: ProviderTokenFactory
        let registeredAt: Date

        /// Sends a push through the gateway's APNs listener.
        func push(priority: Int = 10, kind: String? = nil) async throws -> RawHTTP2Client.Answer {
            let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
            defer { Task { await client.close() } }
            return try await client.send(
                RawHTTP2Client.push(token: APNsUpstreamTests.token, [
                    ("authorization", "bearer \(sender.token())"), ("apns-topic", APNsUpstreamTests.topic),
                    ("apns-priority", String(priority)),
                ]),
                body: kind.map { Array(#"{"aps":{"content-changed":true},"reloadgate":{"kind":"\#($0)"}}"#.utf8) } ?? APNsUpstreamTests.body
            )
        }

        /// Waits until the mock has received `count` requests (``eventually(within:every:_:)``).
        func waitForMock(_ count: Int) async throws -> [MockAPNsServer.Received] {
            _ = try await eventually { mock.received.count >= count }
            return mock.received
        }

        func deliveries(_ states: [RecordedDelivery.State]) async throws -> [RecordedDelivery] {
            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            return try await store.deliveries(in: states)
        }

        /// Waits until no delivery is pending or sending, reading one store opened for the wait.
        func waitForDeliveriesToSettle() async throws {
            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            _ = try await eventually { try await store.deliveries(in: [.pending, .sending]).isEmpty }
        }
    }

    static func withFixture(
        widgets: [WidgetRegistration] = [WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
        configure: (inout GatewayConfiguration) -> Void = { _ in },
        _ body: @Sendable (Fixture) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory("upstream")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        // The operator's .p8 and the mock's copy of its public key.
        let keyFile = directory.path("AuthKey_UPKEY00001.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "UPKEY00001", teamID: "UPTEAM0001")
        defer { Task { await mock.stop() } }

        let sender = ProviderTokenFactory(keyID: "SENDER0001", teamID: "SENDTEAM01")
        let registeredAt = Date().addingTimeInterval(-3600)
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let app = try await store.createApp(bundle: try BundleID(bundle), teamID: sender.teamID, now: Date()).app
            try await store.addProviderKey(
                StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
            )
            _ = try await store.putDevice(
                app: app,
                token: try DeviceToken(token),
                widgets: widgets,
                previousToken: nil,
                now: registeredAt
            )
        }
        try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
            configure(&configuration)
        }) { gateway in
            try await body(Fixture(gateway: gateway, mock: mock, sender: sender, registeredAt: registeredAt))
        }
    }

    @Test func theApnsUpstreamWithoutItsKeyIsAConfigurationErrorNamingTheKeys() async throws {
        do {
            try await TestGateway.withRunning(configure: { $0.upstream.kind = .apns }) { _ in }
            Issue.record("the gateway started without upstream.keyFile")
        } catch let error as ConfigurationError {
            #expect(error.description == "upstream.kind: apns needs upstream.keyFile, upstream.keyID and upstream.teamID")
        }
    }

    @Test(arguments: ["http://localhost:2443", "https://", "https://localhost/3/device", "localhost:2443"])
    func anUpstreamURLThatIsNotHTTPSHostAndPortIsAConfigurationError(url: String) async throws {
        let directory = try TemporaryDirectory("upstream-url")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "URLKEY0001", teamID: "URLTEAM001")
        defer { Task { await mock.stop() } }
        do {
            try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
                configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
                configuration.upstream.url = url
            }) { _ in }
            Issue.record("the gateway started with upstream.url \(url)")
        } catch let error as ConfigurationError {
            #expect(error.description == "upstream.url: \(url) is not https://host or https://host:port")
        }
    }

    @Test func aDueDeliveryReachesApplesServiceOnceWithTheRightRequest() async throws {
        try await Self.withFixture { fixture in
            let answer = try await fixture.push()
            #expect(answer.status == 200, "\(answer.body)")
            let received = try await fixture.waitForMock(1)
            try await fixture.waitForDeliveriesToSettle()
            try #require(received.count == 1)
            let request = received[0]
            #expect(request.deviceToken == Self.token)
            #expect(request.headers[":method"] == "POST")
            #expect(request.headers["apns-topic"] == Self.topic)
            #expect(request.headers["apns-push-type"] == "widgets")
            #expect(request.headers["apns-priority"] == "10")
            #expect(request.body == #"{"aps":{"content-changed":true}}"#)
            // The mock answered 200 only because the gateway's token verified against the operator's key.
            let sent = try await fixture.deliveries([.sent])
            #expect(sent.map(\.apnsID) == [request.headers["apns-id"]])
            #expect(try await fixture.deliveries([.failed]).isEmpty)
        }
    }

    @Test func unregisteredMarksTheDeviceAndItsNextPushGets410() async throws {
        try await Self.withFixture { fixture in
            let appleSaid = Int64(Date().timeIntervalSince1970 * 1000)
            fixture.mock.answer { _ in .status(410, reason: "Unregistered", timestamp: appleSaid) }
            #expect(try await fixture.push().status == 200)
            _ = try await fixture.waitForMock(1)
            try await fixture.waitForDeliveriesToSettle()
            #expect(try await fixture.deliveries([.failed]).count == 1)
            let next = try await fixture.push()
            #expect(next.status == 410)
            #expect(next.reason == "Unregistered")
            #expect(next.body.contains(#""timestamp":\#(appleSaid)"#))
        }
    }

    /// Apple's 410 reaches the running scheduler, not only the store: a reload that was pending for the
    /// device when Apple answered is dropped with a recorded `cancelled` decision and `reloadgate pending`
    /// no longer lists it, without a restart. (Widget w2, kind news, waits an hour for its minimum
    /// interval; a push to w1 brings the 410.)
    @Test func an410DropsTheDevicesPendingReloadsFromTheRunningScheduler() async throws {
        try await Self.withFixture(widgets: [
            WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration()),
            WidgetRegistration(id: "w2", kind: "news", family: .systemSmall, configuration: WidgetConfiguration()),
        ], configure: { configuration in
            configuration.scheduling.defaultPolicy.minimumInterval = 0
            configuration.scheduling.kindOverrides = ["news": ["minimumInterval": "3600"]]
        }) { fixture in
            let appleSaid = Int64(Date().timeIntervalSince1970 * 1000)
            let calls = SharedCounter()
            fixture.mock.answer { _ in
                calls.next() == 0 ? .status(200) : .status(410, reason: "Unregistered", timestamp: appleSaid)
            }
            let store = try SQLiteStore(directory: fixture.gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }

            #expect(try await fixture.push(kind: "news").header("reloadgate-decision") == "scheduled")
            _ = try await fixture.waitForMock(1)
            try await fixture.waitForDeliveriesToSettle()
            // w2 was reloaded a moment ago: the next push to it waits an hour.
            let waiting = try await fixture.push(kind: "news")
            #expect(waiting.header("reloadgate-decision") == "deferred", "\(waiting.headers)")
            let apnsID = try #require(waiting.header("apns-id"))
            #expect(try await store.pendingReloads(PendingFilter()).map(\.widgetID) == ["w2"])

            // A push to w1 goes now; Apple answers 410 for the device.
            #expect(try await fixture.push(kind: "scores").header("reloadgate-decision") == "scheduled")
            _ = try await fixture.waitForMock(2)
            try await fixture.waitForDeliveriesToSettle()
            #expect(try await fixture.deliveries([.failed]).count == 1)
            _ = try await eventually { try await store.pendingReloads(PendingFilter()).isEmpty }
            #expect(try await store.pendingReloads(PendingFilter()).isEmpty)
            let request = try #require(try await store.requests(apnsID: apnsID.lowercased()).last)
            let decisions = try #require(try await store.requestRecord(request)).decisions
            #expect(decisions.map(\.decision) == ["deferred", "cancelled"], "\(decisions)")
            #expect(decisions.last?.reason.contains("410 Unregistered") == true, "\(decisions)")
            #expect(try await fixture.push(kind: "news").status == 410)
        }
    }

    @Test func an410OlderThanTheDevicesRegistrationDoesNotUnregisterIt() async throws {
        try await Self.withFixture { fixture in
            let beforeRegistration = Int64(fixture.registeredAt.timeIntervalSince1970 * 1000) - 60_000
            fixture.mock.answer { _ in .status(410, reason: "Unregistered", timestamp: beforeRegistration) }
            #expect(try await fixture.push().status == 200)
            _ = try await fixture.waitForMock(1)
            try await fixture.waitForDeliveriesToSettle()
            let next = try await fixture.push(priority: 5)
            #expect(next.status == 200, "\(next.body)")
        }
    }

    /// A 410 whose timestamp is no time (Int64.max, 1e300, negative) is a 410 "now", not a trap: the
    /// device is unregistered and its next push answers with a timestamp in range.
    @Test(arguments: ["9223372036854775807", "1e300", "-1", "\"soon\""])
    func an410WithAHostileTimestampUnregistersTheDeviceNow(_ timestamp: String) async throws {
        try await Self.withFixture { fixture in
            fixture.mock.answer { _ in .raw(410, #"{"reason":"Unregistered","timestamp":\#(timestamp)}"#) }
            let before = Int64(Date().timeIntervalSince1970 * 1000)
            #expect(try await fixture.push().status == 200)
            _ = try await fixture.waitForMock(1)
            try await fixture.waitForDeliveriesToSettle()
            let next = try await fixture.push()
            #expect(next.status == 410, "\(next.body)")
            let said = try #require(next.body.firstMatch(of: /"timestamp":(\d+)/).flatMap { Int64($0.1) }, "\(next.body)")
            #expect(said >= before - 1000 && said <= Int64(Date().timeIntervalSince1970 * 1000), "\(next.body)")
        }
    }

    /// A `retry-after` of 20 digits (no Int64) is ignored: the usual backoff, then the delivery goes.
    @Test func aRetryAfterOfTwentyDigitsIsIgnored() async throws {
        try await Self.withFixture { fixture in
            let calls = SharedCounter()
            fixture.mock.answer { _ in
                calls.next() == 0
                    ? .raw(429, #"{"reason":"TooManyRequests"}"#, headers: [("retry-after", "99999999999999999999")]) : .status(200)
            }
            #expect(try await fixture.push().status == 200)
            #expect(try await fixture.waitForMock(2).count == 2)
            try await fixture.waitForDeliveriesToSettle()
            #expect(try await fixture.deliveries([.sent]).count == 1)
        }
    }

    @Test func badDeviceTokenIsNotRetried() async throws {
        try await Self.withFixture { fixture in
            fixture.mock.answer { _ in .status(400, reason: "BadDeviceToken") }
            #expect(try await fixture.push().status == 200)
            _ = try await fixture.waitForMock(1)
            try await fixture.waitForDeliveriesToSettle()
            try await Task.sleep(for: .milliseconds(1500))
            #expect(fixture.mock.received.count == 1)
            #expect(try await fixture.deliveries([.failed]).count == 1)
        }
    }

    @Test func tooManyRequestsAndServiceUnavailableAreRetriedUntilTheyGoThrough() async throws {
        try await Self.withFixture { fixture in
            let calls = SharedCounter()
            fixture.mock.answer { _ in
                switch calls.next() {
                case 0: .status(429, reason: "TooManyRequests")
                case 1: .status(503, reason: "ServiceUnavailable")
                default: .status(200)
                }
            }
            #expect(try await fixture.push().status == 200)
            let received = try await fixture.waitForMock(3)
            try await fixture.waitForDeliveriesToSettle()
            #expect(received.count == 3)
            // The same apns-id on every attempt.
            #expect(Set(received.compactMap { $0.headers["apns-id"] }).count == 1)
            #expect(try await fixture.deliveries([.sent]).count == 1)
            // Growing waits: at least 1 s then at least 2 s (upstream.retryDelay 1000 ms, doubled; jitter
            // takes at most 20% off). Only lower bounds: a busy machine makes any wait longer.
            if received.count == 3 {
                let first = received[0].receivedAt.duration(to: received[1].receivedAt)
                let second = received[1].receivedAt.duration(to: received[2].receivedAt)
                #expect(first >= .milliseconds(790), "\(first)")
                #expect(second >= .milliseconds(1590), "\(second)")
            }

            // /metrics counts the attempts by outcome and reason, the deliveries, the latency, the queue.
            let metrics = try await fixture.gateway.withHTTPClient { client in
                try await GatewayAPIClient(client: client, baseURL: fixture.gateway.baseURL).send(.GET, "/metrics")
            }
            #expect(metrics.status == 200)
            let series = PrometheusText(metrics.body)
            #expect(series[#"reloadgate_delivery_attempts_total{outcome="retry",reason="TooManyRequests"}"#] == 1)
            #expect(series[#"reloadgate_delivery_attempts_total{outcome="retry",reason="ServiceUnavailable"}"#] == 1)
            #expect(series[#"reloadgate_delivery_attempts_total{outcome="sent",reason=""}"#] == 1)
            #expect(series[#"reloadgate_deliveries_total{outcome="sent"}"#] == 1)
            #expect(series["reloadgate_delivery_latency_seconds_count"] == 3)
            #expect(series["reloadgate_delivery_queue_depth"] == 0)
        }
    }

    /// A push service that speaks only HTTP/1.1 (its TLS handshake agrees on no protocol: the gateway offers
    /// h2 alone) is sent nothing: the connection is closed, the attempt was not sent (no unknown outcome),
    /// and the delivery waits with the reason.
    @Test func aPushServiceThatDoesNotAgreeOnHTTP2IsSentNothing() async throws {
        // The fixture's PKI (which the gateway trusts) is made with the fixture: the server takes its TLS
        // context from this box, set before the push.
        let contextBox = Mutex<NIOSSLContext?>(nil)
        let accepted = SharedCounter()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                _ = accepted.next()
                return channel.eventLoop.makeCompletedFuture {
                    guard let context = contextBox.withLock({ $0 }) else { throw ChannelError.ioOnClosedChannel }
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        try await Self.withFixture(configure: { configuration in
            configuration.upstream.url = "https://localhost:\(server.localAddress!.port!)"
        }) { fixture in
            var tls = try fixture.gateway.pki.serverTLSConfiguration()
            tls.applicationProtocols = ["http/1.1"]
            let context = try NIOSSLContext(configuration: tls)
            contextBox.withLock { $0 = context }
            #expect(try await fixture.push().status == 200)
            let store = try SQLiteStore(directory: fixture.gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            _ = try await eventually { try await store.deliveries(in: [.pending]).first?.history.lastError != nil }
            let waiting = try #require(try await store.deliveries(in: [.pending]).first)
            let port = server.localAddress!.port!
            #expect(
                waiting.history.lastError == "not sent: cannot connect to localhost:\(port): the push service did not agree on HTTP/2 (ALPN: none)",
                "\(waiting.history)"
            )
            #expect(waiting.history.unknownOutcomes == 0)
            #expect(accepted.next() > 0)
            #expect(fixture.mock.received.isEmpty)
        }
    }

    @Test func aResetStreamAndAGoAwayAreSurvived() async throws {
        try await Self.withFixture { fixture in
            let calls = SharedCounter()
            fixture.mock.answer { _ in
                switch calls.next() {
                case 0: .reset
                case 1: .goAway
                default: .status(200)
                }
            }
            #expect(try await fixture.push().status == 200)
            _ = try await fixture.waitForMock(3)
            try await fixture.waitForDeliveriesToSettle()
            let sent = try await fixture.deliveries([.sent])
            #expect(sent.count == 1)
            // The reset stream left its outcome unknown; the GOAWAY said the request was not processed.
            #expect(sent.first?.history.attempts == 3)
            #expect(sent.first?.history.unknownOutcomes == 1)
        }
    }
}

/// Prometheus' text format, read into `series -> value` (`name{labels}` as written).
struct PrometheusText {
    private var values: [String: Double] = [:]
    /// The series as written, for messages.
    var lines: [String] { values.keys.sorted() }

    init(_ text: String) {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
    }

    subscript(series: String) -> Double? { values[series] }
}
