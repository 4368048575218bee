import Foundation
import ReloadGateCore
import ReloadGateMockAPNs
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// A gateway hands partitions back to a newcomer while pushes of those partitions are out at Apple. The
/// newcomer loads the deliveries their last owner left unfinished and sends them; a delivery whose attempt
/// was still out, or whose `sent` mark was not written yet, would reach Apple twice though no gateway
/// stopped. (A CI run of `LiveActivitiesClusterTests` saw one update twice so.)
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct HandBackTests {
    static let bundle = "com.example.handback"

    @Test func deliveriesOutAtAppleWhenTheirPartitionIsHandedBackAreSentOnce() async throws {
        let directory = try TemporaryDirectory("hand-back")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey_HANDBACK01.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "HANDBACK01", teamID: "HANDBTEAM1")
        defer { Task { await mock.stop() } }
        // Apple answers each push 1.5 s after it arrives: at any moment of the hand-back some are out.
        mock.answer { _ in .delayed(.milliseconds(1500), .status(200)) }
        let upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
        let sender = ProviderTokenFactory(keyID: "HANDSEND01", teamID: "HANDSTEAM1")
        let tokens = (0..<600).map { String(format: "%064x", 0xab_0000 + $0) }
        let url = try await TestPostgres.newDatabase()
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("a"))
        defer { try? store.close() }
        _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: tokens)
        try FileManager.default.createDirectory(atPath: directory.path("b"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: directory.path("a/secrets.key"), toPath: directory.path("b/secrets.key"))
        @Sendable func configure(_ name: String) -> @Sendable (inout GatewayConfiguration) -> Void {
            { configuration in
                configuration.usePostgres(url, dataDirectory: directory.path(name))
                configuration.upstream = upstream
            }
        }

        try await TestGateway.withRunning(configure: configure("a")) { first in
            let alone = try await eventually { try await store.clusterGateways(within: 10_000).map(\.partitions) == [1024] }
            #expect(alone, "the first gateway did not hold every partition")
            // Pushes through the first gateway, one device each, from before the second starts until after
            // the partitions are shared.
            let stop = Atomic(false)
            let pushing = Task {
                var pushed: [String] = []
                for token in tokens.shuffled() where !stop.load(ordering: .relaxed) {
                    let apnsID = UUID().uuidString.lowercased()
                    // (A push of a partition changing hands may be refused, writing nothing: sent again.)
                    let answer = try await NonOwnerRequestTests.retryingRefusals(\.status) {
                        try await first.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                    }
                    #expect(answer.status == 200, "\(answer.body)")
                    pushed.append(token)
                }
                return pushed
            }
            defer { stop.store(true, ordering: .relaxed) }
            _ = try await eventually { mock.received.count >= 10 }
            try await TestGateway.withRunning(configure: configure("b")) { _ in
                var shares: [Int] = []
                let shared = try await eventually(every: .milliseconds(100)) {
                    shares = try await store.clusterGateways(within: 10_000).map(\.partitions)
                    return shares.count == 2 && shares.allSatisfy { $0 > 0 } && shares.reduce(0, +) == 1024
                }
                #expect(shared, "the partitions were not shared: \(shares)")
                try await Task.sleep(for: .seconds(1))
                stop.store(true, ordering: .relaxed)
                let pushed = try await pushing.value
                #expect(pushed.count < tokens.count, "the pushes ended before the partitions were shared")

                // Every push reaches Apple; a second copy would come within a heartbeat of the hand-back.
                func copies() -> [String: [String]] {
                    Dictionary(grouping: mock.received.filter { $0.headers["apns-push-type"] == "widgets" }, by: \.deviceToken)
                        .mapValues { $0.map { $0.headers["apns-id"] ?? "-" } }
                }
                let delivered = try await eventually { Set(pushed).isSubset(of: copies().keys) }
                #expect(delivered, "\(Set(pushed).subtracting(copies().keys).count) of \(pushed.count) pushes did not reach Apple")
                try await Task.sleep(for: .seconds(3))
                let twice = copies().filter { $0.value.count > 1 }
                // The hand-back waits up to 2 s for the attempts out; on a machine slow enough to pass that,
                // it counts those it left, and only they may reach Apple again.
                let leftOut = try await PushRetryTests.scrape(first)["reloadgate_hand_back_attempts_out_total"] ?? 0
                #expect(
                    Double(twice.count) <= leftOut,
                    "\(twice.count) of \(pushed.count) deliveries reached Apple more than once (\(Int(leftOut)) left out by the hand-back): \(twice.prefix(5))"
                )
            }
        }
    }
}
