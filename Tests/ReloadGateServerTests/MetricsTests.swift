import Foundation
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateTesting
import Testing

/// `/metrics` after known traffic: the counters say what the test did.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct MetricsTests {
    @Test func metricsCountRequestsDecisionsAnswersAndDeliveries() async throws {
        // One budget token and no minimum interval: the second webhook call waits for budget.
        try await WebhookEndToEndTests.withFixture(configure: { configuration in
            configuration.scheduling.defaultPolicy.burst = 1
            configuration.scheduling.defaultPolicy.minimumInterval = 0
        }) { fixture in
            for _ in 0..<3 {
                #expect(try await fixture.reload(#"{"kind":"scores"}"#).status == 202)
            }
            let badSignature = try await fixture.api.reload(bundle: WebhookEndToEndTests.bundle, body: #"{"kind":"scores"}"#, secret: "wrong")
            #expect(badSignature.status == 401)
            #expect(try await fixture.api.send(.GET, "/v1/nothing-here").status == 404)
            _ = try await fixture.waitForOutbox(lines: 1)

            // A push with a token of an unknown key: 403 InvalidProviderToken from the APNs listener.
            let client = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: try fixture.gateway.pki.clientTLSConfiguration())
            let refused = try await client.send(
                RawHTTP2Client.push(token: WebhookEndToEndTests.token, [
                    ("authorization", "bearer \(ProviderTokenFactory(keyID: "UNKNOWN001").token())"),
                    ("apns-topic", WebhookEndToEndTests.bundle + ".push-type.widgets"), ("apns-push-type", "widgets"),
                ]),
                body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
            )
            await client.close()
            #expect(refused.status == 403)

            var series = PrometheusText("")
            for _ in 0..<100 {
                let scraped = try await fixture.api.send(.GET, "/metrics")
                #expect(scraped.status == 200)
                series = PrometheusText(scraped.body)
                if series[#"reloadgate_deliveries_total{outcome="sent"}"#] == 1 { break }
                try await Task.sleep(for: .milliseconds(25))
            }
            let reloads = "/v1/apps/{bundle}/reloads"
            #expect(series[#"reloadgate_http_requests_total{route="\#(reloads)",method="POST",status="202"}"#] == 3)
            #expect(series[#"reloadgate_http_requests_total{route="\#(reloads)",method="POST",status="401"}"#] == 1)
            #expect(series[#"reloadgate_http_requests_total{route="/v1/apps/{bundle}/devices/{token}",method="PUT",status="200"}"#] == 1)
            #expect(series[#"reloadgate_http_requests_total{route="NotFound",method="GET",status="404"}"#] == 1)
            #expect(series[#"reloadgate_decisions_total{kind="scheduled"}"#] == 1)
            #expect(series[#"reloadgate_decisions_total{kind="deferred"}"#] == 1)
            #expect(series[#"reloadgate_decisions_total{kind="merged"}"#] == 1)
            #expect(series["reloadgate_budget_exhausted_total"] == 1)
            #expect(series["reloadgate_pending_reloads"] == 1)
            #expect((series["reloadgate_store_commit_seconds_count"] ?? 0) >= 1)
            // A turn is counted when it seals a commit, the commit when it has ended: never fewer turns.
            #expect((series["reloadgate_commit_turn_seconds_count"] ?? 0) >= (series["reloadgate_store_commit_seconds_count"] ?? 0))
            #expect(series[#"reloadgate_apns_answers_total{status="403",reason="InvalidProviderToken"}"#] == 1)
            #expect(series[#"reloadgate_deliveries_total{outcome="sent"}"#] == 1)
            #expect(series[#"reloadgate_delivery_attempts_total{outcome="sent",reason=""}"#] == 1)
            #expect(series["reloadgate_delivery_queue_depth"] == 0)
        }
    }

    /// Every metric family has a `# HELP` line that says what it counts, before its `# TYPE` line: on a
    /// fresh gateway and after traffic (families appear with their first sample).
    @Test func everyMetricHasItsHelpLine() async throws {
        try await WebhookEndToEndTests.withFixture { fixture in
            let fresh = try await fixture.api.send(.GET, "/metrics").body
            Self.expectHelpLines(fresh, atLeast: 5)
            #expect(try await fixture.reload(#"{"kind":"scores"}"#).status == 202)
            _ = try await fixture.waitForOutbox(lines: 1)
            let client = try await RawHTTP2Client.connect(port: fixture.gateway.ingressPort, tls: try fixture.gateway.pki.clientTLSConfiguration())
            _ = try await client.send(RawHTTP2Client.push(token: WebhookEndToEndTests.token, [("apns-topic", WebhookEndToEndTests.bundle + ".push-type.widgets")]))
            await client.close()
            // The delivery's families appear once its state is written, after its outbox line: looked at
            // again until they do (10 s at most).
            var text = ""
            for _ in 0..<100 {
                text = try await fixture.api.send(.GET, "/metrics").body
                if Self.families(text).count >= 9 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            Self.expectHelpLines(text, atLeast: 9)
        }
    }

    /// The metric families named by `# TYPE` lines.
    static func families(_ text: String) -> [Substring] {
        text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
    }

    static func expectHelpLines(_ text: String, atLeast count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let lines = text.split(separator: "\n").map(String.init)
        let types = families(text)
        #expect(types.count >= count, "\(text)", sourceLocation: sourceLocation)
        for name in types {
            let help = lines.firstIndex { $0.hasPrefix("# HELP \(name) ") }
            let type = lines.firstIndex { $0.hasPrefix("# TYPE \(name) ") }
            #expect(help != nil && help! < type!, "\(name) has no # HELP line before its # TYPE", sourceLocation: sourceLocation)
            if let help { #expect(lines[help].count > "# HELP \(name) ".count + 10, "\(lines[help])", sourceLocation: sourceLocation) }
        }
    }
}
