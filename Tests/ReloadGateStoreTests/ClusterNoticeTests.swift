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
        #expect(ClusterNotice(.devices).payloads() == ["devices"])
        #expect(ClusterNotice(.devices, tokens: []).payloads() == ["devices"])
        #expect(ClusterNotice(.devices, tokens: [Self.token(1)]).payloads().compactMap(ClusterNotice.init(payload:)) == [ClusterNotice(.devices, tokens: [Self.token(1)])])
        // A notice of an earlier build, which named its gateway, is read without it.
        #expect(ClusterNotice(payload: #"{"change":"devices","gateway":"g1","tokens":["ab"]}"#) == ClusterNotice(.devices, tokens: ["ab"]))
        for change in ClusterChange.allCases {
            #expect(ClusterNotice(payload: change.rawValue) == ClusterNotice(change))
        }
    }

    @Test func tokensAreSplitIntoPayloadsWithinTheLimitAndReadBackInOrder() throws {
        let tokens = (0..<300).map { Self.token($0, digits: $0 % 3 == 0 ? 200 : 64) }
        let notice = ClusterNotice(.devices, tokens: tokens)
        let payloads = notice.payloads()
        #expect(payloads.count > 1)
        #expect(payloads.allSatisfy { $0.utf8.count <= ClusterNotice.payloadLimit })
        var read: [String] = []
        for payload in payloads {
            let back = try #require(ClusterNotice(payload: payload))
            #expect(back.change == .devices)
            read += back.tokens ?? []
        }
        #expect(read == tokens)
        // A small limit: a payload a token each; one that leaves no room for a token tells every change.
        let one = ClusterNotice(.devices, tokens: [Self.token(1), Self.token(2)])
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
        try await store.publish(ClusterNotice(.devices, tokens: tokens))
        try await store.publish(ClusterNotice(.keys))
        #expect(try await eventually { heard.withLock { $0.contains(ClusterNotice(.keys)) } })
        let notices = heard.withLock { $0.compactMap { $0 } }
        #expect(notices.filter { $0.change == .devices }.flatMap { $0.tokens ?? [] } == tokens)
    }

    /// A registry transaction on PostgreSQL tells the other gateways' device caches its tokens at its
    /// commit (not in a statement after it, which a gateway failing between the two never sends); a
    /// transaction that fails tells nothing.
    @Test(.enabled(if: TestPostgres.isEnabled)) func aRegistryTransactionTellsItsTokensAtItsCommit() async throws {
        let directory = try TemporaryDirectory("cluster-notice")
        defer { directory.remove() }
        let store = try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.notice"), teamID: "TEAM123456", now: Date()).app
        let heard = Heard()
        let listening = Task { await store.listen { notice in heard.notices.withLock { $0.append(notice) } } }
        defer { listening.cancel() }
        #expect(try await eventually { heard.notices.withLock { $0.contains(nil) } })
        func toldTokens() async throws -> [String] { try await heard.tokens(after: store) }
        let widget = WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())
        let (first, second, third) = (try DeviceToken(Self.token(1)), try DeviceToken(Self.token(2)), try DeviceToken(Self.token(3)))
        let results = try await store.writeRegistry([
            .putDevice(app: app, token: first, widgets: [widget], previousToken: nil),
            .putDevice(app: app, token: second, widgets: [widget], previousToken: nil),
            .putTimeline(app: app, token: first, widgetID: "w", timeline: Timeline(entries: [], policy: .never)),
        ], now: Date())
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        #expect(try await toldTokens() == [first.hex, second.hex])
        // A registration that replaces a token tells both.
        let replaced = try await store.putDevice(app: app, token: third, widgets: [widget], previousToken: second, now: Date())
        #expect(try await toldTokens() == [third.hex, second.hex])
        // A removal refused (no such device) rolls back: nothing told.
        await #expect(throws: RegistryError.self) { try await store.deleteDevice(app: app, token: try DeviceToken(Self.token(9)), now: Date()) }
        #expect(try await toldTokens() == [])
        let removed = try await store.deleteDevice(app: app, token: first, now: Date())
        #expect(try await toldTokens() == [first.hex])
        // Apple's 410 for a device.
        #expect(try await store.markDeviceInvalid(device: replaced.device, since: Date()) == third.hex)
        #expect(try await toldTokens() == [third.hex])
        #expect(removed.instances.count == 1)
    }

    /// An app's or a provider key's change on PostgreSQL tells every gateway's caches at its commit; a
    /// write that changes nothing, or fails, tells nothing.
    @Test(.enabled(if: TestPostgres.isEnabled)) func aCatalogChangeIsToldAtItsCommit() async throws {
        let directory = try TemporaryDirectory("cluster-notice")
        defer { directory.remove() }
        let store = try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
        defer { try? store.close() }
        let heard = Heard()
        let listening = Task { await store.listen { notice in heard.notices.withLock { $0.append(notice) } } }
        defer { listening.cancel() }
        #expect(try await eventually { heard.notices.withLock { $0.contains(nil) } })
        func toldChanges() async throws -> [ClusterChange] { try await heard.changes(after: store) }
        let bundle = try BundleID("com.example.catalog")
        _ = try await store.createApp(bundle: bundle, teamID: "TEAM123456", now: Date())
        #expect(try await toldChanges() == [.apps])
        await #expect(throws: StoreError.self) { _ = try await store.createApp(bundle: bundle, teamID: nil, now: Date()) }
        #expect(try await toldChanges() == [])
        #expect(try await store.setTeam(bundle: try BundleID("com.example.none"), teamID: "TEAM123456") == nil)
        #expect(try await toldChanges() == [])
        #expect(try await store.setTeam(bundle: bundle, teamID: "TEAM654321") != nil)
        _ = try await store.rotateCredentials(bundle: bundle, webhookSecret: true)
        _ = try await store.rotateRegistrationKey(bundle: bundle)
        #expect(try await toldChanges() == [.apps, .apps, .apps])
        let sender = ProviderTokenFactory(keyID: "CATKEY0001", teamID: "TEAM123456")
        let key = StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
        try await store.addProviderKey(key)
        await #expect(throws: StoreError.self) { try await store.addProviderKey(key) }
        #expect(try await store.removeProviderKey(keyID: "NOSUCHKEY1") == false)
        #expect(try await toldChanges() == [.keys])
        #expect(try await store.removeProviderKey(keyID: sender.keyID))
        #expect(try await toldChanges() == [.keys])
    }

    /// What a listener heard.
    final class Heard: Sendable {
        let notices = Mutex<[ClusterNotice?]>([])

        /// The changes heard so far, once an `inbox` notice sent after them is heard; then forgets them.
        func changes(after store: PostgresStore) async throws -> [ClusterChange] {
            try await store.publish(ClusterNotice(.inbox))
            #expect(try await eventually { self.notices.withLock { $0.last == ClusterNotice(.inbox) } })
            return notices.withLock { notices in
                defer { notices.removeAll() }
                return notices.dropLast().compactMap { $0?.change }
            }
        }

        /// The device tokens the notices heard so far name, once a `keys` notice sent after them is heard
        /// (a listener hears notifications in their transactions' commit order); then forgets them.
        func tokens(after store: PostgresStore) async throws -> [String] {
            try await store.publish(ClusterNotice(.keys))
            #expect(try await eventually { self.notices.withLock { $0.last == ClusterNotice(.keys) } })
            return notices.withLock { notices in
                defer { notices.removeAll() }
                return notices.compactMap { $0 }.filter { $0.change == ClusterChange.devices }.flatMap { $0.tokens ?? [] }
            }
        }
    }
}
