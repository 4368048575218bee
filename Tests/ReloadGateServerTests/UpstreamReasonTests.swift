import Foundation
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateMockAPNs
@testable import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// Every reason Apple answers the gateway's deliveries with (docs/APNS.md, "What Apple answers the
/// gateway"), and a few it does not document, answered by the mock in turn, each to a device of its own: the
/// gateway takes the reason's action. Retried ones are tried once more (on a new connection for those that
/// ask for one) and then sent; a retired token's device is unregistered; dropped and alerted ones are failed
/// with the reason and not tried again.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct UpstreamReasonTests {
    static let bundle = "com.example.reasons"

    struct Case: Sendable {
        var status: Int
        var reason: String?
        var action: UpstreamAction
        var token: String
    }

    static let cases: [Case] = {
        let documented = UpstreamRefusal.known.sorted { $0.key < $1.key }.map { ($0.value.status, Optional($0.key), $0.value.action) }
        // Not in Apple's documentation: each gets the action of its status.
        let unknown: [(Int, String?, UpstreamAction)] = [
            (400, "SomethingNew", .drop), (403, "NewKeyProblem", .alert), (410, "GoneForGood", .retireToken),
            (429, nil, .retry), (502, "BadGateway", .retry), (418, nil, .drop),
        ]
        return (documented + unknown).enumerated().map { index, item in
            Case(status: item.0, reason: item.1, action: item.2, token: String(format: "%08x", index) + String(repeating: "e", count: 56))
        }
    }()

    @Test func eachReasonOfApplesCallsForItsAction() async throws {
        let directory = try TemporaryDirectory("upstream-reasons")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey_RSNKEY0001.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "RSNKEY0001", teamID: "RSNTEAM001")
        defer { Task { await mock.stop() } }
        let sender = ProviderTokenFactory(keyID: "RSNSENDER1", teamID: "RSNSENDTM1")
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let app = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: sender.teamID, now: Date()).app
            try await store.addProviderKey(
                StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
            )
            for item in Self.cases {
                _ = try await store.putDevice(
                    app: app, token: try DeviceToken(item.token),
                    widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
                    previousToken: nil, now: Date().addingTimeInterval(-3600)
                )
            }
        }
        // The first request for each device gets its case's refusal; any later one 200.
        let byToken = Dictionary(uniqueKeysWithValues: Self.cases.map { ($0.token, $0) })
        let seen = SeenTokens()
        mock.answer { request in
            guard seen.firstTime(request.deviceToken), let item = byToken[request.deviceToken] else { return .status(200) }
            return .status(item.status, reason: item.reason, timestamp: item.status == 410 ? Int64(Date().timeIntervalSince1970 * 1000) : nil)
        }

        try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
        }) { gateway in
            for item in Self.cases {
                let answer = try await gateway.push(item.token, bundle: Self.bundle, sender: sender)
                #expect(answer.status == 200, "\(item.token): \(answer.body)")
            }
            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            #expect(try await eventually { try await store.deliveries(in: [.pending, .sending]).isEmpty }, "deliveries still open")
            let sent = Set(try await store.deliveries(in: [.sent]).map(\.device))
            let received = mock.received
            let app = try #require(try await store.app(bundle: try BundleID(Self.bundle)))
            for item in Self.cases {
                let name = "\(item.status) \(item.reason ?? "-") (\(item.action))"
                let requests = received.filter { $0.deviceToken == item.token }
                let status = try await store.deviceStatus(app: app, token: try DeviceToken(item.token))
                let records = try await store.recentDeliveries(bundle: Self.bundle, deviceToken: item.token, limit: 5)
                let delivery = try #require(records.first, "\(name): no delivery").delivery
                switch item.action {
                case .retry, .newToken:
                    #expect(requests.count == 2, "\(name): \(requests.count) requests")
                    #expect(sent.contains(delivery.device), "\(name): not sent after the retry")
                case .newConnection:
                    #expect(requests.count == 2, "\(name): \(requests.count) requests")
                    if requests.count == 2 {
                        #expect(requests[1].connection != requests[0].connection, "\(name): tried again on the connection that refused it")
                    }
                    #expect(sent.contains(delivery.device), "\(name): not sent after the retry")
                case .retireToken:
                    #expect(requests.count == 1, "\(name): \(requests.count) requests")
                    #expect(status?.active == false, "\(name): the device is still active")
                case .drop, .alert:
                    #expect(requests.count == 1, "\(name): \(requests.count) requests")
                    #expect(delivery.state == .failed, "\(name): \(delivery.state)")
                    #expect(delivery.history.lastError?.contains(item.reason ?? "HTTP \(item.status)") == true, "\(name): \(delivery.history.lastError ?? "")")
                    #expect(status?.active == true, "\(name): the device was retired")
                }
            }
        }
    }

    /// Device tokens seen by the mock, from its event loops.
    final class SeenTokens: Sendable {
        private let seen = Mutex(Set<String>())
        func firstTime(_ token: String) -> Bool { seen.withLock { $0.insert(token).inserted } }
    }
}
