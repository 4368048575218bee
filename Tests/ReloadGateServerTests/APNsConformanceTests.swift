import Foundation
import GRDB
import NIOHTTP2
import NIOSSL
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The APNs listener against docs/APNS.md over real TLS and HTTP/2, with a bare HTTP/2 client that sends
/// exactly the fields each case needs: one case per reason of the table and per authentication rule.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct APNsConformanceTests {
    static let bundle = "com.example.scores"
    static let topic = "com.example.scores.push-type.widgets"
    static let token = String(repeating: "ab", count: 32)
    static let retired = String(repeating: "cd", count: 32)
    static let otherAppsToken = String(repeating: "ef", count: 32)
    static let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)

    /// Everything a case needs: the running gateway, the sender's keys, the store.
    struct Fixture: Sendable {
        let gateway: TestGateway
        let sender: ProviderTokenFactory
        let otherTeam: ProviderTokenFactory
        let restricted: ProviderTokenFactory
        let productionOnly: ProviderTokenFactory
        let unregisteredAt: Date
        /// The registry API's key of `bundle`.
        let apiKey: String

        func connect(tls: TLSConfiguration? = nil) async throws -> RawHTTP2Client {
            try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try tls ?? gateway.pki.clientTLSConfiguration())
        }

        /// A push on a new connection.
        func push(
            token: String = APNsConformanceTests.token,
            _ fields: [(String, String)],
            body: [UInt8]? = APNsConformanceTests.body
        ) async throws -> RawHTTP2Client.Answer {
            let client = try await connect()
            defer { Task { await client.close() } }
            return try await client.send(RawHTTP2Client.push(token: token, fields), body: body)
        }

        /// The usual fields of a valid token-authenticated push, with `extra` after them.
        func fields(_ extra: [(String, String)] = [], token: String? = nil) -> [(String, String)] {
            [("authorization", "bearer \(token ?? sender.token())"), ("apns-topic", APNsConformanceTests.topic), ("apns-push-type", "widgets")] + extra
        }

        func store() throws -> SQLiteStore {
            try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
        }
    }

    /// Prepares the store (app, keys, devices) before the gateway starts, then runs `body`.
    static func withFixture(
        pki: TestPKI? = nil,
        configure: @escaping @Sendable (inout GatewayConfiguration) -> Void = { _ in },
        _ body: @Sendable (Fixture) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory("apns")
        defer { directory.remove() }
        let sender = ProviderTokenFactory(keyID: "KEY0000001", teamID: "TEAM000001")
        let otherTeam = ProviderTokenFactory(keyID: "KEY0000002", teamID: "TEAM000002")
        let restricted = ProviderTokenFactory(keyID: "KEY0000003", teamID: "TEAM000003")
        let productionOnly = ProviderTokenFactory(keyID: "KEY0000004", teamID: "TEAM000004")
        let unregisteredAt = Date(timeIntervalSince1970: 1_790_000_000)
        let credentials: AppCredentials
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            credentials = try await store.createApp(bundle: try BundleID(bundle), teamID: sender.teamID, now: Date())
            let app = credentials.app
            let other = try await store.createApp(bundle: try BundleID("com.example.other"), teamID: restricted.teamID, now: Date()).app
            for (factory, topics, environments) in [
                (sender, [String](), "both"), (otherTeam, [], "sandbox"), (restricted, ["com.example.other"], "both"),
                (productionOnly, [], "production"),
            ] {
                try await store.addProviderKey(
                    StoredProviderKey(
                        keyID: factory.keyID,
                        teamID: factory.teamID,
                        publicKeyPEM: factory.publicKeyPEM,
                        topics: try topics.map { try BundleID($0) },
                        environments: environments,
                        createdAt: Date()
                    )
                )
            }
            let widgets = [
                WidgetRegistration(id: "w-scores", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration(["team": .string("42")])),
                WidgetRegistration(id: "w-news", kind: "news", family: .systemMedium, configuration: WidgetConfiguration()),
            ]
            _ = try await store.putDevice(app: app, token: try DeviceToken(retired), widgets: widgets, previousToken: nil, now: unregisteredAt)
            _ = try await store.putDevice(app: app, token: try DeviceToken(token), widgets: widgets, previousToken: try DeviceToken(retired), now: unregisteredAt)
            _ = try await store.putDevice(app: other, token: try DeviceToken(otherAppsToken), widgets: widgets, previousToken: nil, now: Date())
        }
        try await TestGateway.withRunning(in: directory, pki: pki, configure: configure) { gateway in
            try await body(
                Fixture(
                    gateway: gateway,
                    sender: sender,
                    otherTeam: otherTeam,
                    restricted: restricted,
                    productionOnly: productionOnly,
                    unregisteredAt: unregisteredAt,
                    apiKey: credentials.apiKey
                )
            )
        }
    }

    // MARK: Success

    @Test func aValidPushIsAnsweredAfterItsDecisionWithTheExtensionHeaders() async throws {
        try await Self.withFixture { fixture in
            let id = "6b2e7d80-1e8f-4c55-9d8a-0b5a0ef0c001"
            let answer = try await fixture.push(fixture.fields([("apns-id", id)]))
            #expect(answer.status == 200, "\(answer.body)")
            #expect(answer.header("apns-id") == id)
            #expect(answer.header("reloadgate-decision") == "scheduled")
            #expect(answer.header("reloadgate-due") != nil)
            #expect(answer.body.isEmpty)

            // Recorded with its decisions, and delivered to the outbox (one push for both widgets).
            let store = try fixture.store()
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 1)
            #expect(try await store.ledgerCounts().decisions == 2)
            var outbox = ""
            _ = try await eventually {
                outbox = (try? String(contentsOfFile: fixture.gateway.configuration.dataDirectory + "/outbox.jsonl", encoding: .utf8)) ?? ""
                return outbox.contains(Self.token)
            }
            #expect(outbox.contains(#""widgets":["w-scores","w-news"]"#))
        }
    }

    @Test func theReloadgateKeyNarrowsThePushToMatchingWidgets() async throws {
        try await Self.withFixture { fixture in
            let narrowed = Array(#"{"aps":{"content-changed":true},"reloadgate":{"kind":"scores","match":{"team":"7"}}}"#.utf8)
            let none = try await fixture.push(fixture.fields(), body: narrowed)
            #expect(none.status == 200)
            #expect(none.header("reloadgate-decision") == "no-match")
            #expect(none.header("reloadgate-due") == nil)
        }
    }

    @Test func withoutAnApnsIDTheGatewayMakesOne() async throws {
        try await Self.withFixture { fixture in
            let answer = try await fixture.push(fixture.fields())
            #expect(answer.status == 200)
            let id = try #require(answer.header("apns-id"))
            #expect(id == id.lowercased() && UUID(uuidString: id) != nil)
        }
    }

    /// A push finds the registry as it is when the push arrives, though the gateway keeps what its last
    /// push of the device read (``RegistryCache``): a registration between two pushes, through the
    /// registry API, changes the widgets the second reloads, and a token replaced in between is
    /// Unregistered.
    @Test func aPushFindsTheWidgetsOfTheDevicesLastRegistration() async throws {
        try await Self.withFixture { fixture in
            let outboxPath = fixture.gateway.configuration.dataDirectory + "/outbox.jsonl"
            func outbox() -> String { (try? String(contentsOfFile: outboxPath, encoding: .utf8)) ?? "" }
            // Twice: the second push finds what the first kept.
            for _ in 0..<2 {
                #expect(try await fixture.push(fixture.fields()).status == 200)
            }
            _ = try await eventually { outbox().contains(#""widgets":["w-scores","w-news"]"#) }
            try await fixture.gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: fixture.gateway.baseURL)
                // The device registers again: its one widget is now `w-weather`.
                let weather: [[String: Any]] = [["id": "w-weather", "kind": "weather", "family": "systemSmall", "configuration": [String: Any]()]]
                let changed = try await api.putDevice(bundle: Self.bundle, token: Self.token, apiKey: fixture.apiKey, widgets: weather)
                try #require(changed.status == 200, "\(changed.body)")
                let scheduled = try await fixture.push(fixture.fields())
                #expect(scheduled.status == 200, "\(scheduled.body)")
                #expect(scheduled.header("reloadgate-decision") == "scheduled")
                #expect(try await eventually(within: .seconds(20)) { outbox().contains(#""widgets":["w-weather"]"#) })

                // The device's token changes: the one it replaced is Unregistered from then on.
                let replacement = String(repeating: "a7", count: 32)
                let replaced = try await api.putDevice(
                    bundle: Self.bundle, token: replacement, apiKey: fixture.apiKey, widgets: weather, previousToken: Self.token
                )
                try #require(replaced.status == 200, "\(replaced.body)")
                let retired = try await fixture.push(fixture.fields())
                #expect(retired.status == 410, "\(retired.body)")
                #expect(retired.reason == "Unregistered")
            }
        }
    }

    // MARK: One case per reason

    struct ReasonCase: Sendable, CustomTestStringConvertible {
        let reason: String
        let status: Int
        let make: @Sendable (Fixture) -> (token: String, fields: [(String, String)], body: [UInt8]?, path: String?, method: String?)
        var testDescription: String { "\(status) \(reason)" }

        init(
            _ reason: String,
            _ status: Int,
            _ make: @escaping @Sendable (Fixture) -> (token: String, fields: [(String, String)], body: [UInt8]?, path: String?, method: String?)
        ) {
            self.reason = reason
            self.status = status
            self.make = make
        }

        static func fields(_ extra: [(String, String)] = [], token: String = APNsConformanceTests.token, body: [UInt8]? = APNsConformanceTests.body)
            -> @Sendable (Fixture) -> (token: String, fields: [(String, String)], body: [UInt8]?, path: String?, method: String?)
        {
            { fixture in (token, fixture.fields(extra), body, nil, nil) }
        }
    }

    static let reasonCases: [ReasonCase] = [
        ReasonCase("BadCollapseId", 400, ReasonCase.fields([("apns-collapse-id", String(repeating: "c", count: 65))])),
        ReasonCase("BadDeviceToken", 400, ReasonCase.fields(token: "not-hex-at-all")),
        ReasonCase("BadExpirationDate", 400, ReasonCase.fields([("apns-expiration", "tomorrow")])),
        ReasonCase("BadMessageId", 400, ReasonCase.fields([("apns-id", "1234")])),
        ReasonCase("BadPriority", 400, ReasonCase.fields([("apns-priority", "7")])),
        ReasonCase("BadTopic", 400) { fixture in
            (token, [("authorization", "bearer \(fixture.sender.token())"), ("apns-topic", "com..scores.push-type.widgets")], body, nil, nil)
        },
        ReasonCase("DeviceTokenNotForTopic", 400, ReasonCase.fields(token: otherAppsToken)),
        ReasonCase("DuplicateHeaders", 400, ReasonCase.fields([("apns-priority", "10"), ("apns-priority", "10")])),
        ReasonCase("InvalidPushType", 400) { fixture in
            (token, [("authorization", "bearer \(fixture.sender.token())"), ("apns-topic", topic), ("apns-push-type", "alert")], body, nil, nil)
        },
        ReasonCase("MissingDeviceToken", 400, ReasonCase.fields(token: "")),
        ReasonCase("MissingTopic", 400) { fixture in (token, [("authorization", "bearer \(fixture.sender.token())")], body, nil, nil) },
        ReasonCase("PayloadEmpty", 400, ReasonCase.fields(body: nil)),
        ReasonCase("InvalidPayload", 400, ReasonCase.fields(body: Array(#"{"aps":{"alert":"hi"}}"#.utf8))),
        ReasonCase("TopicDisallowed", 400) { fixture in
            (token, [("authorization", "bearer \(fixture.restricted.token())"), ("apns-topic", topic)], body, nil, nil)
        },
        ReasonCase("BadEnvironmentKeyIdInToken", 403) { fixture in
            (token, [("authorization", "bearer \(fixture.productionOnly.token())"), ("apns-topic", topic)], body, nil, nil)
        },
        ReasonCase("ExpiredProviderToken", 403) { fixture in
            (token, [("authorization", "bearer \(fixture.sender.token(iat: Int64(Date().timeIntervalSince1970) - 3700))"), ("apns-topic", topic)], body, nil, nil)
        },
        ReasonCase("InvalidProviderToken", 403) { fixture in
            (token, [("authorization", "bearer not.a.token"), ("apns-topic", topic)], body, nil, nil)
        },
        ReasonCase("MissingProviderToken", 403) { _ in (token, [("apns-topic", topic)], body, nil, nil) },
        ReasonCase("BadPath", 404) { fixture in (token, fixture.fields(), body, "/3/devices/\(token)", nil) },
        ReasonCase("MethodNotAllowed", 405) { fixture in (token, fixture.fields(), nil, nil, "GET") },
        ReasonCase("Unregistered", 410, ReasonCase.fields(token: retired)),
        ReasonCase("PayloadTooLarge", 413, ReasonCase.fields(body: Array(repeating: UInt8(ascii: " "), count: 4097))),
    ]

    @Test(arguments: reasonCases)
    func eachReasonOfTheTable(_ reasonCase: ReasonCase) async throws {
        try await Self.withFixture { fixture in
            let made = reasonCase.make(fixture)
            var headers = RawHTTP2Client.push(token: made.token, made.fields)
            if let path = made.path { headers[2] = (":path", path) }
            if let method = made.method { headers[0] = (":method", method) }
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            let answer = try await client.send(headers, body: made.body)
            #expect(answer.status == reasonCase.status, "\(answer.body)")
            #expect(answer.reason == reasonCase.reason, "\(answer.body)")
            #expect(answer.header("content-type") == "application/json")
            #expect(answer.header("apns-id") != nil)
            if reasonCase.reason == "Unregistered" {
                #expect(answer.body.contains(#""timestamp":\#(Int64(fixture.unregisteredAt.timeIntervalSince1970 * 1000))"#))
            }
        }
    }

    @Test func aRefusedPushStoresNothing() async throws {
        try await Self.withFixture { fixture in
            for fields in [fixture.fields([("apns-priority", "7")]), [("apns-topic", Self.topic)]] {
                let answer = try await fixture.push(fields)
                #expect(answer.status != 200)
            }
            let store = try fixture.store()
            defer { try? store.close() }
            let counts = try await store.ledgerCounts()
            #expect(counts.requests == 0 && counts.decisions == 0 && counts.pendingReloads == 0 && counts.deliveries == 0)
        }
    }

    @Test func aTenMegabyteBodyIsRefusedWithoutBeingRead() async throws {
        try await Self.withFixture { fixture in
            // The stream window (64 KiB) is never opened further, so the sender cannot push the rest
            // before the 413 and the reset arrive.
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            let token = fixture.sender.token()
            let answer = try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: token)), body: Array(repeating: 0x20, count: 10 << 20))
            #expect(answer.status == 413)
            #expect(answer.reason == "PayloadTooLarge")
            // The connection still works.
            #expect(try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: token)), body: Self.body).status == 200)
        }
    }

    @Test func aStorageFailureIsInternalServerErrorAndAcceptsNothing() async throws {
        try await Self.withFixture { fixture in
            #expect(try await fixture.push(fixture.fields()).status == 200)
            // Break the store under the running gateway (another connection to its file): the next group
            // commit fails.
            // (It waits for the gateway's own write in progress, if any: without a busy timeout it failed at
            // once with `database is locked` when the first push's delivery state was being written.)
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            let database = try DatabaseQueue(path: fixture.gateway.configuration.dataDirectory + "/reloadgate.sqlite", configuration: configuration)
            try await database.write { db in try db.execute(sql: "DROP TABLE decision_run; DROP TABLE request") }
            try database.close()
            let answer = try await fixture.push(fixture.fields([("apns-priority", "5")]))
            #expect(answer.status == 500, "\(answer.body)")
            #expect(answer.reason == "InternalServerError")
        }
    }

    // MARK: Order of checks

    @Test func checksRunInAPNSOrderSoAnUnauthenticatedCallerLearnsNothingAboutTokens() async throws {
        try await Self.withFixture { fixture in
            // Headers before authentication.
            let badHeader = try await fixture.push([("apns-topic", Self.topic), ("apns-priority", "7")])
            #expect(badHeader.reason == "BadPriority")
            // Authentication before the device token: a retired, a foreign and a malformed token all look alike.
            for token in [Self.retired, Self.otherAppsToken, "zz"] {
                let answer = try await fixture.push(token: token, [("apns-topic", Self.topic)])
                #expect(answer.reason == "MissingProviderToken", "\(token)")
            }
            // Payload before the device token.
            let both = try await fixture.push(token: "zz", fixture.fields(), body: nil)
            #expect(both.reason == "PayloadEmpty")
            // Method and path first of all.
            var headers = RawHTTP2Client.push(token: Self.token, [("apns-priority", "7")])
            headers[0] = (":method", "PUT")
            let client = try await fixture.connect()
            let method = try await client.send(headers, body: nil)
            await client.close()
            #expect(method.reason == "MethodNotAllowed")
        }
    }

    // MARK: Authentication rules

    @Test func tokenRules() async throws {
        try await Self.withFixture { fixture in
            let now = Int64(Date().timeIntervalSince1970)
            let sender = fixture.sender
            var tampered = Array(sender.token().utf8)
            tampered[tampered.count - 5] = tampered[tampered.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let cases: [(String, String, String?)] = [
                ("alg none", sender.unsignedToken(), "InvalidProviderToken"),
                ("HS256 with the public key as secret", sender.hs256TokenWithPublicKeyAsSecret(), "InvalidProviderToken"),
                ("tampered signature", String(decoding: tampered, as: UTF8.self), "InvalidProviderToken"),
                ("foreign kid", sender.token(keyID: "NOSUCHKEY1"), "InvalidProviderToken"),
                ("kid of another team", sender.token(keyID: fixture.otherTeam.keyID), "InvalidProviderToken"),
                ("RS256 header", sender.token(header: #"{"alg":"RS256","kid":"\#(sender.keyID)"}"#), "InvalidProviderToken"),
                ("no kid", sender.token(header: #"{"alg":"ES256"}"#), "InvalidProviderToken"),
                ("iat more than an hour old", sender.token(iat: now - 3601 - 5), "ExpiredProviderToken"),
                ("iat in the future beyond the skew", sender.token(iat: now + 600), "InvalidProviderToken"),
                ("iat in the future within the skew", sender.token(iat: now + 30), nil),
                ("DER signature (openssl's recipe)", sender.token(der: true), nil),
                ("iat as a numeric string", sender.token(iatAsString: true), nil),
                ("iat with a fraction (time.time())", sender.token(iatJSON: "\(now - 5).42"), nil),
                ("iat as a string with a fraction", sender.token(iatJSON: "\"\(now - 5).999\""), nil),
                ("iat 1e300", sender.token(iatJSON: "1e300"), "InvalidProviderToken"),
                ("iat -1e18", sender.token(iatJSON: "-1e18"), "InvalidProviderToken"),
                ("iat Int64.max", sender.token(iatJSON: "9223372036854775807"), "InvalidProviderToken"),
                ("iat Int64.min as a string", sender.token(iatJSON: "\"-9223372036854775808\""), "InvalidProviderToken"),
                ("extra typ header", sender.token(header: #"{"alg":"ES256","kid":"\#(sender.keyID)","typ":"JWT"}"#), nil),
            ]
            for (name, token, reason) in cases {
                let answer = try await fixture.push([("authorization", "bearer \(token)"), ("apns-topic", Self.topic)])
                if let reason {
                    #expect(answer.status == 403, "\(name): \(answer.body)")
                    #expect(answer.reason == reason, "\(name): \(answer.body)")
                } else {
                    #expect(answer.status == 200, "\(name): \(answer.body)")
                }
            }
        }
    }

    /// Apple's keys are team-scoped: a key without topics pushes to its own team's apps only.
    @Test func aKeyWithoutTopicsMayNotPushToAnotherTeamsApp() async throws {
        try await Self.withFixture { fixture in
            let foreign = try await fixture.push(fixture.fields(token: fixture.otherTeam.token()))
            #expect(foreign.status == 400, "\(foreign.body)")
            #expect(foreign.reason == "TopicDisallowed")
            // A key naming the other app, of that app's team, pushes to it.
            let other = [("authorization", "bearer \(fixture.restricted.token())"), ("apns-topic", "com.example.other.push-type.widgets")]
            #expect(try await fixture.push(token: Self.otherAppsToken, other).status == 200)
            // Its topics do not reach across teams either.
            let across = [("authorization", "bearer \(fixture.restricted.token())"), ("apns-topic", Self.topic)]
            #expect(try await fixture.push(across).reason == "TopicDisallowed")
            let store = try fixture.store()
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 1)
        }
    }

    /// The pushes that killed the gateway (an expiration whose milliseconds overflow) are refused with
    /// BadExpirationDate, store nothing, and the connection and the gateway go on.
    @Test func expirationsWhoseMillisecondsOverflowAreBadExpirationDate() async throws {
        try await Self.withFixture { fixture in
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            for value in ["9223372036854775807", "-9223372036854775808", "18446744073709551616", "1e300", "253402300800"] {
                let answer = try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields([("apns-expiration", value)])), body: Self.body)
                #expect(answer.status == 400 && answer.reason == "BadExpirationDate", "\(value): \(answer.body)")
            }
            let last = try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields([("apns-expiration", "253402300799")])), body: Self.body)
            #expect(last.status == 200, "\(last.body)")
            let store = try fixture.store()
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 1)
        }
    }

    @Test func aMissingAuthorityWithAHostHeaderIsFine() async throws {
        try await Self.withFixture { fixture in
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            let headers = RawHTTP2Client.push(token: Self.token, authority: nil, [("host", "localhost")] + fixture.fields())
            let answer = try await client.send(headers, body: Self.body)
            #expect(answer.status == 200, "\(answer.body)")
        }
    }

    /// RFC 9113 8.2-8.3: a malformed request is reset with PROTOCOL_ERROR, stores nothing, and leaves
    /// the connection open (the listener checks header blocks itself: HTTP2RequestFields).
    @Test func malformedRequestsAreResetWithProtocolErrorAndTheConnectionStays() async throws {
        try await Self.withFixture { fixture in
            let client = try await RawHTTP2Client.connect(
                port: fixture.gateway.ingressPort,
                tls: try fixture.gateway.pki.clientTLSConfiguration(),
                validating: false
            )
            defer { Task { await client.close() } }
            let path = "/3/device/\(Self.token)"
            let pseudo = [(":method", "POST"), (":scheme", "https"), (":path", path), (":authority", "localhost")]
            let fields = fixture.fields()
            let cases: [(String, [(String, String)])] = [
                ("an upper-case name", pseudo + fields + [("Apns-Priority", "10")]),
                ("a pseudo-header after a regular field", [(":method", "POST"), (":scheme", "https")] + fields + [(":path", path)]),
                ("an unknown pseudo-header", pseudo + [(":protocol", "websocket")] + fields),
                ("a repeated pseudo-header", pseudo + [(":path", path)] + fields),
                ("no :scheme", [(":method", "POST"), (":path", path)] + fields),
                ("an empty :path", [(":method", "POST"), (":scheme", "https"), (":path", "")] + fields),
                ("a space in :path", [(":method", "POST"), (":scheme", "https"), (":path", path + " x")] + fields),
                ("a connection-specific field", pseudo + fields + [("connection", "keep-alive")]),
                ("te other than trailers", pseudo + fields + [("te", "gzip")]),
                ("a line feed in a value", pseudo + fields + [("user-agent", "a\nb")]),
                ("a content-length that is no number", pseudo + fields + [("content-length", "many")]),
                ("a body shorter than its content-length", pseudo + fields + [("content-length", "40")]),
                ("a body longer than its content-length", pseudo + fields + [("content-length", "5")]),
            ]
            for (name, headers) in cases {
                let answer = try await client.send(headers, body: Self.body)
                #expect(answer.reset == .protocolError, "\(name): status \(answer.status) \(answer.body)")
                #expect(answer.status == 0, "\(name)")
            }
            let valid = try await client.send(pseudo + fields + [("content-length", "\(Self.body.count)")], body: Self.body)
            #expect(valid.status == 200, "\(valid.body)")
            let store = try fixture.store()
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 1)
        }
    }

    @Test func aConnectionIsBoundToItsTeamAndMayNotSwitchTokensWithin20Minutes() async throws {
        try await Self.withFixture { fixture in
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            let first = fixture.sender.token()
            #expect(try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: first)), body: Self.body).status == 200)
            // The same token again: fine.
            #expect(try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: first)), body: Self.body).status == 200)
            // Another team's valid token on the bound connection.
            let foreign = try await client.send(
                RawHTTP2Client.push(token: Self.token, fixture.fields(token: fixture.otherTeam.token())),
                body: Self.body
            )
            #expect(foreign.status == 403)
            #expect(foreign.reason == "InvalidProviderToken")
            // A second token of the same team, a minute later than the first one was made.
            let second = fixture.sender.token(iat: Int64(Date().timeIntervalSince1970) - 60)
            let update = try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: second)), body: Self.body)
            #expect(update.status == 429)
            #expect(update.reason == "TooManyProviderTokenUpdates")
            // On a new connection the second token is fine.
            #expect(try await fixture.push(fixture.fields(token: second)).status == 200)
        }
    }

    @Test func tokenUpdatesMayBeAllowed() async throws {
        try await Self.withFixture(configure: { $0.ingress.tokenUpdateInterval = 0 }) { fixture in
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            for iat in [0, 60] as [Int64] {
                let token = fixture.sender.token(iat: Int64(Date().timeIntervalSince1970) - iat)
                let answer = try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: token)), body: Self.body)
                #expect(answer.status == 200)
            }
        }
    }

    @Test func twoHundredStreamsMultiplexedOnOneConnection() async throws {
        try await Self.withFixture { fixture in
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            let token = fixture.sender.token()
            let answers = try await withThrowingTaskGroup(of: RawHTTP2Client.Answer.self) { group in
                for _ in 0..<200 {
                    group.addTask { try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: token)), body: Self.body) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 200)
            #expect(answers.allSatisfy { $0.status == 200 })
            #expect(Set(answers.compactMap { $0.header("apns-id") }).count == 200)
            let store = try fixture.store()
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().requests == 200)
        }
    }

    @Test func aHammeredTokenGetsTooManyRequests() async throws {
        try await Self.withFixture(configure: { $0.ingress.requestsPerSecondPerToken = 1 }) { fixture in
            let client = try await fixture.connect()
            defer { Task { await client.close() } }
            // One per second with a burst of two: of ten pushes sent at once, most are refused.
            let token = fixture.sender.token()
            let started = ContinuousClock.now
            let reasons = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await client.send(RawHTTP2Client.push(token: Self.token, fixture.fields(token: token)), body: Self.body).reason }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            let seconds = Int((ContinuousClock.now - started).components.seconds) + 1
            #expect(reasons.filter { $0 == nil }.count >= 1)
            #expect(reasons.filter { $0 == nil }.count <= 2 + seconds)
            #expect(reasons.allSatisfy { $0 == nil || $0 == "TooManyRequests" })
        }
    }

    @Test func unknownDevicesAreAdoptedOrRejected() async throws {
        let unknown = String(repeating: "12", count: 32)
        try await Self.withFixture { fixture in
            let answer = try await fixture.push(token: unknown, fixture.fields())
            #expect(answer.status == 200, "\(answer.body)")
            #expect(answer.header("reloadgate-decision") == "scheduled")
            let store = try fixture.store()
            defer { try? store.close() }
            let app = try #require(try await store.app(bundle: try BundleID(Self.bundle)))
            #expect(try await store.deviceStatus(app: app, token: try DeviceToken(unknown))?.active == true)
        }
        try await Self.withFixture(configure: { $0.ingress.unknownDevices = .reject }) { fixture in
            let answer = try await fixture.push(token: unknown, fixture.fields())
            #expect(answer.status == 400)
            #expect(answer.reason == "BadDeviceToken")
        }
    }

    // MARK: Client certificates

    @Test func clientCertificatesDecideByTheirTopics() async throws {
        try await Self.withFixture { fixture in
            let pki = fixture.gateway.pki
            // A certificate for the bundle: no authorization header needed, and with one topic no apns-topic.
            let own = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: try pki.clientTLSConfiguration(clientCertificateFor: [try BundleID(Self.bundle)]))
            let ok = try await own.send(RawHTTP2Client.push(token: Self.token, [("apns-push-type", "widgets")]), body: Self.body)
            #expect(ok.status == 200, "\(ok.body)")
            // An authorization header is ignored on a certificate connection.
            let ignored = try await own.send(RawHTTP2Client.push(token: Self.token, [("authorization", "bearer nonsense"), ("apns-topic", Self.topic)]), body: Self.body)
            #expect(ignored.status == 200, "\(ignored.body)")
            await own.close()

            let other = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: try pki.clientTLSConfiguration(clientCertificateFor: [try BundleID("com.example.other")]))
            let refused = try await other.send(RawHTTP2Client.push(token: Self.token, [("apns-topic", Self.topic)]), body: Self.body)
            #expect(refused.status == 400)
            #expect(refused.reason == "TopicDisallowed")
            await other.close()
        }
    }

    @Test func aRevokedCertificateIsBadCertificate() async throws {
        let directory = try TemporaryDirectory("apns-pki")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let revoked = try pki.clientCertificate(for: [try BundleID(Self.bundle)])
        let valid = try pki.clientCertificate(for: [try BundleID(Self.bundle)])
        try await Self.withFixture(pki: pki, configure: { $0.ingress.revokedCertificateSerials = [revoked.serial] }) { fixture in
            let refused = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: revoked.tls)
            let answer = try await refused.send(RawHTTP2Client.push(token: Self.token, [("apns-topic", Self.topic)]), body: Self.body)
            await refused.close()
            #expect(answer.status == 403)
            #expect(answer.reason == "BadCertificate")
            let accepted = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: valid.tls)
            let ok = try await accepted.send(RawHTTP2Client.push(token: Self.token, [("apns-topic", Self.topic)]), body: Self.body)
            await accepted.close()
            #expect(ok.status == 200, "\(ok.body)")
        }
    }

    @Test func aCertificateFromAnotherCANeverCompletesTheHandshake() async throws {
        let directory = try TemporaryDirectory("apns-pki")
        defer { directory.remove() }
        let stranger = try TestPKI(in: directory)
        try await Self.withFixture { fixture in
            var tls = try stranger.clientTLSConfiguration(clientCertificateFor: [try BundleID(Self.bundle)])
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(fixture.gateway.pki.caCertificatePath))
            await #expect(throws: (any Error).self) {
                let client = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: tls)
                defer { Task { await client.close() } }
                _ = try await client.send(RawHTTP2Client.push(token: Self.token, [("apns-topic", Self.topic)]), body: Self.body)
            }
        }
    }
}
