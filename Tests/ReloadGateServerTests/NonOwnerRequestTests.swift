import AsyncHTTPClient
import Foundation
import Logging
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Two gateways on one database, each scheduling half of the devices: a request taken by the gateway
/// that does not schedule its device comes out as if the owner had taken it. A push for a device nobody
/// has seen yet is the hard case: the gateway that takes it adopts the device, and the owner must know it
/// before it decides the forwarded push (it used to decide `no-match` and send nothing).
@Suite(.timeLimit(.minutes(5)), .enabled(if: TestPostgres.isEnabled))
struct NonOwnerRequestTests {
    static let bundle = "com.example.scores"

    @Test func pushesForUnknownDevicesAndWebhookCallsThroughEitherGatewayAreDecidedByTheOwner() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("non-owner")
        defer { data.remove() }
        let sender = ProviderTokenFactory(keyID: "NONOWNER01", teamID: "NONOWNTEAM")
        let store = try await PostgresStore(
            location: try PostgresLocation(url: url), secretsDirectory: data.path("a"),
            environment: .sandbox, now: Date(), logger: Logger(label: "test")
        )
        defer { try? store.close() }
        let credentials = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: sender.teamID, allowsExemptions: false, now: Date())
        try await store.addProviderKey(
            StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
        )
        // Both gateways need the database's secrets.key: the second data directory gets a copy.
        try FileManager.default.createDirectory(atPath: data.path("b"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: data.path("a/secrets.key"), toPath: data.path("b/secrets.key"))
        @Sendable func configure(_ directory: String) -> @Sendable (inout GatewayConfiguration) -> Void {
            { configuration in
                configuration.store.kind = .postgres
                configuration.store.url = url
                configuration.dataDirectory = directory
            }
        }
        try await TestGateway.withRunning(configure: configure(data.path("a"))) { first in
            try await TestGateway.withRunning(configure: configure(data.path("b"))) { second in
                // The first gateway held every partition; it hands half to the second within two beats.
                var shares: [Int] = []
                for _ in 0..<300 where !(shares.count == 2 && shares.allSatisfy { $0 > 0 } && shares.reduce(0, +) == 1024) {
                    shares = try await store.clusterGateways(within: 10_000).map(\.partitions)
                    try await Task.sleep(for: .milliseconds(100))
                }
                try #require(shares.count == 2 && shares.allSatisfy { $0 > 0 }, "the partitions were not shared: \(shares)")

                // Unknown devices pushed through each gateway: about half of them are another's to schedule.
                var accepted: [(apnsID: String, decision: String?)] = []
                for gateway in [first, second] {
                    for _ in 0..<16 {
                        let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
                        let apnsID = UUID().uuidString.lowercased()
                        let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
                        let answer = try await client.send(
                            RawHTTP2Client.push(token: token, [
                                ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(Self.bundle).push-type.widgets"),
                                ("apns-push-type", "widgets"), ("apns-id", apnsID),
                            ]),
                            body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
                        )
                        await client.close()
                        #expect(answer.status == 200, "\(answer.body)")
                        accepted.append((apnsID, answer.header("reloadgate-decision")))
                    }
                }
                #expect(accepted.contains { $0.decision == "forwarded" }, "no push reached a gateway that does not own its device")

                // A webhook call through each gateway reaches every device, whoever schedules it.
                try await second.withHTTPClient { client in
                    let api = GatewayAPIClient(client: client, baseURL: second.baseURL)
                    let call = try await api.reload(bundle: Self.bundle, body: #"{"priority":5}"#, secret: credentials.webhookSecret)
                    #expect(call.status == 202, "\(call.body)")
                }

                // Every push ends in the owner's `scheduled` decision; none in `no-match`.
                var outcomes: [String: [String]] = [:]
                for _ in 0..<200 {
                    outcomes = [:]
                    for push in accepted {
                        for id in try await store.requests(apnsID: push.apnsID) {
                            outcomes[push.apnsID, default: []] += try await store.requestRecord(id)?.decisions.map(\.decision) ?? []
                        }
                    }
                    if accepted.allSatisfy({ outcomes[$0.apnsID]?.contains("scheduled") == true }) { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                for push in accepted {
                    #expect(outcomes[push.apnsID]?.contains("scheduled") == true, "\(push.apnsID): \(outcomes[push.apnsID] ?? [])")
                    #expect(outcomes[push.apnsID]?.contains("no-match") != true, "\(push.apnsID): \(outcomes[push.apnsID] ?? [])")
                }
                // The webhook call found all 32 adopted devices (merged into their pending reloads).
                let pending = try await store.pendingReloads(PendingFilter())
                #expect(pending.count == 32, "\(pending.count) pending reloads")
            }
        }
    }
}
