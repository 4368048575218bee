import Foundation
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Another process holds the SQLite file's write lock (an operator's `sqlite3` shell, a backup): the
/// writes that need it wait, up to the store's deadline, and nothing else does. Registrations (the
/// registry's group commit) and pushes to new devices (adopted by the scheduler's commit loop) waited on
/// the Swift concurrency pool's threads, two on a 2-core machine: the gateway answered nothing else, not
/// even `/health`, until the lock was gone or the deadline passed (found by ConnectionTimeoutTests).
@Suite(.heavy)
struct SQLiteWriteLockTests {
    static let bundle = "com.example.scores"

    @Test func writesWaitingForTheLockHoldNoOtherAnswer() async throws {
        let directory = try TemporaryDirectory("write-lock")
        defer { directory.remove() }
        let credentials: AppCredentials
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            credentials = try store.createApp(bundle: try BundleID(Self.bundle), now: Date())
        }
        try await TestGateway.withRunning(in: directory, configure: { configuration in
            // Longer than the lock is held: the writes wait for it, whatever the machine's load.
            configuration.store.deadline = 60_000
        }) { gateway in
            let lock = try await SQLiteWriteLockHolder.hold(gateway.configuration.dataDirectory + "/reloadgate.sqlite", atMost: .seconds(25))

            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let tls = try gateway.pki.clientTLSConfiguration(clientCertificateFor: [try BundleID(Self.bundle)])
                let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)
                // Writes that wait for the lock: registrations, and pushes to devices nobody has seen.
                let registrations = (0..<3).map { index in
                    Task {
                        try await api.putDevice(
                            bundle: Self.bundle, token: String(format: "%064x", 0xA0 + index), apiKey: credentials.apiKey,
                            widgets: [["id": "w1", "kind": "scores", "family": "systemSmall", "configuration": [String: Any]()]]
                        ).status
                    }
                }
                let pushes = (0..<2).map { index in
                    Task {
                        let connection = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: tls)
                        defer { Task { await connection.close() } }
                        let fields = RawHTTP2Client.push(token: String(format: "%064x", 0xB0 + index), [("apns-push-type", "widgets")])
                        return try await connection.send(fields, body: body).status
                    }
                }
                try await Task.sleep(for: .seconds(1))

                // Meanwhile the gateway answers what needs no write, while the lock is held. (Blocked, it
                // answered only once the lock was gone: here at 25 s. A whole suite's load on two cores can
                // delay an answer by seconds, hence the margin.)
                let started = ContinuousClock.now
                for _ in 0..<3 {
                    let health = try await api.send(.GET, "/health")
                    #expect(health.status == 200)
                }
                let took = ContinuousClock.now - started
                #expect(took < .seconds(15), "three /health calls took \(took) while writes waited for the lock")

                try await lock.release()
                // Every write that waited is answered: committed once the lock is gone (or refused at the
                // store's deadline, on a machine slow enough).
                for registration in registrations {
                    let status = try await registration.value
                    #expect(status == 200 || status == 503, "a registration answered \(status)")
                }
                for push in pushes {
                    let status = try await push.value
                    #expect(status == 200 || status == 503, "a push answered \(status)")
                }
            }
        }
    }

    /// A lock held past the store's deadline: the commit that waited for it is refused (`503`, nothing
    /// accepted), `/ready` says `503` as soon as it is (it used to say `200` until the rebuild's probe had
    /// waited out the store's deadline too), and once the lock is gone the gateway is ready and commits
    /// again by itself.
    @Test func readyTurnsUnavailableWhenACommitMeetsTheLockAndRecovers() async throws {
        let directory = try TemporaryDirectory("write-lock-ready")
        defer { directory.remove() }
        let credentials: AppCredentials
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            credentials = try store.createApp(bundle: try BundleID(Self.bundle), now: Date())
        }
        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.store.deadline = 4_000
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let token = String(repeating: "c1", count: 32)
                let registered = try await api.putDevice(
                    bundle: Self.bundle, token: token, apiKey: credentials.apiKey,
                    widgets: [["id": "w1", "kind": "scores", "family": "systemSmall", "configuration": [String: Any]()]]
                )
                try #require(registered.status == 200, "\(registered.body)")
                let tls = try gateway.pki.clientTLSConfiguration(clientCertificateFor: [try BundleID(Self.bundle)])
                let connection = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: tls)
                defer { Task { await connection.close() } }
                let fields = RawHTTP2Client.push(token: token, [("apns-push-type", "widgets")])
                let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)

                let lock = try await SQLiteWriteLockHolder.hold(gateway.configuration.dataDirectory + "/reloadgate.sqlite", atMost: .seconds(30))

                let refused = try await connection.send(fields, body: body)
                #expect(refused.status == 503, "\(refused)")
                let answered = ContinuousClock.now
                var notReadyAfter: Duration?
                while ContinuousClock.now - answered < .seconds(10) {
                    if try await api.send(.GET, "/ready").status == 503 {
                        notReadyAfter = ContinuousClock.now - answered
                        break
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
                let after = try #require(notReadyAfter, "/ready said 200 for 10 s after a commit failed on the lock")
                #expect(after < .seconds(2), "/ready said 503 only \(after) after the commit failed")

                try await lock.release()
                #expect(try await api.waitForReadiness(200, within: .seconds(10)), "not ready again after the lock went")
                let accepted = try await connection.send(fields, body: body)
                #expect(accepted.status == 200, "\(accepted)")
            }
        }
    }

    /// Pushes to devices nobody has seen, while a lock outlasts the deadline: each is adopted by the
    /// commit loop in a write of its own, and each used to wait its own deadline there, one after the
    /// other, with every other request behind them. The first refusal stands for the store: the others
    /// are refused with it, the gateway says `503` on `/ready`, and it comes back by itself.
    @Test func newDevicesDuringALockAreRefusedOnceNotOneDeadlineEach() async throws {
        let directory = try TemporaryDirectory("write-lock-adopt")
        defer { directory.remove() }
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            _ = try store.createApp(bundle: try BundleID(Self.bundle), now: Date())
        }
        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.store.deadline = 3_000
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let tls = try gateway.pki.clientTLSConfiguration(clientCertificateFor: [try BundleID(Self.bundle)])
                let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)
                let lock = try await SQLiteWriteLockHolder.hold(gateway.configuration.dataDirectory + "/reloadgate.sqlite", atMost: .seconds(40))

                // Eight pushes to new devices at once, over connections made before: the adoptions queue on
                // the commit loop.
                var connections: [RawHTTP2Client] = []
                for _ in 0..<8 { connections.append(try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: tls)) }
                defer { for connection in connections { Task { await connection.close() } } }
                let pushes = connections.enumerated().map { index, connection in
                    Task { () -> (Int, Duration) in
                        let fields = RawHTTP2Client.push(token: String(format: "%064x", 0xD0 + index), [("apns-push-type", "widgets")])
                        let sent = ContinuousClock.now
                        let status = try await connection.send(fields, body: body).status
                        return (status, ContinuousClock.now - sent)
                    }
                }
                var slowest = Duration.zero
                for push in pushes {
                    let (status, took) = try await push.value
                    #expect(status == 503, "a push to a new device answered \(status) while the store was locked")
                    slowest = max(slowest, took)
                }
                // One deadline (3 s), and a whole suite's load on two cores (10 s seen); one deadline each
                // was 24 s.
                #expect(slowest < .seconds(16), "the last push to a new device was answered after \(slowest)")
                #expect(try await api.send(.GET, "/ready").status == 503)

                try await lock.release()
                #expect(try await api.waitForReadiness(200, within: .seconds(10)), "not ready again after the lock went")
                let connection = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: tls)
                defer { Task { await connection.close() } }
                let fields = RawHTTP2Client.push(token: String(format: "%064x", 0xD0), [("apns-push-type", "widgets")])
                #expect(try await connection.send(fields, body: body).status == 200)
            }
        }
    }
}
