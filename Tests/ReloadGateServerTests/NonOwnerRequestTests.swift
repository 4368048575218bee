import AsyncHTTPClient
import Foundation
import Logging
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Two gateways on one database, each scheduling half of the devices: a request taken by the gateway
/// that does not schedule its device comes out as if the owner had taken it. A push for a device nobody
/// has seen yet is the hard case: the gateway that takes it adopts the device, and the owner must know it
/// before it decides the forwarded push (it used to decide `no-match` and send nothing).
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct NonOwnerRequestTests {
    static let bundle = "com.example.scores"

    struct Pair: Sendable {
        var first: TestGateway
        var second: TestGateway
        var store: PostgresStore
        var credentials: AppCredentials
        var sender: ProviderTokenFactory
    }

    /// Two gateways on a new database, sharing the partitions (each holds some), with an app and a sender's key.
    func withTwoGateways(_ body: @Sendable (Pair) async throws -> Void) async throws {
        let sender = ProviderTokenFactory(keyID: "NONOWNER01", teamID: "NONOWNTEAM")
        try await TestGateway.withTwoOnPostgres("non-owner", prepare: { store in
            try await store.addTestSender(bundle: Self.bundle, sender: sender, devices: [])
        }) { first, second, store, credentials in
            try await body(Pair(first: first, second: second, store: store, credentials: credentials, sender: sender))
        }
    }

    /// Sends again while the gateway refuses with 503, as a client does: under a loaded machine a
    /// gateway whose heartbeat came late loses its leases to the other, and refuses the requests of the
    /// commit it was making (nothing written, "retry"; CI saw it once). At most about ten seconds.
    static func retryingRefusals<Answer>(_ status: (Answer) -> Int, _ send: () async throws -> Answer) async throws -> Answer {
        var answer = try await send()
        _ = try await eventually(every: .milliseconds(200)) {
            guard status(answer) == 503 else { return true }
            answer = try await send()
            return false
        }
        return answer
    }

    /// The decisions of the requests of `apnsID`, in order.
    static func decisions(_ apnsID: String, in store: PostgresStore) async throws -> [String] {
        var kinds: [String] = []
        for id in try await store.requests(apnsID: apnsID) {
            kinds += try await store.requestRecord(id)?.decisions.map(\.decision) ?? []
        }
        return kinds
    }

    @Test func pushesForUnknownDevicesAndWebhookCallsThroughEitherGatewayAreDecidedByTheOwner() async throws {
        try await withTwoGateways { pair in
            let (first, second, store, credentials, sender) = (pair.first, pair.second, pair.store, pair.credentials, pair.sender)
                // Unknown devices pushed through each gateway: about half of them are another's to schedule.
            var accepted: [(apnsID: String, decision: String?)] = []
            for gateway in [first, second] {
                for _ in 0..<16 {
                    let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
                    let answer = try await Self.retryingRefusals(\.status) { try await gateway.push(token, bundle: Self.bundle, sender: sender) }
                    #expect(answer.status == 200, "\(answer.body)")
                    accepted.append((answer.apnsID, answer.decision))
                }
            }
            #expect(accepted.contains { $0.decision == "forwarded" }, "no push reached a gateway that does not own its device")

            // A webhook call through each gateway reaches every device, whoever schedules it.
            try await second.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: second.baseURL)
                let call = try await Self.retryingRefusals(\.status) {
                    try await api.reload(bundle: Self.bundle, body: #"{"priority":5}"#, secret: credentials.webhookSecret)
                }
                #expect(call.status == 202, "\(call.body)")
            }

            // Every push ends in the owner's `scheduled` decision; none in `no-match`.
            var outcomes: [String: [String]] = [:]
            for _ in 0..<200 {
                outcomes = [:]
                for push in accepted {
                    for id in try await store.requests(apnsID: push.apnsID) {
                        outcomes[push.apnsID, default: []] += try await store.requestRecord(id)?.decisions.map(\.decision) ?? []
                    }
                }
                if accepted.allSatisfy({ outcomes[$0.apnsID]?.contains("scheduled") == true }) { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            for push in accepted {
                #expect(outcomes[push.apnsID]?.contains("scheduled") == true, "\(push.apnsID): \(outcomes[push.apnsID] ?? [])")
                #expect(outcomes[push.apnsID]?.contains("no-match") != true, "\(push.apnsID): \(outcomes[push.apnsID] ?? [])")
            }
            // The webhook call found all 32 adopted devices (merged into their pending reloads).
            let pending = try await store.pendingReloads(PendingFilter())
            #expect(pending.count == 32, "\(pending.count) pending reloads")
        }
    }

    /// A registration through one gateway reaches the other's push path, which keeps what its last push
    /// of a device read: the registering gateway's notice names the tokens, and the other forgets those
    /// (decision 0121). The notice arrives after the registration's answer (decision 0032): each step
    /// pushes until the other gateway has it, for a few seconds.
    @Test func aRegistrationThroughOneGatewayChangesWhatTheOthersPushesFind() async throws {
        try await withTwoGateways { pair in
            let (first, second, store, credentials, sender) = (pair.first, pair.second, pair.store, pair.credentials, pair.sender)
            let token = String(repeating: "5c", count: 32)
            /// The decisions of a push through the first gateway, once decided (by the owner, if it forwarded the push).
            func decidedPush() async throws -> [String] {
                let answer = try await Self.retryingRefusals(\.status) { try await first.push(token, bundle: Self.bundle, sender: sender) }
                try #require(answer.status == 200, "\(answer.body)")
                var decisions: [String] = []
                _ = try await eventually(within: .seconds(10), every: .milliseconds(50)) {
                    decisions = try await Self.decisions(answer.apnsID, in: store)
                    return decisions.contains { $0 != "forwarded" }
                }
                return decisions
            }
            try await second.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: second.baseURL)
                func register(_ token: String, widget: String, previousToken: String? = nil) async throws {
                    let answer = try await Self.retryingRefusals(\.status) {
                        try await api.putDevice(
                            bundle: Self.bundle, token: token, apiKey: credentials.apiKey,
                            widgets: [["id": widget, "kind": widget, "family": "systemSmall", "configuration": [String: Any]()]],
                            previousToken: previousToken
                        )
                    }
                    try #require(answer.status == 200, "\(answer.body)")
                }
                try await register(token, widget: "scores")
                // Twice: the second push finds what the first kept.
                for _ in 0..<2 {
                    #expect(try await decidedPush().contains { ["scheduled", "merged", "deferred"].contains($0) })
                }

                // The device's one widget is now `weather`: a push reloads it (decided `scheduled`, as a new
                // widget's first reload), not the gone `scores` (`no-match`).
                try await register(token, widget: "weather")
                var decisions: [String] = []
                let found = try await eventually(within: .seconds(10), every: .milliseconds(200)) {
                    decisions = try await decidedPush()
                    return decisions.contains("scheduled")
                }
                #expect(found, "the last push was decided \(decisions)")

                // A new token replaces the device's: the first gateway answers Unregistered for the old one.
                try await register(String(repeating: "5d", count: 32), widget: "weather", previousToken: token)
                var status = 0
                _ = try await eventually(within: .seconds(10), every: .milliseconds(200)) {
                    status = try await first.push(token, bundle: Self.bundle, sender: sender).status
                    return status == 410
                }
                #expect(status == 410)
            }
        }
    }

    /// Controls (issue 29) on two gateways: control tokens registered through one gateway and pushed through
    /// the other, and unknown control tokens adopted through either, are decided by their owner and each
    /// delivered once, as a controls push.
    @Test func controlsThroughEitherGatewayAreDecidedByTheOwnerAndDeliveredOnceAsControls() async throws {
        try await withTwoGateways { pair in
            let (first, second, store, credentials, sender) = (pair.first, pair.second, pair.store, pair.credentials, pair.sender)
            func token() -> String { (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }
            let registered = (0..<8).map { _ in token() }
            try await first.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: first.baseURL)
                for control in registered {
                    let answer = try await Self.retryingRefusals(\.status) {
                        try await api.putControl(bundle: Self.bundle, token: control, apiKey: credentials.apiKey, kind: "garage")
                    }
                    #expect(answer.status == 200, "\(answer.body)")
                }
            }
            var accepted: [(token: String, apnsID: String, decision: String?)] = []
            for control in registered {
                let answer = try await Self.retryingRefusals(\.status) { try await second.push(control, bundle: Self.bundle, sender: sender, pushType: .controls) }
                #expect(answer.status == 200, "\(answer.body)")
                accepted.append((control, answer.apnsID, answer.decision))
            }
            for gateway in [first, second] {
                for _ in 0..<4 {
                    let control = token()
                    let answer = try await Self.retryingRefusals(\.status) { try await gateway.push(control, bundle: Self.bundle, sender: sender, pushType: .controls) }
                    #expect(answer.status == 200, "\(answer.body)")
                    accepted.append((control, answer.apnsID, answer.decision))
                }
            }
            #expect(accepted.contains { $0.decision == "forwarded" }, "no controls push reached a gateway that does not own its token")
            var outcomes: [String: [String]] = [:]
            for _ in 0..<200 {
                outcomes = [:]
                for push in accepted { outcomes[push.apnsID] = try await Self.decisions(push.apnsID, in: store) }
                if accepted.allSatisfy({ outcomes[$0.apnsID]?.contains("scheduled") == true }) { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            for push in accepted {
                #expect(outcomes[push.apnsID]?.contains("scheduled") == true, "\(push.apnsID): \(outcomes[push.apnsID] ?? [])")
            }
            // Each control's delivery is in one gateway's outbox, once, as a controls push.
            var lines: [[String: Any]] = []
            for _ in 0..<200 {
                lines = []
                for gateway in [first, second] {
                    let text = (try? String(contentsOfFile: gateway.configuration.dataDirectory + "/outbox.jsonl", encoding: .utf8)) ?? ""
                    lines += text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                }
                if lines.count >= accepted.count { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(lines.count == accepted.count, "\(lines.count) outbox lines for \(accepted.count) controls")
            #expect(Set(lines.compactMap { $0["deviceToken"] as? String }) == Set(accepted.map(\.token)))
            #expect(lines.allSatisfy { $0["pushType"] as? String == "controls" && $0["topic"] as? String == "\(Self.bundle).push-type.controls" })
        }
    }

    /// Devices registered through one gateway, pushed through the other, then cancelled or flushed through
    /// the admin API of either: each comes out as the owner would have done it.
    @Test func registryWritesCancelAndFlushThroughEitherGatewayReachTheOwner() async throws {
        try await withTwoGateways { pair in
            let (first, second, store, credentials, sender) = (pair.first, pair.second, pair.store, pair.credentials, pair.sender)
            let tokens = (0..<12).map { index in String(format: "%02x", index) + String(repeating: "7a", count: 31) }
            try await second.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: second.baseURL)
                for token in tokens {
                    let registered = try await Self.retryingRefusals(\.status) {
                        try await api.putDevice(
                            bundle: Self.bundle, token: token, apiKey: credentials.apiKey,
                            widgets: [["id": "w1", "kind": "scores", "family": "systemSmall", "configuration": ["team": "42"]]]
                        )
                    }
                    #expect(registered.status == 200, "\(registered.body)")
                }
            }
            // Low priority: each waits 5 minutes in a pending reload of its owner.
            var pushed: [(token: String, apnsID: String)] = []
            for token in tokens {
                let answer = try await Self.retryingRefusals(\.status) { try await first.push(token, bundle: Self.bundle, sender: sender, priority: 5) }
                #expect(answer.status == 200, "\(answer.body)")
                pushed.append((token, answer.apnsID))
            }
            var pending: [PendingReloadRow] = []
            _ = try await eventually(every: .milliseconds(100)) {
                pending = try await store.pendingReloads(PendingFilter())
                return pending.count >= tokens.count
            }
            try #require(pending.count == tokens.count, "\(pending.count) of \(tokens.count) pending reloads")
            // Decided by the owner: deferred for the low priority's 5 minutes (never `no-match`).
            for push in pushed {
                let decisions = try await Self.decisions(push.apnsID, in: store)
                #expect(decisions.contains("deferred") && !decisions.contains("no-match"), "\(push.apnsID): \(decisions)")
            }

            // Half cancelled through the first gateway's admin socket, half flushed through the second's.
            for (index, push) in pushed.enumerated() {
                let id = try #require(try await store.requests(apnsID: push.apnsID).first)
                let gateway = index % 2 == 0 ? first : second
                let arguments = index < tokens.count / 2
                    ? ["cancel", String(id), "--socket", gateway.configuration.adminSocketPath]
                    : ["flush", "--device", push.token, "--socket", gateway.configuration.adminSocketPath]
                let result = try await ReloadGateProcess.run(arguments, in: gateway.directory.url)
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
            }
            var left: [PendingReloadRow] = pending
            _ = try await eventually(every: .milliseconds(100)) {
                left = try await store.pendingReloads(PendingFilter())
                return left.isEmpty
            }
            #expect(left.isEmpty, "still pending: \(left.map(\.deviceToken))")
            for push in pushed.prefix(tokens.count / 2) {
                #expect(try await Self.decisions(push.apnsID, in: store).contains("cancelled"), "\(push.apnsID)")
            }
            var sent: [RecordedDelivery] = []
            _ = try await eventually(every: .milliseconds(100)) {
                sent = try await store.deliveries(in: [.sent])
                return sent.count >= tokens.count / 2
            }
            #expect(sent.count == tokens.count / 2, "\(sent.count) deliveries sent for \(tokens.count / 2) flushed devices")
        }
    }
}
