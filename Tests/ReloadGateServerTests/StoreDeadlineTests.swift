import AsyncHTTPClient
import Foundation
import Logging
import NIOHTTP1
import PostgresNIO
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// A table locked longer than any sender waits (a migration, `LOCK TABLE ... ACCESS EXCLUSIVE`): every
/// push is answered within the store deadline and a little more, refused with `503`, and none of the
/// refused is committed once the lock is gone; `/ready` says `503` meanwhile and `200` again by itself.
@Suite(.timeLimit(.minutes(5)), .enabled(if: TestPostgres.isEnabled))
struct StoreDeadlineTests {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "e5", count: 32)

    @Test func aLockedTableIsRefusedWithinTheDeadlineAndNothingRefusedIsCommittedLater() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("store-deadline")
        defer { data.remove() }
        let sender = ProviderTokenFactory(keyID: "DEADLINE01", teamID: "DEADTEAM01")
        let store = try await PostgresStore(
            location: try PostgresLocation(url: url), secretsDirectory: data.path("data"),
            environment: .sandbox, now: Date(), logger: Logger(label: "test")
        )
        defer { try? store.close() }
        let credentials = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: sender.teamID, allowsExemptions: false, now: Date())
        try await store.addProviderKey(
            StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
        )
        let widgets = [WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())]
        _ = try await store.putDevice(app: credentials.app, token: try DeviceToken(Self.token), widgets: widgets, previousToken: nil, now: Date())

        try await TestGateway.withRunning(configure: { configuration in
            configuration.store.kind = .postgres
            configuration.store.url = url
            configuration.dataDirectory = data.path("data")
            configuration.store.deadline = 1000
        }) { gateway in
            @Sendable func push() async throws -> (status: Int, body: String, apnsID: String, seconds: Double) {
                let apnsID = UUID().uuidString.lowercased()
                let started = ContinuousClock.now
                let answer = try await withThrowingTaskGroup(of: RawHTTP2Client.Answer?.self) { group in
                    group.addTask {
                        let client = try await RawHTTP2Client.connect(port: gateway.ingressPort, tls: try gateway.pki.clientTLSConfiguration())
                        defer { Task { await client.close() } }
                        return try await client.send(
                            RawHTTP2Client.push(token: Self.token, [
                                ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(Self.bundle).push-type.widgets"),
                                ("apns-push-type", "widgets"), ("apns-id", apnsID),
                            ]),
                            body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
                        )
                    }
                    group.addTask {
                        try await Task.sleep(for: .seconds(30))
                        return nil
                    }
                    let first = try await group.next()!
                    group.cancelAll()
                    return try #require(first, "a push was not answered within 30 s")
                }
                let took = started.duration(to: .now)
                return (answer.status, answer.body, apnsID, Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18)
            }
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let first = try await push()
                #expect(first.status == 200, "\(first.body)")

                // Another session locks the request table, as a migration would, and holds it.
                let location = try PostgresLocation(url: url)
                let locker = try await PostgresConnection.connect(
                    configuration: try location.connectionConfiguration(), id: 1, logger: Logger(label: "locker")
                )
                let lockerLogger = Logger(label: "locker")
                try await locker.query("BEGIN", logger: lockerLogger)
                try await locker.query("LOCK TABLE request IN ACCESS EXCLUSIVE MODE", logger: lockerLogger)

                var refused: [(status: Int, body: String, apnsID: String, seconds: Double)] = []
                for _ in 0..<4 { refused.append(try await push()) }
                for answer in refused {
                    #expect(answer.status == 503, "\(answer.body)")
                    #expect(answer.body.contains("ServiceUnavailable"), "\(answer.body)")
                }
                // Answered while the lock still holds: within the deadline (1 s), its margin, and the probe.
                let slowest = refused.map(\.seconds).max() ?? 0
                print("StoreDeadlineTests: refusals answered within \(slowest) s (deadline 1 s)")
                var notReady = false
                for _ in 0..<100 where !notReady {
                    notReady = try await api.send(.GET, "/ready").status == 503
                    if !notReady { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(notReady, "/ready did not turn 503 while every commit missed its deadline")

                try await locker.query("ROLLBACK", logger: lockerLogger)
                try await locker.close()
                var ready = false
                for _ in 0..<300 where !ready {
                    ready = try await api.send(.GET, "/ready").status == 200
                    if !ready { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(ready, "the gateway did not become ready again within 30 s of the lock's end")
                // The first push after the lock, and a burst over the pool's connections: all committed (a
                // connection whose statement the deadline cancelled during its preparation would refuse them).
                let after = try await push()
                #expect(after.status == 200, "\(after.body)")
                let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<16 { group.addTask { try await push().status } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(burst.allSatisfy { $0 == 200 }, "\(burst)")
                // None of the refused pushes was committed when the lock went away.
                for answer in refused {
                    #expect(try await store.requests(apnsID: answer.apnsID).isEmpty, "\(answer.apnsID) was committed after its 503")
                }
                #expect(try await store.requests(apnsID: after.apnsID).count == 1)
            }
        }
    }
}
