import Foundation
import ReloadGateCore
import ReloadGateMockAPNs
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Live Activities on three gateways sharing PostgreSQL (issue 45): the updates of one activity pushed
/// through all three, in shuffled order, are decided by the gateway that owns the activity's partition, and
/// reach Apple's mock newest-last, never older after newer.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct LiveActivitiesClusterTests {
    static let bundle = "com.example.adventure"

    static func update(_ timestamp: Int64) -> [UInt8] {
        Array(#"{"aps":{"timestamp":\#(timestamp),"event":"update","content-state":{"step":\#(timestamp)}}}"#.utf8)
    }

    @Test func updatesThroughThreeGatewaysInShuffledOrderReachAppleNewestLast() async throws {
        let directory = try TemporaryDirectory("la-cluster-mock")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey_LACLUSTER1.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "LACLUSTER1", teamID: "LACLTEAM01")
        defer { Task { await mock.stop() } }
        let upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
        let sender = ProviderTokenFactory(keyID: "LASENDER03", teamID: "LASENDTEAM")
        // No interval between two deliveries: most updates leave on their own, so an older one decided
        // after a newer one was delivered would reach the mock unless it is dropped.
        try await TestGateway.withSeveralOnPostgres("la-cluster", count: 3, configure: { configuration in
            configuration.upstream = upstream
            configuration.scheduling[.liveactivity].defaultPolicy.minimumInterval = 0
        }, prepare: { store in
            try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: [])
        }) { gateways, store, credentials in
            // Several activities, so that some are owned by each gateway and every one is pushed through
            // gateways that do not own it.
            let activities = (0..<6).map { index in String(repeating: String(format: "%02x", 0xb0 + index), count: 32) }
            try await gateways[0].withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateways[0].baseURL)
                for token in activities {
                    let answer = try await NonOwnerRequestTests.retryingRefusals(\.status) {
                        try await api.putActivity(bundle: Self.bundle, token: token, apiKey: credentials.apiKey, attributesType: "AdventureAttributes")
                    }
                    #expect(answer.status == 200, "\(answer.body)")
                }
            }
            let base = Int64(Date().timeIntervalSince1970)
            var forwarded = 0
            for token in activities {
                // Twelve updates, sent in a shuffled order, each through the next gateway in turn.
                for (index, offset) in (0..<12).shuffled().enumerated() {
                    let gateway = gateways[index % gateways.count]
                    let answer = try await NonOwnerRequestTests.retryingRefusals(\.status) {
                        try await gateway.push(token, bundle: Self.bundle, sender: sender, pushType: .liveactivity, body: Self.update(base + Int64(offset)))
                    }
                    #expect(answer.status == 200, "\(answer.body)")
                    if answer.decision == "forwarded" { forwarded += 1 }
                }
            }
            #expect(forwarded > 0, "no update reached a gateway that does not own its activity")
            // Each activity ends with its newest update delivered; what reached the mock per activity went
            // only forward in time.
            func delivered(_ token: String) -> [Int64] {
                mock.received.filter { $0.deviceToken == token && $0.headers["apns-push-type"] == "liveactivity" }.compactMap {
                    MockAPNsServer.activityTimestamp($0.body)
                }
            }
            let done = try await eventually(within: .seconds(60), every: .milliseconds(200)) {
                activities.allSatisfy { delivered($0).last == base + 11 }
            }
            #expect(done, "\(activities.map { delivered($0) })")
            for token in activities {
                let timestamps = delivered(token)
                #expect(timestamps == timestamps.sorted(), "\(token.prefix(8)): \(timestamps)")
                #expect(Set(timestamps).count == timestamps.count, "\(token.prefix(8)) got one content twice: \(timestamps)")
            }
            #expect(mock.timestampsWentBack.isEmpty)
            // Every update was decided by an owner, once: scheduled, deferred, merged or outdated.
            let decided = try await store.ledgerCounts()
            #expect(decided.requests >= 72)
        }
    }
}
