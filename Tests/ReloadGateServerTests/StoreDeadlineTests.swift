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
/// And a write that waits for a lock holds up no other push.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct StoreDeadlineTests {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "e5", count: 32)

    @Test func aLockedTableIsRefusedWithinTheDeadlineAndNothingRefusedIsCommittedLater() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("store-deadline")
        defer { data.remove() }
        let sender = ProviderTokenFactory(keyID: "DEADLINE01", teamID: "DEADTEAM01")
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: data.path("data"))
        defer { try? store.close() }
        _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: [Self.token])

        try await TestGateway.withRunning(configure: { configuration in
            configuration.usePostgres(url, dataDirectory: data.path("data"))
            configuration.store.deadline = 1000
        }) { gateway in
            @Sendable func push() async throws -> PushAnswer {
                try await gateway.push(Self.token, bundle: Self.bundle, sender: sender)
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

                var refused: [PushAnswer] = []
                for _ in 0..<4 { refused.append(try await push()) }
                for answer in refused {
                    #expect(answer.status == 503, "\(answer.body)")
                    #expect(answer.body.contains("ServiceUnavailable"), "\(answer.body)")
                }
                // Answered while the lock still holds: within the deadline (1 s), its margin, and the probe.
                let slowest = refused.map(\.seconds).max() ?? 0
                print("StoreDeadlineTests: refusals answered within \(slowest) s (deadline 1 s)")
                #expect(try await api.waitForReadiness(503, within: .seconds(30)), "/ready did not turn 503 while every commit missed its deadline")

                try await locker.query("ROLLBACK", logger: lockerLogger)
                try await locker.close()
                #expect(try await api.waitForReadiness(200, within: .seconds(30)), "the gateway did not become ready again within 30 s of the lock's end")
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

    /// A push to a token nobody registered is adopted beside the commit loop: while its insert waits for a
    /// row lock (another session inserting the same token and not committing, as another gateway's
    /// registration would), a push to a known device is decided and answered. The adoption was written in
    /// the commit loop's turn, and the known push waited there until the adoption ended (a SIGSTOPped
    /// gateway's database connection held the loop 7 s so in a chaos run).
    @Test func aPushToANewDeviceWaitingForARowLockHoldsUpNoOtherPush() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("store-adoption-lock")
        defer { data.remove() }
        let sender = ProviderTokenFactory(keyID: "ADOPTLK001", teamID: "ADOPTTEAM1")
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: data.path("data"))
        defer { try? store.close() }
        _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: [Self.token])
        let newToken = String(repeating: "a7", count: 32)

        try await TestGateway.withRunning(configure: { configuration in
            configuration.usePostgres(url, dataDirectory: data.path("data"))
            configuration.store.deadline = 20_000
        }) { gateway in
            #expect(try await gateway.push(Self.token, bundle: Self.bundle, sender: sender).status == 200)

            let location = try PostgresLocation(url: url)
            let logger = Logger(label: "locker")
            let locker = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 1, logger: logger)
            let adopted = Shared<PushAnswer?>(nil)
            let adoption: Task<PushAnswer, any Error>
            do {
                try await locker.query("BEGIN", logger: logger)
                try await locker.query("""
                    INSERT INTO device (appId, token, active, registeredAt, pushType)
                    SELECT id, \(newToken), true, 0, 'widgets' FROM app WHERE bundle = \(Self.bundle)
                    """, logger: logger)

                adoption = Task {
                    let answer = try await gateway.push(newToken, bundle: Self.bundle, sender: sender, timeout: .seconds(60))
                    adopted.withLock { $0 = answer }
                    return answer
                }
                // The adoption's insert waits for the locker's transaction (the server says so), at most 15 s.
                let waiting = ContinuousClock.now
                var blocked = false
                while !blocked, ContinuousClock.now - waiting < .seconds(15) {
                    blocked = try await Self.someSessionWaits(for: locker, logger: logger)
                    if !blocked { try await Task.sleep(for: .milliseconds(50)) }
                }
                try #require(blocked, "the adoption's insert never waited for the row lock")

                let known = try await gateway.push(Self.token, bundle: Self.bundle, sender: sender)
                #expect(known.status == 200, "\(known.body)")
                #expect(adopted.withLock { $0 } == nil, "the push to a known device was answered only after the adoption ended")
            } catch {
                try? await locker.close()
                throw error
            }

            try await locker.query("ROLLBACK", logger: logger)
            try await locker.close()
            let answer = try await adoption.value
            #expect(answer.status == 200, "\(answer.body)")
            #expect(try await store.requests(apnsID: answer.apnsID).count == 1)
            guard case .active = try await store.pushDeviceStatus(app: try #require(try await store.app(bundle: try BundleID(Self.bundle))), token: try DeviceToken(newToken)) else {
                Issue.record("the new token was not adopted")
                return
            }
        }
    }

    /// A gateway stops while its rebuild waits for the store: the rebuild's reload of the registry waits for
    /// a table another session holds locked (`timeline`, which no commit and no commit probe touches), and
    /// the gateway, told to stop, cancels it and stops within seconds rather than when the lock goes. A
    /// stop that waited for the rebuild would wait as long as a statement may wait for a lock: the store's
    /// deadline, 15 s here (a reload's scan may take minutes; a statement waiting for a lock, the deadline).
    @Test func aGatewayStopsWhileItsRebuildWaitsForALockedTable() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("store-rebuild-stop")
        defer { data.remove() }
        let sender = ProviderTokenFactory(keyID: "REBUILDST1", teamID: "REBUILDTM1")
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: data.path("data"))
        defer { try? store.close() }
        _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: [Self.token])
        let location = try PostgresLocation(url: url)
        let logger = Logger(label: "locker")
        let requestLocker = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 1, logger: logger)
        let timelineLocker = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 2, logger: logger)
        // Closed on every way out: postgres-nio asserts that a connection is closed before it goes. (The lock
        // need not end by itself: a gateway that waited for its reload would wait for the statement's lock
        // timeout, the store's deadline.)
        @Sendable func closeLockers() async {
            try? await requestLocker.close()
            try? await timelineLocker.close()
        }
        let toldToStop = Shared<ContinuousClock.Instant?>(nil)
        let unlocked = Shared<ContinuousClock.Instant?>(nil)
        // The database's sessions when the gateway is told to stop (what holds its connections), for a slow
        // stop's message.
        let sessionsAtStop = Shared("")
        let stoppedAt: ContinuousClock.Instant
        do {
            try await TestGateway.withRunning(configure: { configuration in
                configuration.usePostgres(url, dataDirectory: data.path("data"))
                configuration.store.deadline = 15_000
            }) { gateway in
                #expect(try await gateway.push(Self.token, bundle: Self.bundle, sender: sender).status == 200)
                try await timelineLocker.query("BEGIN", logger: logger)
                try await timelineLocker.query("LOCK TABLE timeline IN ACCESS EXCLUSIVE MODE", logger: logger)
                // A commit that misses its deadline on the locked request table: the gateway is degraded and must
                // reload its state once the store can commit again.
                try await requestLocker.query("BEGIN", logger: logger)
                try await requestLocker.query("LOCK TABLE request IN ACCESS EXCLUSIVE MODE", logger: logger)
                // Answered after the deadline (15 s): a loaded machine may take longer still.
                let pushed = ContinuousClock.now
                let refused = try await gateway.push(Self.token, bundle: Self.bundle, sender: sender, timeout: .seconds(90))
                let refusedAfter = pushed.duration(to: .now)
                #expect(refused.status == 503, "\(refused.body)")
                // The commit probe passes again (a probe already waiting for the request table may first wait out
                // its deadline); the reload then waits for the timeline table, at most 90 s. The server says so:
                // a session waits for this one's lock, and only a reload reads that table. (Its statement is not
                // yet the session's `query` then: the lock is taken while the statement is parsed.)
                try await requestLocker.query("ROLLBACK", logger: logger)
                unlocked.withLock { $0 = .now }
                let waiting = ContinuousClock.now
                var blocked = false
                while !blocked, ContinuousClock.now - waiting < .seconds(90) {
                    blocked = try await Self.someSessionWaits(for: timelineLocker, logger: logger)
                    if !blocked { try await Task.sleep(for: .milliseconds(100)) }
                }
                if !blocked {
                    // What the database's other sessions were doing instead (a failure in a loaded run says why).
                    let sessions = try await Self.sessions(seenBy: timelineLocker, logger: logger)
                    try #require(
                        blocked,
                        """
                        the gateway's reload never waited for the locked timeline table (the push was refused after \(refusedAfter)); \
                        its database's sessions: \(sessions)
                        """
                    )
                }
                print("StoreDeadlineTests: refused after \(refusedAfter); the reload waited for the lock \(waiting.duration(to: .now)) later")
                let sessions = try await Self.sessions(seenBy: timelineLocker, logger: logger)
                sessionsAtStop.withLock { $0 = sessions }
                toldToStop.withLock { $0 = .now }
            }
            stoppedAt = .now
        } catch {
            await closeLockers()
            throw error
        }
        await closeLockers()
        let stopped = try #require(toldToStop.withLock { $0 }).duration(to: stoppedAt)
        let sinceUnlocked = try #require(unlocked.withLock { $0 }).duration(to: stoppedAt)
        print("StoreDeadlineTests: stopped \(stopped) after being told, its reload waiting for a lock (store deadline 15 s)")
        // The reload's statement began after the request table was unlocked, and waits for the timeline
        // table until its lock timeout, the deadline: a stop that waited for it would end 15 s after the
        // unlock or later. (Not a bound on the stop itself: on a loaded machine other bounded waits of a
        // stop, a lease release waiting for a connection, may take seconds.)
        #expect(
            sinceUnlocked < .seconds(13),
            """
            the gateway stopped \(sinceUnlocked) after the unlock, \(stopped) after being told: it waited for its rebuild's read; \
            the database's sessions when it was told: \(sessionsAtStop.withLock { $0 })
            """
        )
    }

    /// A registration whose transaction breaks before its `COMMIT` (its session ended by the server while
    /// its write waits for a lock, as a paused gateway's idle transaction is) stored nothing, and the
    /// gateway says so (decision 0100): `503 store-unavailable` ("nothing was accepted"), not
    /// `store-outcome-unknown`. `/ready` says `503` while the gateway cannot commit and `200` again by itself
    /// once the lock is gone; the device is not in the store, and the same registration is accepted then.
    @Test func aRegistrationWhoseTransactionBreaksIsRefusedAsNotStored() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("store-deadline-registration")
        defer { data.remove() }
        try await TestGateway.withRunning(configure: { configuration in
            configuration.usePostgres(url, dataDirectory: data.path("data"))
            // Long enough that the write still waits when its session is ended.
            configuration.store.deadline = 10_000
        }) { gateway in
            let store = try await TestPostgres.openStore(url: url, secretsDirectory: gateway.configuration.dataDirectory)
            defer { try? store.close() }
            let credentials = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: nil, allowsExemptions: false, now: Date())
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                @Sendable func register(_ token: String) async throws -> GatewayAPIClient.Answer {
                    try await api.putDevice(
                        bundle: Self.bundle, token: token, apiKey: credentials.apiKey,
                        widgets: [["id": "w-scores", "kind": "scores", "family": "systemSmall"]]
                    )
                }
                let first = try await register(Self.token)
                try #require(first.status == 200, "\(first.body)")

                // Writes to the device table wait; reads of it (the gateway's look-ups) do not.
                let location = try PostgresLocation(url: url)
                let lockerLogger = Logger(label: "locker")
                let locker = try await PostgresConnection.connect(
                    configuration: try location.connectionConfiguration(), id: 1, logger: lockerLogger
                )
                try await locker.query("BEGIN", logger: lockerLogger)
                try await locker.query("LOCK TABLE device IN EXCLUSIVE MODE", logger: lockerLogger)

                let newToken = String(repeating: "e6", count: 32)
                async let answer = register(newToken)
                let waited = try await eventually(within: .seconds(10)) {
                    try await Self.someSessionWaits(for: locker, logger: lockerLogger)
                }
                #expect(waited, "no session of the gateway waited for the lock: the registration did not reach its write")
                try await locker.query("SELECT pg_stat_clear_snapshot()", logger: lockerLogger)
                try await locker.query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))",
                    logger: lockerLogger
                )
                let refused = try await answer
                #expect(refused.status == 503, "\(refused.body)")
                #expect(refused.json["code"] as? String == "store-unavailable", "\(refused.body)")
                #expect(try await api.waitForReadiness(503, within: .seconds(30)), "/ready did not say 503 while the gateway could not commit")

                try await locker.query("ROLLBACK", logger: lockerLogger)
                try await locker.close()
                #expect(try await store.devices(bundle: Self.bundle, token: newToken, limit: 10).isEmpty, "the refused registration was stored")
                #expect(try await api.waitForReadiness(200, within: .seconds(30)), "the gateway did not become ready again within 30 s of the lock's end")
                let again = try await register(newToken)
                #expect(again.status == 200, "\(again.body)")
                #expect(try await store.devices(bundle: Self.bundle, token: newToken, limit: 10).count == 1)
            }
        }
    }

    /// Whether another session waits for a lock `connection` holds. Its transaction is open, so the
    /// server's list of sessions is first cleared: within a transaction PostgreSQL answers every read of
    /// `pg_stat_activity` from the list it took at the first one, and a session opened since (a gateway's
    /// new pool connection) would never be seen waiting.
    static func someSessionWaits(for connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await connection.query("SELECT pg_stat_clear_snapshot()", logger: logger)
        let rows = try await connection.query(
            "SELECT count(*)::bigint FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))", logger: logger
        )
        var waiting = false
        for try await count in rows.decode(Int64.self) { waiting = count > 0 }
        return waiting
    }

    /// One line for each other session of `connection`'s database and the cluster's count of sessions:
    /// its state, what it waits for, for how long its statement has run, and the statement's start
    /// (the server's list read afresh, as in ``someSessionWaits(for:logger:)``).
    static func sessions(seenBy connection: PostgresConnection, logger: Logger) async throws -> String {
        try await connection.query("SELECT pg_stat_clear_snapshot()", logger: logger)
        let rows = try await connection.query(
            """
            SELECT pid::bigint, coalesce(state, ''), coalesce(wait_event_type || '/' || wait_event, ''),
                   coalesce(extract(epoch FROM clock_timestamp() - query_start)::float8, 0), left(coalesce(query, ''), 80),
                   (SELECT count(*)::bigint FROM pg_stat_activity WHERE backend_type = 'client backend')
            FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
            """,
            logger: logger
        )
        var lines: [String] = []
        var total: Int64 = 0
        for try await (pid, state, wait, seconds, query, all) in rows.decode((Int64, String, String, Double, String, Int64).self) {
            lines.append("\(pid) \(state) waiting=\(wait) for=\(Int(seconds))s: \(query)")
            total = all
        }
        return "\(lines.count) (of \(total) in the cluster): " + lines.joined(separator: " | ")
    }
}
