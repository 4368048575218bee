import Foundation
import GRDB
import Logging
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateMockAPNs
import ReloadGateTesting
import Synchronization
import Testing

/// Apple failing at random while 10,000 reloads are due: afterwards every one is either delivered or
/// `failed` with a reason, none is lost, and none is delivered twice unless an attempt of it ended
/// without an answer (counted in the store as an unknown outcome, and reported).
///
/// Found by this test: NIO's HTTP/2 handler closed the connection to the push service after 200 reset
/// streams in 30 s (a defence against abusive peers), which turned every request in flight into an
/// unknown outcome and sent answered ones again; the client now allows the push service's resets.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct DeliveryChaosTests {
    static let bundle = "com.example.chaos"
    static let deviceCount = 10_000

    /// What the mock answered, per apns-id.
    final class Answers: Sendable {
        private let state = Mutex<(random: UInt64, byID: [String: [Int]])>((0x2545_F491_4F6C_DD1D, [:]))

        /// 30% failures: 500, 503, 429 or a reset stream, chosen by a fixed-seed generator.
        func answer(for request: MockAPNsServer.Received) -> MockAPNsServer.Answer {
            state.withLock { state in
                state.random ^= state.random << 13
                state.random ^= state.random >> 7
                state.random ^= state.random << 17
                let roll = state.random % 100
                let id = request.headers["apns-id"] ?? "?"
                let answer: MockAPNsServer.Answer =
                    switch roll {
                    case 0..<8: .status(500, reason: "InternalServerError")
                    case 8..<16: .status(503, reason: "ServiceUnavailable")
                    case 16..<24: .status(429, reason: "TooManyRequests")
                    case 24..<30: .reset
                    default: .status(200)
                    }
                if case .status(let status, _, _, _) = answer {
                    state.byID[id, default: []].append(status)
                } else {
                    state.byID[id, default: []].append(0)
                }
                return answer
            }
        }

        var byID: [String: [Int]] { state.withLock { $0.byID } }
    }

    @Test
    func thirtyPercentFailuresLoseNothingAndDeliverNothingTwice() async throws {
        let directory = try TemporaryDirectory("chaos")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "CHAOSKEY01", teamID: "CHAOSTEAM1")
        defer { Task { await mock.stop() } }
        let answers = Answers()
        mock.answer { answers.answer(for: $0) }

        // 10,000 devices with one widget each, written in one transaction.
        let credentials: AppCredentials
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            credentials = try await store.createApp(bundle: try BundleID(Self.bundle), now: Date())
            try store.close()
            let database = try DatabaseQueue(path: directory.path("data/reloadgate.sqlite"))
            try await database.write { db in
                let now = Date().timeIntervalSince1970 - 60
                for index in 0..<Self.deviceCount {
                    let token = String(format: "%08x", index) + String(repeating: "d", count: 56)
                    try db.execute(
                        sql: "INSERT INTO device (appId, token, active, registeredAt) VALUES (?, ?, 1, ?)",
                        arguments: [credentials.app.id, token, now]
                    )
                    try db.execute(
                        sql: """
                            INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled)
                            VALUES (?, 'w', 'scores', 'systemSmall', '{}', 1)
                            """,
                        arguments: [db.lastInsertedRowID]
                    )
                }
            }
            try database.close()
        }

        try await TestGateway.withRunning(in: directory, pki: pki, configure: { configuration in
            configuration.upstream = mock.upstream(keyFile: keyFile, caFile: pki.caCertificatePath)
            configuration.upstream.retryDelay = 20
            configuration.upstream.maxAttempts = 6
            // Some 4,000 retries would each log a warning.
            configuration.log.level = .error
        }) { gateway in
            let decided = try await gateway.withHTTPClient { client in
                try await GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                    .reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: credentials.webhookSecret)
            }
            try #require(decided.status == 202, "\(decided.body)")
            #expect((decided.json["decisions"] as? [String: Int])?["scheduled"] == Self.deviceCount)

            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            // Bounded by progress, not by a fixed time: on a machine loaded by the rest of the tests the
            // 10,000 deliveries and their retries take minutes. Stalled: no delivery closed for a minute.
            let clock = ContinuousClock()
            let started = clock.now
            var progressed = clock.now
            var open = try await store.deliveries(in: [.pending, .sending]).count
            while open > 0, progressed.duration(to: clock.now) < .seconds(60), started.duration(to: clock.now) < .seconds(420) {
                try await Task.sleep(for: .milliseconds(100))
                let now = try await store.deliveries(in: [.pending, .sending]).count
                if now < open { progressed = clock.now }
                open = now
            }
            #expect(open == 0, "\(open) deliveries still open: none closed for a minute, or seven minutes passed")

            let sent = try await store.deliveries(in: [.sent])
            let failed = try await store.deliveries(in: [.failed])
            // None lost: every due reload ended as a delivery that was sent or failed.
            #expect(sent.count + failed.count == Self.deviceCount)
            #expect(Set(sent.map(\.device)).count == sent.count)
            // Every failed one says why.
            #expect(failed.allSatisfy { !($0.history.lastError ?? "").isEmpty })
            // Delivered twice only when an attempt's outcome was unknown; each sent delivery got a 200,
            // each failed one none.
            let byID = answers.byID
            let twice = sent.filter { (byID[$0.apnsID] ?? []).filter { $0 == 200 }.count > 1 }
            let unexplained = twice.filter { $0.history.unknownOutcomes == 0 }
            #expect(unexplained.isEmpty, "\(unexplained.count) delivered twice with no unknown outcome: \(unexplained.prefix(3).map { "\($0.apnsID) \($0.history) \(byID[$0.apnsID] ?? [])" })")
            #expect(sent.allSatisfy { (byID[$0.apnsID] ?? []).contains(200) })
            #expect(failed.allSatisfy { !(byID[$0.apnsID] ?? []).contains(200) })
            let unknown = (sent + failed).filter { $0.history.unknownOutcomes > 0 }.count
            let retried = byID.values.filter { $0.count > 1 }.count
            print(
                "chaos: \(sent.count) sent, \(failed.count) failed after 6 attempts, \(retried) retried, "
                    + "\(unknown) with an attempt of unknown outcome (reset stream), \(twice.count) delivered twice, "
                    + "\(mock.received.count) requests to the mock"
            )
        }
    }
}
