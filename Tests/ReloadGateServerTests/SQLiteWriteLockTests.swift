import Foundation
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Another process holds the SQLite file's write lock (an operator's `sqlite3` shell, a backup): the
/// writes that need it wait, up to the store's deadline, and nothing else does. Registrations and pushes
/// to new devices (both written by the registry's group commit) once waited
/// on the Swift concurrency pool's threads, two on a 2-core machine: the gateway answered nothing else, not
/// even `/health`, until the lock was gone or the deadline passed.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct SQLiteWriteLockTests {
    static let bundle = "com.example.scores"

    /// While writes wait for the lock, answers that need a thread of the pool but no write (`/health`
    /// through the router, and a registry read through the store) are given before the lock goes: the
    /// lock is held until the test lets it go, or for 45 s at most, and each answer must come while it is
    /// still held. No answer is timed: with the writes back on the pool's threads the answers wait for the
    /// lock, come after it went at 45 s, and the test fails; the writes wait 60 s (the store's deadline),
    /// so they are still waiting when the hold ends.
    @Test func writesWaitingForTheLockHoldNoOtherAnswer() async throws {
        try await TestGateway.withRunningApp(Self.bundle, directoryNamed: "write-lock", configure: { configuration in
            configuration.store.deadline = 60_000
        }) { gateway, credentials in
            let lock = try await SQLiteWriteLockHolder.hold(gateway.configuration.dataDirectory + "/reloadgate.sqlite", atMost: .seconds(45))

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

                // Asked for two seconds, every 100 ms, from when the writes were sent: the writes reach the
                // lock meanwhile (a registration waits 50 ms for its group commit), and every answer
                // asked after that needs a thread they would hold.
                let asking = ContinuousClock.now
                var asked = 0
                while ContinuousClock.now - asking < .seconds(2) {
                    let health = try await api.send(.GET, "/health")
                    #expect(health.status == 200)
                    let read = try await api.send(
                        .GET, "/v1/apps/\(Self.bundle)/configurations", headers: ["authorization": "Bearer \(credentials.apiKey)"]
                    )
                    #expect(read.status == 200, "\(read.body)")
                    try #require(lock.isHeld, "answers came only after the lock was gone (asked \(asked) times before)")
                    asked += 1
                    try await Task.sleep(for: .milliseconds(100))
                }

                try await lock.release()
                // Every write that waited is committed once the lock is gone.
                for registration in registrations {
                    let status = try await registration.value
                    #expect(status == 200, "a registration answered \(status)")
                }
                for push in pushes {
                    let status = try await push.value
                    #expect(status == 200, "a push answered \(status)")
                }
            }
        }
    }

    /// A lock held past the store's deadline: the commit that waited for it is refused (`503`, nothing
    /// accepted), and `/ready` says `503` before that refusal is sent (the engine marks itself not ready
    /// when it degrades), so the first `/ready` after it says `503`; once the lock is gone the gateway is
    /// ready and commits again by itself.
    @Test func readyTurnsUnavailableWhenACommitMeetsTheLockAndRecovers() async throws {
        try await TestGateway.withRunningApp(Self.bundle, directoryNamed: "write-lock-ready", configure: { configuration in
            configuration.store.deadline = 4_000
        }) { gateway, credentials in
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
                let ready = try await api.send(.GET, "/ready")
                #expect(ready.status == 503, "/ready after a commit was refused for the lock: \(ready.status) \(ready.body)")
                #expect(lock.isHeld, "the lock went before /ready was asked")

                try await lock.release()
                // The engine tries to rebuild once a second: ready again within a second or two of the lock
                // going, and the wait's margin is the machine's.
                #expect(try await api.waitForReadiness(200, within: .seconds(30)), "not ready again after the lock went")
                let accepted = try await connection.send(fields, body: body)
                #expect(accepted.status == 200, "\(accepted)")
            }
        }
    }

    /// Pushes to devices nobody has seen, while a lock outlasts the deadline: their adoptions queue for the
    /// registry's group commit, and those queued while a batch waits would wait one more deadline each
    /// batch (when adopted by the commit loop, one each, seven deadlines between the first refusal and the
    /// last). The first refusal stands for the store: what queued meanwhile is refused with it, the
    /// gateway says `503` on `/ready`, and it comes back by itself; all answers come within one deadline
    /// of the first.
    @Test func newDevicesDuringALockAreRefusedOnceNotOneDeadlineEach() async throws {
        let directory = try TemporaryDirectory("write-lock-adopt")
        defer { directory.remove() }
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            _ = try await store.createApp(bundle: try BundleID(Self.bundle), now: Date())
        }
        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.store.deadline = 5_000
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let tls = try gateway.pki.clientTLSConfiguration(clientCertificateFor: [try BundleID(Self.bundle)])
                let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)
                let lock = try await SQLiteWriteLockHolder.hold(gateway.configuration.dataDirectory + "/reloadgate.sqlite", atMost: .seconds(40))

                // Eight pushes to new devices at once, over connections made before: the adoptions queue for
                // the registry's group commit.
                var connections: [RawHTTP2Client] = []
                for _ in 0..<8 { connections.append(try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: tls)) }
                defer { for connection in connections { Task { await connection.close() } } }
                let pushes = connections.enumerated().map { index, connection in
                    Task { () -> (Int, ContinuousClock.Instant) in
                        let fields = RawHTTP2Client.push(token: String(format: "%064x", 0xD0 + index), [("apns-push-type", "widgets")])
                        let status = try await connection.send(fields, body: body).status
                        return (status, ContinuousClock.now)
                    }
                }
                var answers: [ContinuousClock.Instant] = []
                for push in pushes {
                    let (status, at) = try await push.value
                    #expect(status == 503, "a push to a new device answered \(status) while the store was locked")
                    answers.append(at)
                }
                let spread = answers.max()! - answers.min()!
                #expect(spread < .seconds(5), "the answers to the new devices spread over \(spread): more than one deadline was waited")
                #expect(try await api.send(.GET, "/ready").status == 503)
                #expect(lock.isHeld, "the lock went before the pushes were answered")

                try await lock.release()
                #expect(try await api.waitForReadiness(200, within: .seconds(30)), "not ready again after the lock went")
                let connection = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: tls)
                defer { Task { await connection.close() } }
                let fields = RawHTTP2Client.push(token: String(format: "%064x", 0xD0), [("apns-push-type", "widgets")])
                #expect(try await connection.send(fields, body: body).status == 200)
            }
        }
    }
}
