import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ReloadGateStore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The dashboard's figures (`GET /v1/dashboard`) in the router tier: for all apps they are the counts
/// `GET /v1/stats` and `GET /v1/pending` give; for an app they are that app's; the page and its files are
/// served with a policy that loads nothing from elsewhere.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct DashboardRouteTests {
    @Test func theFiguresAreTheStatsAndPendingReloadsOfTheAdminAPI() async throws {
        try await RouterTier.with { tier in
            try await tier.api { client in
                let key = tier.credentials.apiKey
                #expect(try await client.registry(RouterTierTests.devicePath, .put, apiKey: key, body: RouterTierTests.twoWidgets).status == .ok)
                // scores: scheduled now; news: scheduled, then a second call merges or defers.
                for body in [#"{"kind":"scores"}"#, #"{"kind":"news","priority":5}"#, #"{"kind":"news"}"#, #"{"kind":"weather"}"#] {
                    let answer = try await client.webhook(RouterTier.bundle, body: body, secret: tier.credentials.webhookSecret)
                    #expect(answer.status == .accepted, "\(answer.text)")
                }
            }
            try await tier.admin { client in
                // Compared once the deliveries released have reached the outbox (nothing moves meanwhile).
                var stats: [String: Any] = [:]
                _ = try await eventually(every: .milliseconds(50)) {
                    stats = try await client.call("/v1/stats", .get).json
                    return stats["deliveryQueue"] as? Int == 0
                }
                let pending = try await client.call("/v1/pending", .get).json
                let all = try await client.call("/v1/dashboard", .get)
                #expect(all.status == .ok, "\(all.text)")
                let figures = all.json
                #expect(figures["decisions"] as? [String: Int] == stats["decisions"] as? [String: Int])
                #expect(figures["deliveries"] as? [String: Int] == stats["deliveries"] as? [String: Int])
                #expect(figures["pendingReloads"] as? Int == stats["pendingReloads"] as? Int)
                let listed = (pending["pending"] as? [[String: Any]] ?? []).compactMap { $0["instance"] as? Int }
                #expect((figures["pending"] as? [[String: Any]] ?? []).compactMap { $0["instance"] as? Int } == listed)
                // Every decision made now is in the current hour's bucket.
                let hours = try #require(figures["decisionsByHour"] as? [[String: Any]])
                #expect(hours.count == 24)
                let thisHour = hours.last?["decisions"] as? [String: Int] ?? [:]
                #expect(thisHour.values.reduce(0, +) == (figures["decisions"] as? [String: Int] ?? [:]).values.reduce(0, +))
                #expect((figures["decisions"] as? [String: Int])?["no-match"] == 1)
                let budgets = try #require(figures["budgets"] as? [String: Any])
                #expect((budgets["policies"] as? [[String: Any]])?.compactMap { $0["instances"] as? Int }.reduce(0, +) == 2)
                #expect(figures["bundles"] as? [String] == [RouterTier.bundle])

                // Another app's view: nothing.
                let other = try await client.call("/v1/dashboard?bundle=com.example.other", .get).json
                #expect(other["pendingReloads"] as? Int == 0)
                #expect((other["decisions"] as? [String: Int])?.values.reduce(0, +) == 0)
                #expect(try await client.call("/v1/dashboard?bundle=not%20a%20bundle", .get).status == .unprocessableContent)

                for (path, type) in [("/dashboard", "text/html"), ("/dashboard/app.js", "text/javascript"), ("/dashboard/app.css", "text/css")] {
                    let asset = try await client.call(path, .get)
                    #expect(asset.status == .ok)
                    #expect(asset.headers[.contentType]?.hasPrefix(type) == true)
                    #expect(asset.headers[HTTPField.Name("content-security-policy")!]?.contains("default-src 'self'") == true)
                }
            }
        }
    }
}
