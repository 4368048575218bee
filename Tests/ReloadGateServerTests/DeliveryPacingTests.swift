import Foundation
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateMockAPNs
import ReloadGateTesting
import Testing

/// `upstream.requestsPerSecond` end to end: deliveries released together reach the push service no
/// faster than the configured rate (checked as a lower bound on the time they take, never an upper one).
@Suite(.timeLimit(.minutes(10)), .heavy)
struct DeliveryPacingTests {
    static let bundle = "com.example.paced"
    static let devices = 60
    static let rate = 10

    @Test func deliveriesReleasedTogetherLeaveAtTheConfiguredRate() async throws {
        let directory = try TemporaryDirectory("pacing")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "PACEKEY001", teamID: "PACETEAM01")
        defer { Task { await mock.stop() } }

        let credentials: AppCredentials
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            credentials = try await store.createApp(bundle: try BundleID(Self.bundle), now: Date())
            for index in 0..<Self.devices {
                _ = try await store.putDevice(
                    app: credentials.app,
                    token: try DeviceToken(String(format: "%08x", index) + String(repeating: "e", count: 56)),
                    widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
                    previousToken: nil,
                    now: Date().addingTimeInterval(-60)
                )
            }
        }

        try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
            configuration.upstream.requestsPerSecond = Self.rate
        }) { gateway in
            let decided = try await gateway.withHTTPClient { client in
                try await GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                    .reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: credentials.webhookSecret)
            }
            try #require(decided.status == 202, "\(decided.body)")
            #expect((decided.json["decisions"] as? [String: Int])?["scheduled"] == Self.devices)

            _ = try await eventually { mock.received.count >= Self.devices }
            let received = mock.received
            try #require(received.count == Self.devices, "the mock received \(received.count) of \(Self.devices) requests")
            // 60 requests at 10 a second with a burst of a tenth of a second (2 requests): the last leaves
            // at least (60 - 2) / 10 = 5.8 s after the first is released; without the limit they all
            // leave within a few tens of milliseconds. The times are the mock's, taken when it reads each
            // request, in this test process: a stall of the process or of the mock's event loop (the full suite
            // beside two CPU hogs showed ~2.5 s) shifts them, so both checks leave room for one: the spread must
            // be at least 3 s, and no one-second window may hold 40 (the limit allows 12).
            let times = received.map(\.receivedAt).sorted()
            let spread = times[times.count - 1] - times[0]
            #expect(spread >= .seconds(3), "\(Self.devices) requests took \(spread)")
            let densest = times.indices.map { index in times[index...].prefix { $0 - times[index] < .seconds(1) }.count }.max() ?? 0
            #expect(densest <= 40, "\(densest) requests within one second")
        }
    }
}
