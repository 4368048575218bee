import AsyncHTTPClient
import Foundation
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Live freshness through a running gateway (the outbox takes deliveries): pushes decided, delivered,
/// deferred and expired come out of `reloadgate freshness` and `/metrics` with the numbers worked out by
/// hand from the configured rules.
@Suite(.heavy)
struct FreshnessGatewayTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let bundle = "com.example.fresh"
    static let device = String(repeating: "f1", count: 32)

    static func push(_ kind: String, on client: RawHTTP2Client, sender: ProviderTokenFactory, expiration: String? = nil) async throws -> RawHTTP2Client.Answer {
        var headers = [("authorization", "bearer \(sender.token())"), ("apns-topic", "\(bundle).push-type.widgets"), ("apns-push-type", "widgets")]
        if let expiration { headers.append(("apns-expiration", expiration)) }
        return try await client.send(
            RawHTTP2Client.push(token: device, headers),
            body: Array(#"{"aps":{"content-changed":true},"reloadgate":{"kind":"\#(kind)"}}"#.utf8)
        )
    }

    /// `scores` wants half its requests within 5 s, with 10 s between two reloads; `news` has the widgets'
    /// default objective, 90% within 10 minutes. Coalescing is off, so that a reload never rides along.
    ///
    /// - scores 1: scheduled, taken by the outbox at once: within (a wait under 1 s, or a few seconds on a
    ///   machine loaded by the rest of the tests: the objective leaves room for that).
    /// - scores 2, right after: deferred by the interval to 10 s after the first:
    ///   served up to 10 s after its arrival (less the time between the two pushes, under 5 s), over
    ///   5 s: a miss of `interval`.
    /// - scores 3 with `apns-expiration: 0` while 2 waits: it cannot go now, so it expired: a miss of
    ///   `expired`, never served.
    /// - news 1: scheduled, within.
    ///
    /// scores: 3 requests, 2 served, 1 within, a share of 1/3 below 0.5 (not met); misses interval 1,
    /// expired 1; p50 (rank 1 of 2 served) in scores 1's bucket, up to 1 s or 5 s; p90 (rank 2) the longest wait,
    /// scores 2's. news: 1 of 1 within, met.
    @Test func pushesComeOutWithTheirWaitsAndMissesByCause() async throws {
        let directory = try TemporaryDirectory("freshness")
        defer { directory.remove() }
        let sender = ProviderTokenFactory(keyID: "FRESHKEY01", teamID: "FRESHTEAM1")
        let credentials = try await sender.createApp(bundle: Self.bundle, inStoreAt: directory.path("data"))
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let widgets = [
                WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration()),
                WidgetRegistration(id: "w2", kind: "news", family: .systemMedium, configuration: WidgetConfiguration()),
            ]
            _ = try await store.putDevice(app: credentials.app, token: try DeviceToken(Self.device), widgets: widgets, previousToken: nil, now: Date())
        }
        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.scheduling[.widgets].defaultPolicy.coalescingWindow = 0
            configuration.scheduling[.widgets].kindOverrides["scores"] = ["minimumInterval": "10", "freshness.quantile": "0.5", "freshness.within": "5s"]
        }) { gateway in
            let socket = gateway.configuration.adminSocketPath
            // Connected first (a connection per push), so that the pushes follow each other closely.
            var clients: [RawHTTP2Client] = []
            for _ in 0..<4 { clients.append(try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())) }
            #expect(try await Self.push("scores", on: clients[0], sender: sender).header("reloadgate-decision") == "scheduled")
            #expect(try await Self.push("scores", on: clients[1], sender: sender).header("reloadgate-decision") == "deferred")
            #expect(try await Self.push("scores", on: clients[2], sender: sender, expiration: "0").header("reloadgate-decision") == "expired")
            #expect(try await Self.push("news", on: clients[3], sender: sender).header("reloadgate-decision") == "scheduled")
            for client in clients { await client.close() }

            // The gateway's own service applies what happened (nothing asks it to): the deferred push's
            // miss reaches /metrics once its delivery went, 10 s after the first.
            let labels = #"bundle="\#(Self.bundle)",kind="scores""#
            _ = try await eventually(every: .milliseconds(250)) {
                let metrics = try await gateway.withHTTPClient { client in
                    try await GatewayAPIClient(client: client, baseURL: gateway.baseURL).send(.GET, "/metrics").body
                }
                return metrics.contains(#"reloadgate_freshness_misses_total{\#(labels),cause="interval"} 1"#)
            }

            var answer: AdminAPI.Freshness?
            _ = try await eventually(every: .milliseconds(500)) {
                let result = try await ReloadGateProcess.run(["freshness", "--json", "--socket", socket], in: Self.root)
                try #require(result.status == 0, "\(result.stderr)")
                answer = try JSONDecoder().decode(AdminAPI.Freshness.self, from: Data(result.stdout.utf8))
                return answer?.kinds.first { $0.kind == "scores" }?.hour.served == 2
            }
            let kinds = try #require(answer?.kinds)
            #expect(kinds.map { "\($0.bundle) \($0.kind)" } == ["\(Self.bundle) news", "\(Self.bundle) scores"])
            let news = kinds[0]
            let scores = kinds[1]
            #expect(news.objectiveQuantile == 0.9 && news.objectiveWithin == 600_000)
            #expect(news.hour.requests == 1 && news.hour.within == 1 && news.hour.met == true && news.hour.misses.isEmpty)
            #expect(scores.objectiveQuantile == 0.5 && scores.objectiveWithin == 5000)
            #expect(scores.hour.requests == 3)
            #expect(scores.hour.served == 2)
            #expect(scores.hour.within == 1)
            #expect(scores.hour.share == 1.0 / 3)
            #expect(scores.hour.met == false)
            #expect(scores.hour.misses.map { "\($0.cause) \($0.count)" } == ["expired 1", "interval 1"])
            #expect([1000, 5000].contains(scores.hour.p50), "\(scores.hour)")
            // Scores 2 goes 10 s after the first reload: it waited that less the time between the two pushes,
            // past the objective's 5 s (it is a miss) and at most about 10 s.
            #expect((5001...10_500).contains(scores.hour.p90 ?? 0), "\(scores.hour)")
            #expect(scores.day == scores.hour)
            #expect(scores.hourlyRequests.count == 24 && scores.hourlyRequests.last == 3 && scores.hourlyRequests.dropLast().allSatisfy { $0 == 0 })
            #expect(scores.hourlyWithin.last == 1)

            // The filters, and the text.
            let filtered = try await ReloadGateProcess.run(["freshness", "--kind", "news", "--json", "--socket", socket], in: Self.root)
            let onlyNews = try JSONDecoder().decode(AdminAPI.Freshness.self, from: Data(filtered.stdout.utf8))
            #expect(onlyNews.kinds.map(\.kind) == ["news"])
            let text = try await ReloadGateProcess.run(["freshness", "--socket", socket], in: Self.root)
            #expect(text.status == 0)
            let row = text.stdout.split(separator: "\n").first { $0.contains(" scores ") }?.split(separator: " ").map(String.init)
            #expect(row.map { Array($0.prefix(10)) } == [Self.bundle, "scores", "50%", "in", "5s", "1h", "3", "1", "(33.3%)", "no"], "\(text.stdout)")
            #expect(row.map { $0.count > 10 && ["≤1s", "≤5s"].contains($0[10]) } == true, "\(text.stdout)")
            #expect(text.stdout.contains("expired 1, interval 1"), "\(text.stdout)")
            let stats = try await ReloadGateProcess.run(["stats", "--socket", socket], in: Self.root)
            #expect(
                stats.stdout.contains("freshness:        1 of 2 app kinds met their objective in the last hour; below: \(Self.bundle) scores 33.3% (objective 50% in 5s)"),
                "\(stats.stdout)"
            )
            let refused = try await ReloadGateProcess.run(["freshness", "--bundle", "a..b", "--socket", socket], in: Self.root)
            #expect(refused.status != 0)

            // The metrics: the waits' histogram (its buckets include the objective's 5 s) and the misses.
            let metrics = try await gateway.withHTTPClient { client in
                try await GatewayAPIClient(client: client, baseURL: gateway.baseURL).send(.GET, "/metrics").body
            }
            #expect(metrics.contains("reloadgate_freshness_wait_seconds_count{\(labels)} 2"), "\(metrics)")
            #expect(metrics.contains(#"reloadgate_freshness_wait_seconds_bucket{\#(labels),le="5.0"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"reloadgate_freshness_misses_total{\#(labels),cause="interval"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"reloadgate_freshness_misses_total{\#(labels),cause="expired"} 1"#), "\(metrics)")
        }
    }
}
