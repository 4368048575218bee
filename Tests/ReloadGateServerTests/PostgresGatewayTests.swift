import AsyncHTTPClient
import Foundation
import Logging
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// A gateway on PostgreSQL (`store.kind: postgres`) end to end: real TLS and HTTP/2, a database of its
/// own on the test cluster, the scheduler and the outbox. The app is created through a second store handle
/// on the same database, as `reloadgate apps add` does while the server runs.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct PostgresGatewayTests {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "c3", count: 32)

    @Test func aWebhookCallIsDecidedCommittedAndDeliveredAndSurvivesARestart() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("pg-gateway")
        defer { data.remove() }
        let configure: @Sendable (inout GatewayConfiguration) -> Void = { configuration in
            configuration.usePostgres(url, dataDirectory: data.path("data"))
        }
        let requestID = try await TestGateway.withRunning(configure: configure) { gateway in
            let store = try await TestPostgres.openStore(url: url, secretsDirectory: gateway.configuration.dataDirectory)
            defer { try? store.close() }
            let credentials = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: nil, allowsExemptions: false, now: Date())
            return try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let registered = try await api.putDevice(
                    bundle: Self.bundle, token: Self.token, apiKey: credentials.apiKey,
                    widgets: [
                        ["id": "w-scores", "kind": "scores", "family": "systemSmall", "configuration": ["team": "42"]],
                        ["id": "w-news", "kind": "news", "family": "systemMedium", "configuration": [String: Any]()],
                    ]
                )
                try #require(registered.status == 200, "\(registered.body)")
                // The first reload goes at once; the second one, a minute later, waits for the minimum interval.
                let first = try await api.reload(bundle: Self.bundle, body: #"{"kind":"scores","match":{"team":"42"}}"#, secret: credentials.webhookSecret)
                let requestID = try await Self.expectDecided(first, "scheduled", in: store)
                var sent: [RecordedDelivery] = []
                _ = try await eventually {
                    sent = try await store.deliveries(in: [.sent])
                    return !sent.isEmpty
                }
                #expect(sent.map(\.requests) == [[RequestID(requestID)]])
                let outbox = try String(contentsOfFile: gateway.configuration.dataDirectory + "/outbox.jsonl", encoding: .utf8)
                #expect(outbox.contains(Self.token))

                let second = try await api.reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: credentials.webhookSecret)
                #expect((second.json["decisions"] as? [String: Int])?["deferred"] == 1, "\(second.body)")
                #expect(try await store.pendingReloads(PendingFilter()).map(\.widgetID) == ["w-scores"])
                return requestID
            }
        }
        // A second gateway on the same database and key loads the pending reload: a new call merges into it.
        try await TestGateway.withRunning(configure: configure) { gateway in
            let store = try await TestPostgres.openStore(url: url, secretsDirectory: gateway.configuration.dataDirectory)
            defer { try? store.close() }
            let app = try #require(try await store.app(bundle: try BundleID(Self.bundle)))
            let secret = try #require(try await store.webhookSecret(of: app))
            let third = try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                return try await api.reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: secret)
            }
            _ = try await Self.expectDecided(third, "merged", in: store)
            // The first call's decision, as it was before the restart.
            #expect(try await Self.decisions(of: requestID, in: store) == ["scheduled"])
        }
    }

    /// Expects a webhook call to be answered `202` and decided `kind`, and returns its request id. The answer
    /// says `kind`, or `forwarded` when the call came before the gateway held and had loaded the device's
    /// partition: its first heartbeat and load wait for the database, which a loaded machine can hold up for
    /// seconds, and after a restart a lease the stopped gateway could not release runs out first. A forwarded
    /// call waits in the partition's inbox, and the partition's owner decides it once the partition is loaded.
    static func expectDecided(_ answer: GatewayAPIClient.Answer, _ kind: String, in store: PostgresStore) async throws -> Int64 {
        #expect(answer.status == 202, "\(answer.body)")
        let decisions = try #require(answer.json["decisions"] as? [String: Int], "\(answer.body)")
        let id = Int64(try #require(answer.json["requestId"] as? Int, "\(answer.body)"))
        if decisions["forwarded"] == 1 {
            _ = try await eventually(within: .seconds(60)) { try await Self.decisions(of: id, in: store) == [kind] }
        } else {
            #expect(decisions[kind] == 1, "\(answer.body)")
        }
        #expect(try await Self.decisions(of: id, in: store) == [kind])
        return id
    }

    /// A request's recorded decisions, but for `forwarded` (the gateway that took it records that one before
    /// the owner's).
    static func decisions(of request: Int64, in store: PostgresStore) async throws -> [String] {
        (try await store.requestRecord(request)?.decisions.map(\.decision) ?? []).filter { $0 != "forwarded" }
    }
}
