import AsyncHTTPClient
import Foundation
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The reload webhook end to end: real TLS and HTTP/2, the SQLite file, the scheduler service and the
/// outbox. An app is created by a second store handle on the data directory, as `reloadgate apps add`
/// does while the server runs.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct WebhookEndToEndTests {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "a1", count: 32)

    /// A running gateway with one app and one device showing `scores` {"team":"42"} and `news` {}.
    struct Fixture {
        let gateway: TestGateway
        let api: GatewayAPIClient
        let store: SQLiteStore
        let credentials: AppCredentials

        var secret: String { credentials.webhookSecret }
        var outboxPath: String { gateway.configuration.dataDirectory + "/outbox.jsonl" }

        /// The outbox's lines, parsed.
        func outbox() throws -> [[String: Any]] {
            guard let text = try? String(contentsOfFile: outboxPath, encoding: .utf8) else { return [] }
            return try text.split(separator: "\n").map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
            }
        }

        /// Waits until the outbox holds `count` lines (at most 10 s) and returns them.
        func waitForOutbox(lines count: Int) async throws -> [[String: Any]] {
            for _ in 0..<400 {
                let lines = try outbox()
                if lines.count >= count { return lines }
                try await Task.sleep(for: .milliseconds(25))
            }
            return try outbox()
        }

        func reload(_ body: String, idempotencyKey: String? = nil) async throws -> GatewayAPIClient.Answer {
            try await api.reload(bundle: WebhookEndToEndTests.bundle, body: body, secret: secret, idempotencyKey: idempotencyKey)
        }
    }

    static func withFixture(
        allowExemptions: Bool = false,
        configure: @escaping @Sendable (inout GatewayConfiguration) -> Void = { _ in },
        _ body: @Sendable (Fixture) async throws -> Void
    ) async throws {
        try await TestGateway.withRunning(configure: configure) { gateway in
            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            let credentials = try await store.createApp(bundle: try BundleID(bundle), allowsExemptions: allowExemptions, now: Date())
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let registered = try await api.putDevice(
                    bundle: bundle,
                    token: token,
                    apiKey: credentials.apiKey,
                    widgets: [
                        ["id": "w-scores", "kind": "scores", "family": "systemSmall", "configuration": ["team": "42"]],
                        ["id": "w-news", "kind": "news", "family": "systemMedium", "configuration": [String: Any]()],
                    ]
                )
                try #require(registered.status == 200, "\(registered.body)")
                try await body(Fixture(gateway: gateway, api: api, store: store, credentials: credentials))
            }
        }
    }

    @Test func aWebhookForAKindAndConfigurationLandsInTheOutbox() async throws {
        try await Self.withFixture { fixture in
            // The scores widget reports a timeline: four hourly entries, reload at the end (3 h away).
            let now = Date()
            let timeline = try await fixture.api.putTimeline(
                bundle: Self.bundle,
                token: Self.token,
                widget: "w-scores",
                apiKey: fixture.credentials.apiKey,
                entries: (0..<4).map { now.addingTimeInterval(Double($0) * 3600) },
                policy: "atEnd"
            )
            #expect(timeline.status == 200, "\(timeline.body)")

            let answer = try await fixture.reload(#"{"kind":"scores","match":{"team":"42"}}"#)
            #expect(answer.status == 202, "\(answer.body)")
            let decisions = try #require(answer.json["decisions"] as? [String: Int])
            #expect(decisions["scheduled"] == 1)
            #expect(answer.json["targets"] as? Int == 1)
            let requestID = try #require(answer.json["requestId"] as? Int)

            let lines = try await fixture.waitForOutbox(lines: 1)
            try #require(lines.count == 1)
            #expect(lines[0]["deviceToken"] as? String == Self.token)
            #expect(lines[0]["bundle"] as? String == Self.bundle)
            #expect(lines[0]["topic"] as? String == "\(Self.bundle).push-type.widgets")
            #expect(lines[0]["widgets"] as? [String] == ["w-scores"])
            #expect(lines[0]["requests"] as? [Int] == [requestID])
            #expect(lines[0]["priority"] as? Int == 10)

            // The delivery's way through the store ends in `sent`.
            var sent: [RecordedDelivery] = []
            _ = try await eventually {
                sent = try await fixture.store.deliveries(in: [.sent])
                return !sent.isEmpty
            }
            #expect(sent.map(\.requests) == [[RequestID(requestID)]])
        }
    }

    @Test func aConfigurationThatNoWidgetShowsIsNoMatchAndSendsNothing() async throws {
        try await Self.withFixture { fixture in
            let answer = try await fixture.reload(#"{"kind":"scores","match":{"team":"7"}}"#)
            #expect(answer.status == 202, "\(answer.body)")
            #expect((answer.json["decisions"] as? [String: Int])?["no-match"] == 1)
            #expect(answer.json["targets"] as? Int == 0)
            // The number 42 is not the string "42".
            let number = try await fixture.reload(#"{"kind":"scores","match":{"team":42}}"#)
            #expect((number.json["decisions"] as? [String: Int])?["no-match"] == 1)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try fixture.outbox().isEmpty)
        }
    }

    /// The instances a target selects are kept between calls (``RegistryCache``) only while the registry
    /// does not change: each registration, removal and new device is seen by the next call.
    @Test func aTargetSelectsWhatTheRegistryHoldsAtEachCall() async throws {
        try await Self.withFixture { fixture in
            func targets(_ body: String) async throws -> Int? {
                let answer = try await fixture.reload(body)
                #expect(answer.status == 202, "\(answer.body)")
                return answer.json["targets"] as? Int
            }
            let team42 = #"{"kind":"scores","match":{"team":"42"}}"#
            let team7 = #"{"kind":"scores","match":{"team":"7"}}"#
            let listed = #"{"devices":["\#(Self.token)"],"kind":"scores"}"#
            // Twice each: the second answer comes from what the first kept.
            for _ in 0..<2 {
                #expect(try await targets(team42) == 1)
                #expect(try await targets(team7) == 0)
                #expect(try await targets(listed) == 1)
            }

            // The device registers again: its scores widget now shows team 7, and it has no news widget.
            let apiKey = fixture.credentials.apiKey
            let changed = try await fixture.api.putDevice(
                bundle: Self.bundle, token: Self.token, apiKey: apiKey,
                widgets: [["id": "w-scores", "kind": "scores", "family": "systemSmall", "configuration": ["team": "7"]]]
            )
            try #require(changed.status == 200, "\(changed.body)")
            #expect(try await targets(team42) == 0)
            #expect(try await targets(team7) == 1)
            #expect(try await targets(#"{"kind":"news"}"#) == 0)

            // A second device with a news widget.
            let other = String(repeating: "b2", count: 32)
            let added = try await fixture.api.putDevice(
                bundle: Self.bundle, token: other, apiKey: apiKey,
                widgets: [["id": "w-news", "kind": "news", "family": "systemMedium", "configuration": [String: Any]()]]
            )
            try #require(added.status == 200, "\(added.body)")
            #expect(try await targets(#"{"kind":"news"}"#) == 1)

            // The first device is removed: nothing of it is targeted any more.
            let removed = try await fixture.api.send(
                .DELETE, "/v1/apps/\(Self.bundle)/devices/\(Self.token)", headers: ["authorization": "bearer \(apiKey)"]
            )
            try #require((200..<300).contains(removed.status), "\(removed.body)")
            #expect(try await targets(team7) == 0)
            #expect(try await targets(listed) == 0)
            #expect(try await targets(#"{"kind":"news"}"#) == 1)
        }
    }

    @Test func aTimelineReloadAboutToHappenAbsorbsTheWebhook() async throws {
        try await Self.withFixture { fixture in
            let inTwoMinutes = Date().addingTimeInterval(120)
            let timeline = try await fixture.api.putTimeline(
                bundle: Self.bundle,
                token: Self.token,
                widget: "w-news",
                apiKey: fixture.credentials.apiKey,
                entries: [Date()],
                policy: ["after": inTwoMinutes.timeIntervalSince1970]
            )
            #expect(timeline.status == 200, "\(timeline.body)")
            // No kind: every widget of the app. News is absorbed, scores goes now.
            let answer = try await fixture.reload("{}")
            #expect(answer.status == 202, "\(answer.body)")
            let decisions = try #require(answer.json["decisions"] as? [String: Int])
            #expect(decisions["absorbed"] == 1)
            #expect(decisions["scheduled"] == 1)
            let lines = try await fixture.waitForOutbox(lines: 1)
            #expect(lines.first?["widgets"] as? [String] == ["w-scores"])
        }
    }

    @Test func refusedCallsGetTheirAnswerAndLeaveTheStoreUnchanged() async throws {
        try await Self.withFixture { fixture in
            let body = #"{"kind":"scores"}"#
            let first = try await fixture.reload(body, idempotencyKey: "change-1")
            #expect(first.status == 202, "\(first.body)")
            _ = try await fixture.waitForOutbox(lines: 1)
            // Let the delivery reach `sent` so that nothing moves while the refusals are checked.
            _ = try await eventually { try await fixture.store.deliveries(in: [.pending, .sending]).isEmpty }
            let before = try await fixture.store.ledgerCounts()
            let outboxBefore = try fixture.outbox().count

            let badSignature = try await fixture.api.reload(
                bundle: Self.bundle,
                body: body,
                secret: "not-the-secret"
            )
            #expect(badSignature.status == 401)
            #expect(badSignature.json["code"] as? String == "signature-mismatch")

            let stale = try await fixture.api.reload(
                bundle: Self.bundle,
                body: body,
                secret: fixture.secret,
                timestamp: Int64(Date().timeIntervalSince1970) - 600
            )
            #expect(stale.status == 401)
            #expect(stale.json["code"] as? String == "signature-stale")

            let missing = try await fixture.api.send(.POST, "/v1/apps/\(Self.bundle)/reloads", body: Data(body.utf8))
            #expect(missing.status == 401)
            #expect(missing.json["code"] as? String == "signature-missing")

            let replayed = try await fixture.reload(body, idempotencyKey: "change-1")
            #expect(replayed.status == 202)
            #expect(replayed.body == first.body)
            #expect(replayed.header("idempotent-replayed") == "true")

            let conflict = try await fixture.reload(#"{"kind":"news"}"#, idempotencyKey: "change-1")
            #expect(conflict.status == 409)
            #expect(conflict.json["code"] as? String == "idempotency-conflict")

            let unknownField = try await fixture.reload(#"{"kinds":"scores"}"#)
            #expect(unknownField.status == 422)
            #expect((unknownField.json["message"] as? String)?.contains("unknown field 'kinds'") == true)

            let badPriority = try await fixture.reload(#"{"priority":7}"#)
            #expect(badPriority.status == 422)

            let exempt = try await fixture.reload(#"{"exempt":"appIntent"}"#)
            #expect(exempt.status == 403)
            #expect(exempt.json["code"] as? String == "exemption-not-allowed")

            let notJSON = try await fixture.reload("scores please")
            #expect(notJSON.status == 400)

            let unknownApp = try await fixture.api.reload(bundle: "com.example.other", body: body, secret: fixture.secret)
            #expect(unknownApp.status == 404)

            try await Task.sleep(for: .milliseconds(300))
            #expect(try await fixture.store.ledgerCounts() == before)
            #expect(try fixture.outbox().count == outboxBefore)
        }
    }

    @Test func manyConcurrentCallsAreEachCommittedOnce() async throws {
        try await Self.withFixture { fixture in
            let count = 200
            let ids = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<count {
                    group.addTask {
                        let answer = try await fixture.reload(#"{"kind":"news","priority":5}"#, idempotencyKey: "burst-\(index)")
                        try #require(answer.status == 202, "\(answer.body)")
                        return try #require(answer.json["requestId"] as? Int)
                    }
                }
                return try await group.reduce(into: Set<Int>()) { $0.insert($1) }
            }
            #expect(ids.count == count)
            let counts = try await fixture.store.ledgerCounts()
            #expect(counts.requests == count)
            #expect(counts.idempotencyKeys == count)
            // One pending reload for the news widget serves all of them (priority 5 waits 5 minutes).
            #expect(counts.pendingReloads == 1)
        }
    }

    @Test func aCallWithTheSameKeyWhileTheFirstIsInFlightGetsTheFirstAnswer() async throws {
        try await Self.withFixture { fixture in
            let body = #"{"kind":"news","priority":5}"#
            let answers = try await withThrowingTaskGroup(of: GatewayAPIClient.Answer.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await fixture.reload(body, idempotencyKey: "same") }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == 202 })
            #expect(Set(answers.map(\.body)).count == 1)
            #expect(answers.filter { $0.header("idempotent-replayed") == nil }.count == 1)
            #expect(try await fixture.store.ledgerCounts().requests == 1)
        }
    }

    @Test func exemptionsNeedAnAppAllowedToClaimThem() async throws {
        try await Self.withFixture(allowExemptions: true) { fixture in
            let answer = try await fixture.reload(#"{"kind":"scores","exempt":"appIntent"}"#)
            #expect(answer.status == 202, "\(answer.body)")
            let bad = try await fixture.reload(#"{"kind":"scores","exempt":"boredom"}"#)
            #expect(bad.status == 422)
        }
    }
}
