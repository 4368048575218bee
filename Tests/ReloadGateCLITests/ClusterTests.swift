import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOSSL
import ReloadGateCore
import ReloadGateStore
import ReloadGateMockAPNs
import ReloadGateTesting
import Synchronization
import Testing

/// Several `reloadgate serve` processes on one PostgreSQL database (docs/DESIGN.md, scale-out), delivering to
/// the mock APNs: any gateway accepts any request, each device is scheduled by the gateway holding its
/// partition's lease, a killed gateway's partitions are taken over, and a paused one sends nothing for
/// partitions it lost.
///
/// They run with the other PostgreSQL cases (`RG_TEST_POSTGRES_URL`), one after the other, within 5 minutes each.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .serialized, .heavy)
struct ClusterTests {
    static let bundle = "com.example.cluster"
    /// Short rules, so that the test sees several reloads per device: one per 2 s at most.
    static let scheduling = [
        "RELOADGATE_SCHEDULING_MINIMUM_INTERVAL": "2", "RELOADGATE_SCHEDULING_DAILY_BUDGET": "10000",
        "RELOADGATE_SCHEDULING_BURST": "1000", "RELOADGATE_SCHEDULING_COALESCING_WINDOW": "0",
        "RELOADGATE_SCHEDULING_ABSORB_WINDOW": "0", "RELOADGATE_SCHEDULING_LOW_PRIORITY_DELAY": "3",
    ]

    /// One gateway process: its directory, its API and APNs listener ports.
    struct Member: Sendable {
        var process: ReloadGateProcess
        /// The gateway's working directory (its certs/, data/).
        var directory: String
        var apiPort: Int
        var ingressPort: Int
    }

    /// The shared parts: the database, the mock APNs, the app and the sender's provider key.
    struct Setup: Sendable {
        var root: TemporaryDirectory
        var url: String
        var mock: MockAPNsServer
        var environment: [String: String]
        var apiKey: String
        var secret: String
        var sender: ProviderTokenFactory
        var store: PostgresStore
    }

    static func setUp(_ root: TemporaryDirectory) async throws -> Setup {
        let url = try await TestPostgres.newDatabase()
        let pki = try TestPKI(in: root)
        let keyFile = root.path("AuthKey.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "CLUSTERK01", teamID: "CLUSTERT01")
        let environment = mock.upstreamEnvironment(keyFile: keyFile, caFile: pki.caCertificatePath).merging([
            "RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0", "RELOADGATE_STORE_KIND": "postgres",
            "RELOADGATE_STORE_URL": url, "RELOADGATE_UPSTREAM_MAX_CONCURRENT_REQUESTS": "16",
        ]) { $1 }.merging(scheduling) { $1 }
        // The app and the sender's key, written by a store handle (which creates secrets.key, shared by
        // every gateway of the database).
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: root.path("g0/data"))
        let sender = ProviderTokenFactory(keyID: "CLSENDER01", teamID: "CLTEAM0001")
        let credentials = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: sender.teamID, allowsExemptions: false, now: Date())
        try await store.addProviderKey(
            StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
        )
        return Setup(
            root: root, url: url, mock: mock, environment: environment, apiKey: credentials.apiKey,
            secret: credentials.webhookSecret, sender: sender, store: store
        )
    }

    /// Starts gateway `index` in its own directory (with the shared secrets.key).
    static func start(_ index: Int, _ setup: Setup) async throws -> Member {
        let directory = setup.root.path("g\(index)")
        if index > 0 {
            try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: setup.root.path("g0/data/secrets.key"), toPath: directory + "/data/secrets.key")
        }
        let process = try ReloadGateProcess(["serve"], in: URL(fileURLWithPath: directory), environment: setup.environment)
        let api = try await process.waitForOutputLine(containing: "listening on")
        let apns = try await process.waitForOutputLine(containing: "APNs pushes to")
        let apiMatch = try #require(api.firstMatch(of: /:(\d+) \(TLS/))
        let apnsMatch = try #require(apns.firstMatch(of: /:(\d+)\/3\/device/))
        let apiPort = try #require(Int(apiMatch.1))
        let ingressPort = try #require(Int(apnsMatch.1))
        return Member(process: process, directory: directory, apiPort: apiPort, ingressPort: ingressPort)
    }

    static func withAPI<T: Sendable>(_ member: Member, _ body: (GatewayAPIClient) async throws -> T) async throws -> T {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(member.directory + "/certs/ca.pem"))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls, timeout: .init(connect: .seconds(5), read: .seconds(30))))
        do {
            let result = try await body(GatewayAPIClient(client: client, baseURL: "https://localhost:\(member.apiPort)"))
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// A push through `member`'s APNs listener; its status, `reloadgate-decision` and apns-id.
    static func push(_ token: String, to member: Member, _ setup: Setup) async throws -> (status: Int, decision: String?, apnsID: String) {
        let apnsID = UUID().uuidString.lowercased()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(member.directory + "/certs/ca.pem"))
        let client = try await RawHTTP2Client.connect(port: member.ingressPort, tls: tls)
        defer { Task { await client.close() } }
        let answer = try await client.send(
            RawHTTP2Client.push(token: token, [
                ("authorization", "bearer \(setup.sender.token())"), ("apns-topic", "\(Self.bundle).push-type.widgets"),
                ("apns-push-type", "widgets"), ("apns-id", apnsID),
            ]),
            body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
        )
        return (answer.status, answer.header("reloadgate-decision"), apnsID)
    }

    /// What the senders of the kill test share: the gateways alive, and what was acknowledged.
    final class Load: Sendable {
        private struct State {
            var alive: [Member]
            var stopped = false
            var killed = false
            var acknowledged: [Int64] = []
            var forwarded = 0
            var refused = 0
            var afterKill = 0
            /// Acknowledged requests by device index.
            var byDevice: [Int: Int] = [:]
        }

        private let state: Mutex<State>

        init(members: [Member]) { state = Mutex(State(alive: members)) }

        /// The last member was killed: requests go to the others from now on.
        func killed() { state.withLock { $0.alive.removeLast(); $0.killed = true } }
        func stop() { state.withLock { $0.stopped = true } }
        var isStopped: Bool { state.withLock { $0.stopped } }
        func member(_ n: Int) -> Member { state.withLock { $0.alive[n % $0.alive.count] } }
        func acknowledge(_ ids: [Int64], forwarded: Bool, device: Int) {
            state.withLock { state in
                state.acknowledged += ids
                if forwarded { state.forwarded += 1 }
                if state.killed { state.afterKill += ids.count }
                state.byDevice[device, default: 0] += 1
            }
        }
        /// How many devices had at least `count` requests acknowledged.
        func devices(acknowledgedAtLeast count: Int) -> Int { state.withLock { $0.byDevice.values.filter { $0 >= count }.count } }
        func refuse() { state.withLock { $0.refused += 1 } }
        var results: (acknowledged: [Int64], forwarded: Int, refused: Int) {
            state.withLock { ($0.acknowledged, $0.forwarded, $0.refused) }
        }
        var acknowledgedAfterKill: Int { state.withLock { $0.afterKill } }
    }

    /// One sender of the kill test: pushes and webhook calls in turn, to the gateways alive in turn,
    /// each to the next device, until stopped. A refused or unanswered request (the killed gateway's) is
    /// counted; an acknowledged one must have its committed request row.
    static func send(from sender: Int, devices: Int, _ load: Load, _ setup: Setup) async throws {
        var n = sender
        while !load.isStopped {
            n += 1
            let index = (n * 7 + sender) % devices
            let member = load.member(n)
            do {
                if n % 2 == 0 {
                    let answer = try await Self.push(Self.token(index), to: member, setup)
                    guard answer.status == 200 else { load.refuse(); continue }
                    let ids = try await setup.store.requests(apnsID: answer.apnsID)
                    #expect(ids.count == 1, "an acknowledged push has no committed request row")
                    load.acknowledge(ids, forwarded: answer.decision == "forwarded", device: index)
                } else {
                    let answer = try await Self.withAPI(member) { api in
                        try await api.reload(bundle: Self.bundle, body: #"{"devices":["\#(Self.token(index))"]}"#, secret: setup.secret)
                    }
                    guard answer.status == 202, let id = answer.json["requestId"] as? Int else { load.refuse(); continue }
                    load.acknowledge([Int64(id)], forwarded: (answer.json["decisions"] as? [String: Int])?["forwarded"] == 1, device: index)
                }
            } catch {
                load.refuse()
            }
        }
    }

    /// The member whose log names gateway `id` ("cluster joined").
    static func member(_ id: String, in members: [Member]) -> Int? {
        members.firstIndex { $0.process.standardError.contains(id) || $0.process.standardOutput.contains(id) }
    }

    /// The gateway holding the lease of device `device`'s partition now.
    static func owner(ofDevice device: Int64, _ store: PostgresStore) async throws -> String? {
        try await store.partitionLeases()[DevicePartition.of(device: device)].owner
    }

    static func token(_ index: Int) -> String { String(format: "%04x", index) + String(repeating: "c", count: 60) }

    /// Waits until the leases are shared by exactly `gateways` live gateways holding all 1,024 partitions.
    static func waitForBalance(_ store: PostgresStore, gateways: Int, within: Duration) async throws -> Duration? {
        let started = ContinuousClock.now
        while started.duration(to: .now) < within {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let leases = try await store.partitionLeases()
            let owners = Set(leases.compactMap { $0.expiresAt > now ? $0.owner : nil })
            let live = try await store.clusterGateways(within: 5000)
            if owners.count == gateways, leases.allSatisfy({ $0.owner != nil && $0.expiresAt > now }),
                live.filter({ $0.partitions > 0 }).count == gateways
            {
                return started.duration(to: .now)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    @Test func threeGatewaysShareTheWorkAndAKilledOnesPartitionsAreTakenOver() async throws {
        let root = try TemporaryDirectory("cluster")
        defer { root.remove() }
        let setup = try await Self.setUp(root)
        defer { try? setup.store.close() }
        defer { Task { await setup.mock.stop() } }
        var members: [Member] = []
        for index in 0..<3 { members.append(try await Self.start(index, setup)) }
        defer { for member in members { member.process.send(SIGKILL) } }
        let balanced = try await Self.waitForBalance(setup.store, gateways: 3, within: .seconds(30))
        try #require(balanced != nil, "three gateways did not share the partitions within 30 s")

        // Devices registered round-robin: device ids 1..., one partition each.
        let devices = 24
        for index in 0..<devices {
            let answer = try await Self.withAPI(members[index % 3]) { api in
                try await api.putDevice(bundle: Self.bundle, token: Self.token(index), apiKey: setup.apiKey, widgets: [["id": "w", "kind": "news", "family": "systemSmall"]])
            }
            try #require(answer.status == 200, "\(answer.body)")
        }
        // Pushes and webhook calls from four senders at once, round-robin over the gateways alive, each
        // device through all three; the gateway scheduling devices 1 to 24 (partitions 1 to 24, one
        // gateway's share) is killed (SIGKILL) in the middle of it, with requests in flight.
        let ownerID = try #require(try await Self.owner(ofDevice: 1, setup.store))
        let victim = try #require(Self.member(ownerID, in: members), "no gateway logged the id \(ownerID)")
        members.swapAt(victim, 2)
        let victimPartitions = try await setup.store.partitionLeases().filter { $0.owner == ownerID }.map(\.partition)
        let load = Load(members: members)
        let senders = Task {
            try await withThrowingDiscardingTaskGroup { group in
                for sender in 0..<4 {
                    group.addTask { try await Self.send(from: sender, devices: devices, load, setup) }
                }
            }
        }
        try await Task.sleep(for: .seconds(3))
        members[2].process.send(SIGKILL)
        let killedAt = Int64(Date().timeIntervalSince1970 * 1000)
        load.killed()
        _ = try await members[2].process.waitForExit()
        try await Task.sleep(for: .seconds(8))
        // A machine starved by the rest of the suite let 26 requests through in those 11 s (another run,
        // 95-423), too few to reach every device: the load goes on until every device has had three
        // requests acknowledged (a minute more at most), so that each device's deliveries are checked.
        let longer = ContinuousClock.now
        while load.devices(acknowledgedAtLeast: 3) < devices, longer.duration(to: .now) < .seconds(60) {
            try await Task.sleep(for: .milliseconds(200))
        }
        load.stop()
        try await senders.value
        let (acknowledged, forwardedAnswers, refused) = load.results
        #expect(forwardedAnswers > 0, "no request was forwarded: the test proved nothing about forwarding")
        #expect(load.acknowledgedAfterKill > 0, "no request was acknowledged after the kill")
        let takeover = try await Self.waitForBalance(setup.store, gateways: 2, within: .seconds(30))
        try #require(takeover != nil, "the killed gateway's partitions were not taken over within 30 s")
        // When its partitions were owned again, by the database's clock (the same machine's).
        let retaken = try await setup.store.partitionLeases().filter { victimPartitions.contains($0.partition) }
        let takenWithin = (retaken.compactMap(\.acquiredAt).max() ?? 0) - killedAt
        #expect(retaken.allSatisfy { $0.owner != ownerID })
        #expect(takenWithin < 5_000 + 3_000, "partitions owned again \(takenWithin) ms after the kill (lease 5 s)")

        // Everything due is delivered: no pending reload, no delivery left pending or sending.
        let settled = try await eventually(every: .milliseconds(100)) {
            let counts = try await setup.store.ledgerCounts()
            let unfinished = try await setup.store.deliveries(in: [.pending, .sending])
            return counts.pendingReloads == 0 && unfinished.isEmpty
        }
        #expect(settled, "reloads or deliveries were still pending 60 s after the last request")

        // Every acknowledged request has its owner's decision (a forwarded one has one after `forwarded`).
        for id in acknowledged {
            let record = try #require(try await setup.store.requestRecord(id))
            let kinds = record.decisions.map(\.decision)
            #expect(kinds.contains { $0 != "forwarded" }, "request \(id) has no decision of its owner: \(kinds)")
        }

        // Every device got deliveries, at most one per minimum interval, whichever gateway sent them; a
        // duplicate apns-id at the mock is a delivery that was `sending` when gateway 2 was killed.
        let received = setup.mock.received
        var byDevice: [String: [ContinuousClock.Instant]] = [:]
        var seen: [String: Int] = [:]
        for request in received {
            let apnsID = request.headers["apns-id"]?.lowercased() ?? ""
            seen[apnsID, default: 0] += 1
            if seen[apnsID] == 1 { byDevice[request.deviceToken, default: []].append(request.receivedAt) }
        }
        let duplicates = seen.filter { $0.value > 1 }
        for apnsID in duplicates.keys {
            let delivery = try #require(try await setup.store.delivery(apnsID: apnsID))
            #expect(delivery.delivery.history.unknownOutcomes > 0, "\(apnsID) reached the mock twice without an attempt of unknown outcome")
        }
        #expect(byDevice.count == devices, "devices without a delivery: \(devices - byDevice.count)")
        // The minimum interval holds between the release times the owners committed (arrival times at
        // the mock also carry each send's own delay).
        // How many deliveries a device gets depends on how many requests the machine let through (three
        // a device at least, some of them merged): the check needs pairs, not a number for every device.
        var tooClose: [String] = []
        var pairs = 0
        for index in 0..<devices {
            let released = try await setup.store.recentDeliveries(bundle: Self.bundle, deviceToken: Self.token(index), limit: 100)
                .map(\.delivery.released.milliseconds).sorted()
            #expect(released.count >= 1, "device \(index) got no delivery")
            pairs += max(0, released.count - 1)
            for (a, b) in zip(released, released.dropFirst()) where b - a < 2000 { tooClose.append("device \(index): \(b - a) ms") }
        }
        #expect(pairs >= devices / 2, "only \(pairs) pairs of deliveries to one device: the interval was hardly checked")
        #expect(tooClose.isEmpty, "deliveries to one device released closer than the minimum interval (2 s): \(tooClose)")
        print(
            "cluster: \(acknowledged.count) requests acknowledged (\(forwardedAnswers) forwarded, \(load.acknowledgedAfterKill) after the kill), "
                + "\(refused) refused or unanswered (the killed gateway's), \(received.count) deliveries at the mock, "
                + "\(duplicates.count) duplicates (sending at the kill); partitions of the killed gateway owned again "
                + "\(takenWithin) ms after the kill (lease 5 s)"
        )
        for member in members.prefix(2) { member.process.send(SIGTERM) }
        for member in members.prefix(2) { #expect(try await member.process.waitForExit() == 0) }
    }

    @Test func aPausedGatewaySendsNothingForPartitionsTakenOverMeanwhile() async throws {
        let root = try TemporaryDirectory("cluster-pause")
        defer { root.remove() }
        let setup = try await Self.setUp(root)
        defer { try? setup.store.close() }
        defer { Task { await setup.mock.stop() } }
        let first = try await Self.start(0, setup)
        defer { first.process.send(SIGKILL) }
        let second = try await Self.start(1, setup)
        defer { second.process.send(SIGKILL) }
        try #require(try await Self.waitForBalance(setup.store, gateways: 2, within: .seconds(30)) != nil)

        // Device 1 (the first registered) is in partition 1; its owner is paused.
        let answer0 = try await Self.withAPI(first) { api in
            try await api.putDevice(bundle: Self.bundle, token: Self.token(0), apiKey: setup.apiKey, widgets: [["id": "w", "kind": "news", "family": "systemSmall"]])
        }
        try #require(answer0.status == 200, "\(answer0.body)")
        let ownerID = try #require(try await Self.owner(ofDevice: 1, setup.store))
        let pausedIndex = try #require(Self.member(ownerID, in: [first, second]))
        let (paused, other) = pausedIndex == 0 ? (first, second) : (second, first)
        let index = 0
        // A priority-5 reload through the owner: due in 3 s, while it is stopped.
        let answer = try await Self.withAPI(paused) { api in
            try await api.reload(bundle: Self.bundle, body: #"{"devices":["\#(Self.token(index))"],"priority":5}"#, secret: setup.secret)
        }
        try #require(answer.status == 202, "\(answer.body)")
        #expect((answer.json["decisions"] as? [String: Int])?["deferred"] == 1, "\(answer.body)")
        paused.process.send(SIGSTOP)
        // The other gateway takes the partitions over after the lease time (5 s), loads the pending
        // reload and sends it.
        let takeover = try await Self.waitForBalance(setup.store, gateways: 1, within: .seconds(30))
        try #require(takeover != nil, "the paused gateway's partitions were not taken over")
        var delivered = 0
        _ = try await eventually(every: .milliseconds(50)) {
            delivered = setup.mock.received.filter { $0.deviceToken == Self.token(index) }.count
            return delivered != 0
        }
        #expect(delivered == 1)
        // Woken, the paused gateway's timer finds the reload due: its commit is fenced (another gateway
        // holds the lease now) and its worker holds the lease as run out, so nothing leaves it.
        paused.process.send(SIGCONT)
        try await Task.sleep(for: .seconds(4))
        #expect(setup.mock.received.filter { $0.deviceToken == Self.token(index) }.count == 1)
        let log = paused.process.standardError + paused.process.standardOutput
        #expect(log.contains("lost") || log.contains("taken over"), "\(log.suffix(3000))")
        paused.process.send(SIGTERM)
        other.process.send(SIGTERM)
        #expect(try await other.process.waitForExit() == 0)
    }
}
