import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// What gateways tell each other (``ClusterNotice``): a registration names its tokens, in as many
/// payloads as PostgreSQL's limit takes, and a gateway reads back what it was told.
struct ClusterNoticeTests {
    static func token(_ index: Int, digits: Int = 64) -> String {
        String(String(format: "%08x", index).padding(toLength: digits, withPad: "ab", startingAt: 0).prefix(digits))
    }

    @Test func aChangeWithoutTokensIsItsNameAsOlderGatewaysSendIt() {
        #expect(ClusterNotice(.apps).payloads() == ["apps"])
        #expect(ClusterNotice(.devices, gateway: "g1").payloads() == ["devices"])
        #expect(ClusterNotice(.devices, gateway: "g1", tokens: []).payloads() == ["devices"])
        // Without the sender, a gateway could not tell its own notice: every entry is forgotten instead.
        #expect(ClusterNotice(.devices, tokens: [Self.token(1)]).payloads() == ["devices"])
        for change in ClusterChange.allCases {
            #expect(ClusterNotice(payload: change.rawValue) == ClusterNotice(change))
        }
    }

    @Test func tokensAreSplitIntoPayloadsWithinTheLimitAndReadBackInOrder() throws {
        let tokens = (0..<300).map { Self.token($0, digits: $0 % 3 == 0 ? 200 : 64) }
        let notice = ClusterNotice(.devices, gateway: "gateway-7f3a", tokens: tokens)
        let payloads = notice.payloads()
        #expect(payloads.count > 1)
        #expect(payloads.allSatisfy { $0.utf8.count <= ClusterNotice.payloadLimit })
        var read: [String] = []
        for payload in payloads {
            let back = try #require(ClusterNotice(payload: payload))
            #expect(back.change == .devices && back.gateway == "gateway-7f3a")
            read += back.tokens ?? []
        }
        #expect(read == tokens)
        // A small limit: a payload a token each; one that leaves no room for a token tells every change.
        let one = ClusterNotice(.devices, gateway: "g", tokens: [Self.token(1), Self.token(2)])
        let tight = one.payloads(limit: 120)
        #expect(tight.count == 2)
        #expect(tight.compactMap { ClusterNotice(payload: $0)?.tokens }.flatMap { $0 } == [Self.token(1), Self.token(2)])
        #expect(one.payloads(limit: 60) == ["devices"])
    }

    @Test func aPayloadThisGatewayCannotReadIsNil() {
        #expect(ClusterNotice(payload: "registrations") == nil)
        #expect(ClusterNotice(payload: #"{"change":"registrations","tokens":[]}"#) == nil)
        #expect(ClusterNotice(payload: "{") == nil)
    }

    /// PostgreSQL carries every payload of a notice, in one statement, to a listener.
    @Test(.enabled(if: TestPostgres.isEnabled)) func aListenerHearsEveryTokenOfANotice() async throws {
        let directory = try TemporaryDirectory("cluster-notice")
        defer { directory.remove() }
        let store = try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
        defer { try? store.close() }
        let heard = Mutex<[ClusterNotice?]>([])
        let listening = Task { await store.listen { notice in heard.withLock { $0.append(notice) } } }
        defer { listening.cancel() }
        // The listener says `nil` once it listens.
        #expect(try await eventually { heard.withLock { $0.contains(nil) } })
        let tokens = (0..<500).map { Self.token($0) }
        try await store.publish(ClusterNotice(.devices, gateway: "gateway-1", tokens: tokens))
        try await store.publish(ClusterNotice(.keys))
        #expect(try await eventually { heard.withLock { $0.contains(ClusterNotice(.keys)) } })
        let notices = heard.withLock { $0.compactMap { $0 } }
        #expect(notices.filter { $0.change == .devices }.flatMap { $0.tokens ?? [] } == tokens)
        #expect(notices.filter { $0.change == .devices }.allSatisfy { $0.gateway == "gateway-1" })
    }
}
