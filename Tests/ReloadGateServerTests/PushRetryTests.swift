import Foundation
import Logging
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// A sender's retry of a push, with the first push's `apns-id` for the same app and token, gets the first
/// push's answer and is not decided, charged or delivered again (docs/APNS.md, "A retried apns-id"): on one
/// gateway, across a restart, through either of two gateways on PostgreSQL, and after a commit whose answer
/// the database sent but the gateway never got.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct PushRetryTests {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "e1", count: 32)
    static let other = String(repeating: "e2", count: 32)

    /// The headers a retry must repeat.
    static func decisionHeaders(_ answer: PushAnswer) -> [String] {
        ["reloadgate-decision", "reloadgate-due", "apns-id"].map { "\($0): \(answer.answer.header($0) ?? "-")" }
    }

    /// The gateway's metrics.
    static func scrape(_ gateway: TestGateway) async throws -> PrometheusText {
        PrometheusText(try await gateway.withHTTPClient { client in
            try await GatewayAPIClient(client: client, baseURL: gateway.baseURL).send(.GET, "/metrics")
        }.body)
    }

    /// The outbox lines for `token` (one per delivery).
    static func deliveries(to token: String, in directory: String) -> Int {
        let text = (try? String(contentsOfFile: directory + "/outbox.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.contains(token) }.count
    }

    @Test func aRetriedApnsIDIsAnsweredAgainDecidedOnceAndSurvivesARestart() async throws {
        let directory = try TemporaryDirectory("push-retry")
        defer { directory.remove() }
        let sender = ProviderTokenFactory(keyID: "RETRYKEY01", teamID: "RETRYTEAM1")
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: [Self.token, Self.other])
        }
        let apnsID = UUID().uuidString.lowercased()
        let firstHeaders = try await TestGateway.withRunning(in: directory) { gateway in
            let first = try await gateway.push(Self.token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
            #expect(first.status == 200, "\(first.body)")
            #expect(first.decision == "scheduled")
            #expect(first.answer.header("idempotent-replayed") == nil)
            // The retry, and a retry whose apns-id is in capitals (the same UUID): the first answer, replayed.
            for retryID in [apnsID, apnsID.uppercased()] {
                let retry = try await gateway.push(Self.token, bundle: Self.bundle, sender: sender, apnsID: retryID)
                #expect(retry.status == 200, "\(retry.body)")
                #expect(retry.answer.header("idempotent-replayed") == "true")
                #expect(Self.decisionHeaders(retry).dropLast() == Self.decisionHeaders(first).dropLast())
                #expect(retry.answer.header("apns-id") == retryID)
            }
            // Both retries are counted as answered by their key, not decided.
            let series = try await Self.scrape(gateway)
            #expect(series[#"reloadgate_idempotent_answers_total{outcome="replay"}"#] == 2, "\(series.lines)")
            // The same apns-id for another token is another push: decided (and scheduled: its budget is full).
            let elsewhere = try await gateway.push(Self.other, bundle: Self.bundle, sender: sender, apnsID: apnsID)
            #expect(elsewhere.decision == "scheduled")
            #expect(elsewhere.answer.header("idempotent-replayed") == nil)
            // Pushes without an apns-id are each decided: the second one to the first token waits for the
            // minimum interval (deferred), as any new push would.
            let unnamed = try await gateway.push(Self.token, bundle: Self.bundle, sender: sender, apnsID: nil)
            #expect(unnamed.decision == "deferred")
            #expect(unnamed.answer.header("idempotent-replayed") == nil)

            // One request each for the token and the other token under the apns-id, one delivery each.
            let data = gateway.configuration.dataDirectory
            let store = try SQLiteStore(directory: data, environment: .sandbox, now: Date())
            defer { try? store.close() }
            #expect(try await store.requests(apnsID: apnsID).count == 2)
            // An operator's look-up in capitals finds them too: the stored form is one rule (StoredAPNsID).
            #expect(try await store.requests(apnsID: apnsID.uppercased()).count == 2)
            // Their answers are kept in their request rows, not in the idempotency table.
            #expect(try await store.ledgerCounts().idempotencyKeys == 0)
            _ = try await eventually { Self.deliveries(to: Self.other, in: data) == 1 }
            #expect(Self.deliveries(to: Self.token, in: data) == 1)
            #expect(Self.deliveries(to: Self.other, in: data) == 1)
            return Self.decisionHeaders(first)
        }

        // A new gateway process on the same store: the retry still finds the first answer.
        try await TestGateway.withRunning(in: directory) { gateway in
            let retry = try await gateway.push(Self.token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
            #expect(retry.status == 200, "\(retry.body)")
            #expect(retry.answer.header("idempotent-replayed") == "true")
            #expect(Self.decisionHeaders(retry) == firstHeaders)
            let data = gateway.configuration.dataDirectory
            let store = try SQLiteStore(directory: data, environment: .sandbox, now: Date())
            defer { try? store.close() }
            #expect(try await store.requests(apnsID: apnsID).count == 2)
            try await Task.sleep(for: .milliseconds(500))
            #expect(Self.deliveries(to: Self.token, in: data) == 1)
        }
    }

    /// The SQLite store keeps a push's answer in its own request row, found by an index in memory; with
    /// the index full, answers go to the idempotency table. Either way every retry is answered from the first
    /// answer, before and after a restart (the index rebuilt from the rows, the table read as well).
    @Test func apnsIDsBeyondTheIndexInMemoryGoToTheTableAndEveryRetryIsAnsweredOnce() async throws {
        let directory = try TemporaryDirectory("push-retry-index")
        defer { directory.remove() }
        let sender = ProviderTokenFactory(keyID: "RETRYKEY04", teamID: "RETRYTEAM4")
        let tokens = (0..<4).map { String(format: "%064x", 0xe500 + $0) }
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: tokens)
        }
        let apnsIDs = tokens.map { _ in UUID().uuidString.lowercased() }
        let configure: (inout GatewayConfiguration) -> Void = { $0.ingress.apnsIdsInMemory = 2 }
        let firstAnswers = try await TestGateway.withRunning(in: directory, configure: configure) { gateway in
            var answers: [[String]] = []
            for (token, apnsID) in zip(tokens, apnsIDs) {
                let answer = try await gateway.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                #expect(answer.status == 200, "\(answer.body)")
                #expect(answer.answer.header("idempotent-replayed") == nil)
                answers.append(Self.decisionHeaders(answer))
            }
            // Two answers in their request rows (the index's two places), two in the table.
            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            #expect(try await store.ledgerCounts().idempotencyKeys == 2)
            #expect(try await Self.scrape(gateway)["reloadgate_apns_ids_in_memory"] == 2)
            for (index, (token, apnsID)) in zip(tokens, apnsIDs).enumerated() {
                let retry = try await gateway.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                #expect(retry.status == 200, "\(retry.body)")
                #expect(retry.answer.header("idempotent-replayed") == "true", "push \(index)")
                #expect(Self.decisionHeaders(retry) == answers[index])
            }
            return answers
        }
        try await TestGateway.withRunning(in: directory, configure: configure) { gateway in
            #expect(try await Self.scrape(gateway)["reloadgate_apns_ids_in_memory"] == 2)
            for (index, (token, apnsID)) in zip(tokens, apnsIDs).enumerated() {
                let retry = try await gateway.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                #expect(retry.status == 200, "\(retry.body)")
                #expect(retry.answer.header("idempotent-replayed") == "true", "push \(index) after the restart")
                #expect(Self.decisionHeaders(retry) == firstAnswers[index])
            }
            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            defer { try? store.close() }
            for apnsID in apnsIDs { #expect(try await store.requests(apnsID: apnsID).count == 1) }
            let data = gateway.configuration.dataDirectory
            _ = try await eventually { tokens.allSatisfy { Self.deliveries(to: $0, in: data) == 1 } }
        }
    }

    /// Two gateways on one database: a retry through the other gateway is answered from the first one's
    /// record; the same apns-id sent to both at once is decided by one of them, and the other answers
    /// `503` (nothing written) or the first answer, so that a sender's retry is answered 200 either way. On a
    /// loaded machine a forwarded push may be refused (its owner did not read the inbox within the
    /// deadline): the sender sends it again, and it is still decided once.
    @Test(.enabled(if: TestPostgres.isEnabled)) func aRetryThroughAnotherGatewayIsAnsweredFromTheFirstOnesRecord() async throws {
        let sender = ProviderTokenFactory(keyID: "RETRYKEY02", teamID: "RETRYTEAM2")
        let tokens = (0..<20).map { String(format: "%064x", 0xe300 + $0) }
        try await TestGateway.withTwoOnPostgres("push-retry-pg", prepare: { store in
            _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: tokens)
        }) { first, second, store, _ in
            let apnsID = UUID().uuidString.lowercased()
            var answer = try await first.push(tokens[0], bundle: Self.bundle, sender: sender, apnsID: apnsID)
            // A 503 wrote nothing (on a loaded machine the device's owner may not read its inbox within the
            // deadline): the sender sends the same push again, as it would to Apple, until it is accepted.
            for _ in 0..<5 where answer.status == 503 {
                try await Task.sleep(for: .milliseconds(500))
                answer = try await first.push(tokens[0], bundle: Self.bundle, sender: sender, apnsID: apnsID)
            }
            #expect(answer.status == 200, "\(answer.body)")
            let retry = try await second.push(tokens[0], bundle: Self.bundle, sender: sender, apnsID: apnsID)
            #expect(retry.status == 200, "\(retry.body)")
            #expect(retry.answer.header("idempotent-replayed") == "true")
            #expect(Self.decisionHeaders(retry) == Self.decisionHeaders(answer))
            #expect(try await store.requests(apnsID: apnsID).count == 1)

            // The same apns-id through both gateways at once, for each of the other tokens.
            for token in tokens.dropFirst() {
                let apnsID = UUID().uuidString.lowercased()
                async let viaFirst = first.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                async let viaSecond = second.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                let answers = try await [viaFirst, viaSecond]
                #expect(answers.allSatisfy { [200, 503].contains($0.status) }, "\(answers.map(\.body))")
                // One of them decided it; or, on a loaded machine, both were refused (the device's owner did
                // not read its inbox within the deadline) and nothing was written.
                var decided = answers.contains { $0.status == 200 && $0.answer.header("idempotent-replayed") == nil }
                if !decided { #expect(answers.allSatisfy { $0.status == 503 }, "\(answers.map(\.body))") }
                // A refused sender retries, as a client does while the gateway answers 503 (the gateway
                // whose commit was refused reloads its state from the database first): the first accepted
                // retry decides it if nothing had, every later one is the first answer again.
                for refused in answers where refused.status != 200 {
                    var again = refused
                    _ = try await eventually(every: .milliseconds(200)) {
                        again = try await second.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                        return again.status != 503
                    }
                    #expect(again.status == 200, "\(again.body)")
                    #expect(again.answer.header("idempotent-replayed") == (decided ? "true" : nil))
                    decided = true
                }
                #expect(try await store.requests(apnsID: apnsID).count == 1, "apns-id \(apnsID) was decided more than once")
            }
        }
    }

    /// The database takes a commit and its answer is lost (a proxy between the gateway and PostgreSQL lets
    /// the gateway's bytes through and swallows the server's from the moment the gateway binds its group
    /// commit statement to run it): the gateway cannot know the outcome, and
    /// answers the pushes of that commit as failed (503, retry). Each push answered as failed is sent again
    /// with its apns-id once the database is reachable: answered 200, and decided once.
    @Test(.enabled(if: TestPostgres.isEnabled)) func aPushWhoseCommitsAnswerWasLostIsAnswered200OnRetryAndDecidedOnce() async throws {
        let url = try await TestPostgres.newDatabase()
        let (proxy, proxied) = try await TCPProxy.inFront(of: url)
        defer { Task { await proxy.stop() } }
        let data = try TemporaryDirectory("push-retry-lost")
        defer { data.remove() }
        let sender = ProviderTokenFactory(keyID: "RETRYKEY03", teamID: "RETRYTEAM3")
        let tokens = (0..<8).map { String(format: "%064x", 0xe400 + $0) }
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: data.path("data"))
        defer { try? store.close() }
        _ = try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: tokens)

        // The product's deadline: a commit unanswered for 5 s is refused as unavailable. The gateway's
        // start writes through the proxy under that deadline too, beside the whole suite on two cores: a
        // start that misses it is begun again; the test is about what follows.
        try await Self.withRunningOnceStarted(attempts: 3, configure: { configuration in
            configuration.usePostgres(proxied, dataDirectory: data.path("data"))
            configuration.store.deadline = 5000
            // Debug level: each service logs its stop, so that a shutdown that does not end names the service
            // that holds it (the swallowed replies leave connections that never answer).
        }, logLevel: .debug) { gateway in
            // Eight senders push one after the other, each to a token of its own, each push with a new
            // apns-id; the partition begins while they do and they stop a few seconds into it.
            struct Sent: Sendable {
                var token: String
                var apnsID: String
                var status: Int?
                /// `reloadgate-outcome` of a refusal.
                var outcome: String?
            }
            final class Phase: Sendable {
                let sending = Atomic<Bool>(true)
                let partitioned = Atomic<Bool>(false)
                /// Pushes answered 200 so far.
                let accepted = Atomic<Int>(0)
            }
            let phase = Phase()
            let partitionBegan = Mutex(ContinuousClock.now)
            let sent = try await withThrowingTaskGroup(of: [Sent].self) { group in
                for token in tokens {
                    group.addTask {
                        var sent: [Sent] = []
                        while phase.sending.load(ordering: .relaxed) {
                            let apnsID = UUID().uuidString.lowercased()
                            let answer = try? await gateway.push(token, bundle: Self.bundle, sender: sender, apnsID: apnsID)
                            let status = answer?.status
                            if status == 200 { phase.accepted.add(1, ordering: .relaxed) }
                            sent.append(Sent(token: token, apnsID: apnsID, status: status, outcome: answer?.answer.header("reloadgate-outcome")))
                            // Once refused, a sender waits for the partition to end before it retries.
                            if phase.partitioned.load(ordering: .relaxed), status != 200 { break }
                        }
                        return sent
                    }
                }
                // The partition begins once the pushes are being committed (a push for each sender
                // answered), however long a crowded machine takes to answer the first.
                let flowing = try await eventually { phase.accepted.load(ordering: .relaxed) >= tokens.count }
                if !flowing { phase.sending.store(false, ordering: .relaxed) }
                try #require(flowing, "no push was answered 200 before the partition")
                // The next group commit reaches the database, which commits it; its answer is lost.
                proxy.swallowReplies(onceClientBinds: "ReloadGateStore.PostgresStore.LedgerStatement")
                partitionBegan.withLock { $0 = .now }
                phase.partitioned.store(true, ordering: .relaxed)
                try await Task.sleep(for: .seconds(2))
                phase.sending.store(false, ordering: .relaxed)
                var all: [Sent] = []
                for try await part in group { all += part }
                return all
            }
            print("PushRetryTests: the senders stopped \(partitionBegan.withLock { $0 }.duration(to: .now)) after the partition began")
            let refused = sent.filter { $0.status != 200 }
            #expect(!refused.isEmpty, "no push was refused: the partition came too late")
            // Before any retry: the refused pushes that were in fact stored (read past the proxy).
            var stored: [String] = []
            for push in refused where try await !store.requests(apnsID: push.apnsID).isEmpty { stored.append(push.apnsID) }
            print("PushRetryTests: \(sent.count) pushes, \(refused.count) refused, \(stored.count) of them stored")
            #expect(!stored.isEmpty, "no refused push was stored: no commit's answer was lost")
            // A refusal says whether the push may have been stored: never "not-stored" for one that was.
            for push in refused where push.status != nil {
                #expect(["unknown", "not-stored"].contains(push.outcome), "\(push)")
                if stored.contains(push.apnsID) { #expect(push.outcome == "unknown", "\(push)") }
            }

            await proxy.heal()
            let healed = ContinuousClock.now
            let recovered = try await gateway.withHTTPClient { client async throws -> Bool in
                try await GatewayAPIClient(client: client, baseURL: gateway.baseURL).waitForReadiness(200, within: .seconds(60))
            }
            #expect(recovered, "the gateway did not recover")
            print("PushRetryTests: ready \(healed.duration(to: .now)) after the partition ended")
            for push in refused {
                var retry = try await gateway.push(push.token, bundle: Self.bundle, sender: sender, apnsID: push.apnsID)
                _ = try await eventually(every: .milliseconds(200)) {
                    guard retry.status != 200 else { return true }
                    retry = try await gateway.push(push.token, bundle: Self.bundle, sender: sender, apnsID: push.apnsID)
                    return false
                }
                #expect(retry.status == 200, "\(retry.body)")
                if stored.contains(push.apnsID) {
                    #expect(retry.answer.header("idempotent-replayed") == "true", "a stored push was decided again")
                }
            }
            print("PushRetryTests: every refused push answered 200 \(healed.duration(to: .now)) after the partition ended")
            for push in sent where push.status == 200 || refused.contains(where: { $0.apnsID == push.apnsID }) {
                #expect(try await store.requests(apnsID: push.apnsID).count == 1, "apns-id \(push.apnsID)")
            }
        }
    }

    /// `TestGateway.withRunning`, its start tried again (up to `attempts` times) when it fails because the
    /// store did not answer in time; `body` runs once, and its own errors are thrown at once.
    static func withRunningOnceStarted(
        attempts: Int,
        configure: @escaping @Sendable (inout GatewayConfiguration) -> Void,
        logLevel: Logger.Level? = nil,
        _ body: @escaping @Sendable (TestGateway) async throws -> Void
    ) async throws {
        for attempt in 1...attempts {
            let began = Atomic<Bool>(false)
            do {
                try await TestGateway.withRunning(configure: configure, logLevel: logLevel) { gateway in
                    began.store(true, ordering: .relaxed)
                    try await body(gateway)
                }
                return
            } catch let error as StoreError where !began.load(ordering: .relaxed) && error.isTransient && attempt < attempts {
                print("PushRetryTests: the gateway's start failed (\(error)); starting it again")
            }
        }
    }
}
