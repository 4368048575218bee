import AsyncHTTPClient
import Foundation
import NIOSSL
import ReloadGateCore
import ReloadGateStore
import ReloadGateMockAPNs
import ReloadGateTesting
import Testing

/// The store a crash test's gateway runs on: SQLite in its data directory, or a PostgreSQL database of the
/// test's own (on CI always; where `RG_TEST_POSTGRES_URL` is set here).
struct CrashStore: Sendable, CustomTestStringConvertible {
    /// The kinds a crash test runs on.
    static let kinds = TestPostgres.isEnabled ? ["sqlite", "postgres"] : ["sqlite"]

    let kind: String
    /// The database's URL, for PostgreSQL.
    let url: String?

    static func make(_ kind: String) async throws -> CrashStore {
        CrashStore(kind: kind, url: kind == "postgres" ? try await TestPostgres.newDatabase() : nil)
    }

    var testDescription: String { kind }

    /// What the gateway's processes (and `reloadgate apps add`) are given to use this store.
    var environment: [String: String] {
        guard let url else { return [:] }
        return ["RELOADGATE_STORE_KIND": "postgres", "RELOADGATE_STORE_URL": url]
    }

    /// A handle on the store of the gateway in `directory` (its secrets key in the data directory).
    func open(_ directory: TemporaryDirectory) async throws -> any GatewayStore {
        if let url { return try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data")) }
        return try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
    }
}

/// Crash safety (docs/DESIGN.md, Durability): the real binary accepts webhook calls, is killed with SIGKILL,
/// and after a restart every acknowledged request's pending reload is found again and delivered, on each
/// store.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct CrashRecoveryTests {
    static let bundle = "com.example.crash"

    /// Starts `reloadgate serve` in `directory` and returns the process and its port.
    static func serve(in directory: TemporaryDirectory, environment: [String: String]) async throws -> (ReloadGateProcess, Int) {
        let process = try ReloadGateProcess(["serve"], in: directory.url, environment: environment)
        let line = try await process.waitForOutputLine(containing: "listening on")
        let match = try #require(line.firstMatch(of: /127\.0\.0\.1:(\d+)/))
        let port = try #require(Int(match.1))
        return (process, port)
    }

    static func withClient<T: Sendable>(_ directory: TemporaryDirectory, port: Int, _ body: (GatewayAPIClient) async throws -> T) async throws -> T {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(directory.path("certs/ca.pem")))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        do {
            let result = try await body(GatewayAPIClient(client: client, baseURL: "https://localhost:\(port)"))
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// The request ids found in the outbox's lines.
    static func deliveredRequests(_ directory: TemporaryDirectory) -> Set<Int> {
        guard let text = try? String(contentsOfFile: directory.path("data/outbox.jsonl"), encoding: .utf8) else { return [] }
        var ids = Set<Int>()
        for line in text.split(separator: "\n") {
            let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            for id in object?["requests"] as? [Int] ?? [] { ids.insert(id) }
        }
        return ids
    }

    @Test(arguments: CrashStore.kinds)
    func everyAcknowledgedRequestIsDeliveredAfterSIGKILLAndRestart(store kind: String) async throws {
        let directory = try TemporaryDirectory("crash")
        defer { directory.remove() }
        let crashStore = try await CrashStore.make(kind)
        let added = try await ReloadGateProcess.run(["apps", "add", Self.bundle, "--json"], in: directory.url, environment: crashStore.environment)
        try #require(added.status == 0, "\(added.stderr)")
        let credentials = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: String])
        let apiKey = try #require(credentials["apiKey"])
        let secret = try #require(credentials["webhookSecret"])

        // Priority 5 waits 15 s: the reloads are still pending when the process is killed. (With 4 s, a
        // CI run on a loaded machine took longer than that to register and call, and every reload had
        // left before the kill.)
        let environment = crashStore.environment.merging(
            ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0", "RELOADGATE_SCHEDULING_LOW_PRIORITY_DELAY": "15"]
        ) { $1 }
        let (first, port) = try await Self.serve(in: directory, environment: environment)
        let tokens = (0..<8).map { String(format: "%02x", $0) + String(repeating: "e", count: 62) }
        let acknowledged = try await Self.withClient(directory, port: port) { api in
            for token in tokens {
                let answer = try await api.putDevice(
                    bundle: Self.bundle,
                    token: token,
                    apiKey: apiKey,
                    widgets: [["id": "w1", "kind": "news", "family": "systemSmall"]]
                )
                try #require(answer.status == 200, "\(answer.body)")
            }
            return try await withThrowingTaskGroup(of: Int?.self) { group in
                for index in 0..<40 {
                    let body = #"{"devices":["\#(tokens[index % tokens.count])"],"priority":5}"#
                    group.addTask {
                        let answer = try await api.reload(bundle: Self.bundle, body: body, secret: secret)
                        return answer.status == 202 ? answer.json["requestId"] as? Int : nil
                    }
                }
                return try await group.reduce(into: Set<Int>()) { if let id = $1 { $0.insert(id) } }
            }
        }
        first.send(SIGKILL)
        _ = try await first.waitForExit()
        #expect(acknowledged.count == 40)
        let deliveredBeforeKill = Self.deliveredRequests(directory)

        // The restarted gateway finds the pending reloads and delivers them when they fall due.
        let (second, _) = try await Self.serve(in: directory, environment: environment)
        var delivered = Set<Int>()
        _ = try await eventually(every: .milliseconds(50)) {
            delivered = Self.deliveredRequests(directory)
            return acknowledged.isSubset(of: delivered)
        }
        #expect(acknowledged.isSubset(of: delivered), "missing: \(acknowledged.subtracting(delivered).sorted())")
        #expect(deliveredBeforeKill.count < acknowledged.count, "the kill came after every delivery; the test proved nothing")
        second.send(SIGTERM)
        #expect(try await second.waitForExit() == 0)

        // Exactly one line a delivery: the outbox's line is the delivery's record, so one written before
        // the kill (its `sent` mark not committed yet) is found at the restart, not written again.
        let apnsIDs = Self.outboxLines(directory).compactMap { $0["apnsId"] as? String }
        #expect(Set(apnsIDs).count == apnsIDs.count, "an apns-id twice in the outbox: \(apnsIDs.sorted())")

        let store = try await crashStore.open(directory)
        defer { try? store.close() }
        #expect(try await store.ledgerCounts().pendingReloads == 0)
        #expect(try await store.deliveries(in: [.pending, .sending]).isEmpty)
        // One attempt each, whether its `sent` was recorded before the kill, found by its line, or written after.
        let sent = try await store.deliveries(in: [.sent])
        #expect(sent.allSatisfy { $0.history.attempts == 1 }, "\(sent.map(\.history.attempts))")
    }

    /// The outbox's lines as objects.
    static func outboxLines(_ directory: TemporaryDirectory) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: directory.path("data/outbox.jsonl"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    /// What a crash left in the store of `directory`: the app, a device of `token` with one widget, and
    /// deliveries to it by apns-id, each in `state`, released `releasedAgo` milliseconds ago.
    static func leftByACrash(
        _ crashStore: CrashStore, in directory: TemporaryDirectory, token: DeviceToken, deliveries apnsIDs: [String],
        state: RecordedDelivery.State, releasedAgo: Int64
    ) async throws {
        let store = try await crashStore.open(directory)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID(Self.bundle), now: Date()).app
        let registration = try await store.putDevice(
            app: app, token: token,
            widgets: [WidgetRegistration(id: "w1", kind: "news", family: .systemSmall, configuration: WidgetConfiguration())],
            previousToken: nil, now: Date()
        )
        let released = Timestamp(milliseconds: Int64(Date().timeIntervalSince1970 * 1000) - releasedAgo)
        var batch = LedgerBatch()
        batch.deliveries = apnsIDs.map { apnsID in
            RecordedDelivery(
                apnsID: apnsID, device: registration.device, released: released, instances: CompactList(registration.instances.map(\.id)),
                requests: [], priority: .high, expiration: nil, state: state
            )
        }
        try await store.commit(batch)
    }

    /// With the outbox no `sending` mark is written: a delivery an earlier run released and left `pending`
    /// is looked up in the outbox at the start. One whose line is there (the crash came after the line's
    /// sync, before its `sent` mark) is marked sent and not written again; one whose line the crash tore
    /// (no newline: never synced, never marked) has it cut back and is written whole.
    @Test(arguments: CrashStore.kinds)
    func aDeliveryLeftPendingIsLookedUpInTheOutboxAndWrittenOnce(store kind: String) async throws {
        let directory = try TemporaryDirectory("crash")
        defer { directory.remove() }
        let crashStore = try await CrashStore.make(kind)
        let token = try DeviceToken(String(repeating: "6b", count: 32))
        let written = "0a0b0c0d-0000-4000-8000-000000000011"
        let notWritten = "0a0b0c0d-0000-4000-8000-000000000012"
        try await Self.leftByACrash(crashStore, in: directory, token: token, deliveries: [written, notWritten], state: .pending, releasedAgo: 60_000)
        // The first delivery's line, whole and synced; the second's torn by the crash (no newline).
        func line(_ apnsID: String) -> String {
            #"{"apnsId":"\#(apnsID)","at":"2026-11-29T12:00:00.000Z","bundle":"\#(Self.bundle)","deviceToken":"\#(token.hex)"}"# + "\n"
        }
        let torn = String(line(notWritten).prefix(40))
        try (line(written) + torn).write(toFile: directory.path("data/outbox.jsonl"), atomically: true, encoding: .utf8)

        let environment = crashStore.environment.merging(["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"]) { $1 }
        let (process, _) = try await Self.serve(in: directory, environment: environment)
        _ = try await eventually(every: .milliseconds(50)) { Self.outboxLines(directory).count >= 2 }
        try await Task.sleep(for: .milliseconds(300))
        process.send(SIGTERM)
        #expect(try await process.waitForExit() == 0)
        // The torn line is cut back; the second delivery has one whole line after the first's.
        let text = try String(contentsOfFile: directory.path("data/outbox.jsonl"), encoding: .utf8)
        #expect(text.hasPrefix(line(written)) && !text.contains(torn + "{"), "the torn line was not cut: \(text)")
        #expect(text.hasSuffix("\n"))
        #expect(Self.outboxLines(directory).compactMap { $0["apnsId"] as? String } == [written, notWritten])
        let store = try await crashStore.open(directory)
        defer { try? store.close() }
        #expect(try await store.deliveries(in: [.pending, .sending]).isEmpty)
        let sent = try await store.deliveries(in: [.sent])
        #expect(sent.map(\.apnsID).sorted() == [written, notWritten])
        // Neither was in doubt: the outbox says which it took. Each counts its one attempt (no `sending`
        // mark counted it: the first's is counted when its line is found, the second's with its outcome).
        #expect(sent.allSatisfy { $0.history.unknownOutcomes == 0 }, "\(sent.map(\.history))")
        #expect(sent.allSatisfy { $0.history.attempts == 1 }, "\(sent.map(\.history))")
    }

    /// A delivery a crash left `sending` (its `sending` mark written, as it was before the outbox kept its
    /// own record, or by a gateway sending to Apple) and without a line is written, with its apns-id.
    @Test(arguments: CrashStore.kinds)
    func aDeliveryLeftSendingIsSentAgainWithItsApnsID(store kind: String) async throws {
        let directory = try TemporaryDirectory("crash")
        defer { directory.remove() }
        let crashStore = try await CrashStore.make(kind)
        let token = try DeviceToken(String(repeating: "5a", count: 32))
        try await Self.leftByACrash(
            crashStore, in: directory, token: token, deliveries: ["0a0b0c0d-0000-4000-8000-000000000001"], state: .sending, releasedAgo: 0
        )
        let environment = crashStore.environment.merging(["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"]) { $1 }
        let (process, _) = try await Self.serve(in: directory, environment: environment)
        var text = ""
        _ = try await eventually(every: .milliseconds(50)) {
            text = (try? String(contentsOfFile: directory.path("data/outbox.jsonl"), encoding: .utf8)) ?? ""
            return text.contains("0a0b0c0d-0000-4000-8000-000000000001")
        }
        #expect(text.contains(#""apnsId":"0a0b0c0d-0000-4000-8000-000000000001""#))
        #expect(text.contains(token.hex))
        process.send(SIGTERM)
        #expect(try await process.waitForExit() == 0)
    }
}

/// A SIGKILL in the middle of deliveries to Apple (the mock, answering slowly) loses none of them: after
/// the restart every delivery is sent, and only those whose request was in flight at the kill (marked
/// `sending`, counted as an unknown outcome) can reach Apple twice. On each store.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct DeliveryCrashTests {
    static let bundle = "com.example.crashapns"

    @Test(arguments: CrashStore.kinds)
    func aSIGKILLInTheMiddleOfDeliveriesToAppleLosesNone(store kind: String) async throws {
        let directory = try TemporaryDirectory("crash-apns")
        defer { directory.remove() }
        let crashStore = try await CrashStore.make(kind)
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "CRASHKEY01", teamID: "CRASHTEAM1")
        defer { Task { await mock.stop() } }

        let added = try await ReloadGateProcess.run(["apps", "add", Self.bundle, "--json"], in: directory.url, environment: crashStore.environment)
        try #require(added.status == 0, "\(added.stderr)")
        let credentials = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: String])
        let environment = mock.upstreamEnvironment(keyFile: keyFile, caFile: pki.caCertificatePath).merging(crashStore.environment) { $1 }.merging([
            "RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0", "RELOADGATE_UPSTREAM_MAX_CONCURRENT_REQUESTS": "16",
        ]) { $1 }
        let deviceCount = 120
        let (first, port) = try await CrashRecoveryTests.serve(in: directory, environment: environment)
        // Slow answers, and the mock kills the gateway when the 24th request arrives: requests are in
        // flight at that moment (that one at least), whatever the machine's load.
        let arrivals = SharedCounter()
        mock.answer { _ in
            if arrivals.next() == 23 { first.send(SIGKILL) }
            return .delayed(.milliseconds(300), .status(200))
        }
        try await CrashRecoveryTests.withClient(directory, port: port) { api in
            for index in 0..<deviceCount {
                let answer = try await api.putDevice(
                    bundle: Self.bundle,
                    token: String(format: "%04x", index) + String(repeating: "a", count: 60),
                    apiKey: try #require(credentials["apiKey"]),
                    widgets: [["id": "w", "kind": "news", "family": "systemSmall"]]
                )
                try #require(answer.status == 200, "\(answer.body)")
            }
            let answer = try await api.reload(bundle: Self.bundle, body: #"{"kind":"news"}"#, secret: try #require(credentials["webhookSecret"]))
            try #require(answer.status == 202, "\(answer.body)")
        }
        _ = try await first.waitForExit()
        let receivedBeforeKill = mock.received.count
        #expect(receivedBeforeKill < deviceCount, "the kill came after every delivery; the test proved nothing")

        // The restarted gateway sends what was pending or in flight; the mock now answers at once.
        mock.answer { _ in .status(200) }
        let (second, _) = try await CrashRecoveryTests.serve(in: directory, environment: environment)
        let store = try await crashStore.open(directory)
        defer { try? store.close() }
        var sent: [RecordedDelivery] = []
        for _ in 0..<600 {
            sent = try await store.deliveries(in: [.sent])
            if sent.count >= deviceCount { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        second.send(SIGTERM)
        #expect(try await second.waitForExit() == 0)

        #expect(sent.count == deviceCount)
        #expect(try await store.deliveries(in: [.pending, .sending, .failed]).isEmpty)
        // None lost: Apple got every delivery's apns-id, for a device of this test.
        var timesReceived: [String: Int] = [:]
        for request in mock.received { timesReceived[request.headers["apns-id"] ?? "?", default: 0] += 1 }
        #expect(sent.allSatisfy { timesReceived[$0.apnsID, default: 0] >= 1 })
        // Twice only when the first attempt was in flight at the kill (counted as unknown).
        let twice = sent.filter { timesReceived[$0.apnsID, default: 0] > 1 }
        #expect(twice.allSatisfy { $0.history.unknownOutcomes > 0 })
        #expect(!twice.isEmpty, "no request was in flight at the kill; the test proved nothing")
        print("crash (\(kind)): \(receivedBeforeKill) requests before the kill, \(twice.count) deliveries sent twice (in flight at the kill), \(sent.count) sent")
    }
}
