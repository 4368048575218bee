import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The registry API, the webhook and the admin API in the router tier (``RouterTier``): each call goes
/// through the routes and the door to a real store and the running scheduler, without TLS.
@Suite(.timeLimit(.minutes(2)))
struct RouterTierTests {
    static let devicePath = "/v1/apps/\(RouterTier.bundle)/devices/\(RouterTier.token)"
    static let twoWidgets = #"""
        {"widgets":[
          {"id":"w1","kind":"scores","family":"systemSmall","configuration":{"team":"42"}},
          {"id":"w2","kind":"news","family":"systemMedium","configuration":{}}
        ]}
        """#

    // MARK: Registry API

    @Test func theRegistryAPIPutsDevicesTimelinesAndConfigurationsAndRefusesOtherKeys() async throws {
        try await RouterTier.with { tier in
            try await tier.api { client in
                let key = tier.credentials.apiKey
                let refused = try await client.registry(Self.devicePath, .put, apiKey: "not-the-key", body: Self.twoWidgets)
                #expect(refused.status == .unauthorized)
                #expect(refused.json["code"] as? String == "unauthorized")

                let put = try await client.registry(Self.devicePath, .put, apiKey: key, body: Self.twoWidgets)
                #expect(put.status == .ok, "\(put.text)")
                #expect((put.json["widgets"] as? [[String: Any]])?.map { $0["id"] as? String } == ["w1", "w2"])
                #expect(put.json["removedWidgets"] as? Int == 0)

                let planned = Date().addingTimeInterval(3600)
                let timeline = try await client.registry(
                    Self.devicePath + "/widgets/w1/timeline", .put, apiKey: key,
                    body: #"{"entries":[{"date":\#(Date().timeIntervalSince1970)}],"policy":{"after":\#(planned.timeIntervalSince1970)}}"#
                )
                #expect(timeline.status == .ok, "\(timeline.text)")
                #expect(timeline.json["plannedReload"] is String, "\(timeline.text)")
                let unknownWidget = try await client.registry(
                    Self.devicePath + "/widgets/nope/timeline", .put, apiKey: key, body: #"{"entries":[],"policy":"never"}"#
                )
                #expect(unknownWidget.status == .notFound, "\(unknownWidget.text)")

                let configurations = try await client.registry("/v1/apps/\(RouterTier.bundle)/configurations?kind=scores", .get, apiKey: key)
                #expect(configurations.status == .ok)
                #expect((configurations.json["configurations"] as? [[String: Any]])?.first?["count"] as? Int == 1)

                let deleted = try await client.registry(Self.devicePath, .delete, apiKey: key)
                #expect(deleted.status == .noContent)
                let again = try await client.registry(Self.devicePath, .delete, apiKey: key)
                #expect(again.status == .notFound)
            }
        }
    }

    /// A widget removed by a new registration takes its pending reload with it, and the request records
    /// why: the door applies the registry change to the scheduler, not only to the store.
    @Test func aRemovedWidgetsPendingReloadIsDroppedWithARecordedDecision() async throws {
        try await RouterTier.with { tier in
            let request = try await tier.api { client -> Int? in
                #expect(try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: Self.twoWidgets).status == .ok)
                // Priority 5 waits: a pending reload of w2 (kind news).
                let reload = try await client.webhook(RouterTier.bundle, body: #"{"kind":"news","priority":5}"#, secret: tier.credentials.webhookSecret)
                #expect(reload.status == .accepted, "\(reload.text)")
                let request = reload.json["requestId"] as? Int
                #expect(try await tier.door.reader.pendingReloads(PendingFilter()).map(\.widgetID) == ["w2"])

                let onlyW1 = #"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall","configuration":{"team":"42"}}]}"#
                let put = try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: onlyW1)
                #expect(put.json["removedWidgets"] as? Int == 1)
                return request
            }
            #expect(try await tier.door.reader.pendingReloads(PendingFilter()).isEmpty)
            let id = try #require(request)
            let record = try #require(try await tier.door.reader.requestRecord(Int64(id)))
            #expect(record.decisions.map(\.decision) == ["deferred", "cancelled"])
            #expect(record.decisions.last?.reason == DecisionReason.removedFromRegistry.description)
        }
    }

    /// Deleting a device takes its pending reloads out of the scheduler with a recorded decision.
    @Test func aDeletedDevicesPendingReloadsAreDroppedWithARecordedDecision() async throws {
        try await RouterTier.with { tier in
            let request = try await tier.api { client -> Int in
                #expect(try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: Self.twoWidgets).status == .ok)
                let reload = try await client.webhook(RouterTier.bundle, body: #"{"kind":"scores","priority":5}"#, secret: tier.credentials.webhookSecret)
                let instances = try await tier.door.reader.pendingReloads(PendingFilter()).map(\.instance)
                #expect(instances.count == 1)
                #expect(await tier.door.pendingWaits(instances).count == 1)
                #expect(try await client.registry(Self.devicePath, .delete, apiKey: tier.credentials.apiKey).status == .noContent)
                #expect(await tier.door.pendingWaits(instances).isEmpty)
                #expect(await tier.door.budgets(instances).isEmpty)
                return try #require(reload.json["requestId"] as? Int)
            }
            #expect(try await tier.door.reader.pendingReloads(PendingFilter()).isEmpty)
            let record = try #require(try await tier.door.reader.requestRecord(Int64(request)))
            #expect(record.decisions.map(\.decision) == ["deferred", "cancelled"])
            #expect(record.decisions.last?.reason == DecisionReason.removedFromRegistry.description)
        }
    }

    /// Catalog commands take the door's clock, offline too: an app's creation time is the injected now.
    @Test func catalogCommandsUseTheInjectedClock() async throws {
        try await RouterTier.with { tier in
            let then = Date(timeIntervalSince1970: 1_790_000_000.25)
            let store = try #require(tier.door.store as? SQLiteStore)
            let credentials = try await OfflineDoor(store: store, now: { then }).execute(
                AddApp(bundle: try BundleID("com.example.clock"), team: nil, allowsExemptions: false)
            )
            #expect(credentials.app.createdAt == then)
            #expect(try await tier.door.reader.app(bundle: try BundleID("com.example.clock"))?.createdAt == then)
        }
    }

    /// What the delivery worker reports for Apple's 410 reaches the scheduler itself: the device's
    /// instances are gone from it (no budget, no pending wait), their pending reload is dropped with a
    /// recorded decision, and the store's pending list is empty.
    @Test func markUnregisteredTakesTheDevicesInstancesOutOfTheScheduler() async throws {
        try await RouterTier.with { tier in
            let request = try await tier.api { client -> Int in
                #expect(try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: Self.twoWidgets).status == .ok)
                let reload = try await client.webhook(RouterTier.bundle, body: #"{"priority":5}"#, secret: tier.credentials.webhookSecret)
                return try #require(reload.json["requestId"] as? Int)
            }
            let instances = try await tier.door.reader.pendingReloads(PendingFilter()).map(\.instance).sorted()
            #expect(instances.count == 2)
            #expect(await tier.door.budgets(instances).count == 2)
            #expect(await tier.door.pendingWaits(instances).count == 2)
            let app = try #require(try await tier.door.reader.app(bundle: try BundleID(RouterTier.bundle)))
            guard case .active(let device, _) = try await tier.door.reader.pushDeviceStatus(app: app, token: try DeviceToken(RouterTier.token)) else {
                Issue.record("the device is not active")
                return
            }

            await tier.door.markUnregistered(device: device, since: Timestamp(Date()))
            #expect(await tier.door.budgets(instances).isEmpty)
            #expect(await tier.door.pendingWaits(instances).isEmpty)
            #expect(try await tier.door.reader.pendingReloads(PendingFilter()).isEmpty)
            let decisions = try #require(try await tier.door.reader.requestRecord(Int64(request))).decisions
            #expect(decisions.map(\.decision) == ["deferred", "deferred", "cancelled", "cancelled"], "\(decisions)")
            guard case .unregistered = try await tier.door.reader.pushDeviceStatus(app: app, token: try DeviceToken(RouterTier.token)) else {
                Issue.record("the device is still active")
                return
            }
            // A second 410 for the same device changes nothing.
            #expect(try await tier.door.execute(MarkUnregistered(device: device, since: Timestamp(Date()))) == nil)
        }
    }

    // MARK: Webhook

    @Test func theWebhookChecksTheSignatureAnswers202AndReplaysAnIdempotencyKey() async throws {
        try await RouterTier.with { tier in
            try await tier.api { client in
                #expect(try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: Self.twoWidgets).status == .ok)
                let secret = tier.credentials.webhookSecret
                let body = #"{"kind":"scores","match":{"team":"42"}}"#

                let forged = try await client.webhook(RouterTier.bundle, body: body, secret: "not-the-secret")
                #expect(forged.status == .unauthorized, "\(forged.text)")
                let unknownApp = try await client.webhook("com.example.other", body: body, secret: secret)
                #expect(unknownApp.status == .notFound)
                let invalid = try await client.webhook(RouterTier.bundle, body: #"{"kind":"scores","priority":7}"#, secret: secret)
                #expect(invalid.status == .unprocessableContent, "\(invalid.text)")
                #expect(try await tier.door.reader.ledgerCounts().requests == 0)

                let first = try await client.webhook(RouterTier.bundle, body: body, secret: secret, idempotencyKey: "k-1")
                #expect(first.status == .accepted, "\(first.text)")
                #expect(first.json["targets"] as? Int == 1)
                #expect((first.json["decisions"] as? [String: Int])?["scheduled"] == 1, "\(first.text)")
                let replay = try await client.webhook(RouterTier.bundle, body: body, secret: secret, idempotencyKey: "k-1")
                #expect(replay.status == .accepted)
                #expect(replay.text == first.text)
                #expect(replay.headers[.idempotentReplayed] == "true")
                let conflict = try await client.webhook(RouterTier.bundle, body: #"{"kind":"news"}"#, secret: secret, idempotencyKey: "k-1")
                #expect(conflict.status == .conflict)
                #expect(try await tier.door.reader.ledgerCounts().requests == 1)
            }
        }
    }

    // MARK: Admin API

    /// `explain` of a request the ledger's retention deleted answers `410 pruned` and says when; an apns-id
    /// it cannot find says what the ledger no longer holds.
    @Test func explainingAPrunedRequestSaysItIsGoneAndSinceWhen() async throws {
        try await RouterTier.with { tier in
            let request = try await tier.api { client -> Int in
                #expect(try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: Self.twoWidgets).status == .ok)
                let reload = try await client.webhook(RouterTier.bundle, body: #"{"kind":"news"}"#, secret: tier.credentials.webhookSecret)
                return try #require(reload.json["requestId"] as? Int)
            }
            try await tier.admin { client in
                #expect(try await client.call("/v1/explain/\(request)", .get).status == .ok)
                // A bound an hour ahead: everything recorded is past it.
                let now = Timestamp(Date())
                let pruned = try await tier.door.store.pruneLedger(
                    LedgerPruneStep(receivedBefore: now.adding(milliseconds: 3_600_000), now: now, limit: 100)
                )
                #expect(pruned.requests == 1)
                let gone = try await client.call("/v1/explain/\(request)", .get)
                #expect(gone.status == .gone, "\(gone.text)")
                #expect(gone.json["code"] as? String == "pruned")
                let message = try #require(gone.json["message"] as? String)
                #expect(message.contains("request \(request) was pruned from the ledger between \(now.rfc3339)"), "\(message)")
                // A later id that was never recorded is not said to be pruned.
                #expect(try await client.call("/v1/explain/\(request + 1000)", .get).status == .notFound)
                let unknown = try await client.call("/v1/explain/\(UUID().uuidString.lowercased())", .get)
                #expect(unknown.status == .notFound)
                #expect((unknown.json["message"] as? String)?.contains("pruned requests received before") == true, "\(unknown.text)")
            }
        }
    }

    @Test func theAdminAPIListsExplainsCancelsAndFlushesPendingReloads() async throws {
        try await RouterTier.with { tier in
            let requests = try await tier.api { client -> [Int] in
                var requests: [Int] = []
                #expect(try await client.registry(Self.devicePath, .put, apiKey: tier.credentials.apiKey, body: Self.twoWidgets).status == .ok)
                for kind in ["news", "scores"] {
                    let reload = try await client.webhook(RouterTier.bundle, body: #"{"kind":"\#(kind)","priority":5}"#, secret: tier.credentials.webhookSecret)
                    requests.append(try #require(reload.json["requestId"] as? Int))
                }
                return requests
            }
            try await tier.admin { client in
                let pending = try await client.call("/v1/pending", .get)
                #expect(pending.status == .ok)
                let rows = try #require(pending.json["pending"] as? [[String: Any]])
                #expect(rows.map { $0["widget"] as? String }.sorted { ($0 ?? "") < ($1 ?? "") } == ["w1", "w2"])
                #expect(rows.allSatisfy { $0["waitsFor"] as? String == "low-priority" }, "\(pending.text)")

                let explained = try await client.call("/v1/explain/\(requests[0])", .get)
                #expect(explained.status == .ok)
                let decisions = (explained.json["request"] as? [String: Any])?["decisions"] as? [[String: Any]]
                #expect(decisions?.map { $0["decision"] as? String } == ["deferred"])

                let cancelled = try await client.call("/v1/cancel/\(requests[0])", .post)
                #expect(cancelled.status == .ok, "\(cancelled.text)")
                let twice = try await client.call("/v1/cancel/\(requests[0])", .post)
                #expect(twice.status == .conflict)
                #expect(twice.json["code"] as? String == "not-pending")

                let flushed = try await client.call("/v1/flush", .post, headers: [.contentType: "application/json"], body: #"{"ignoreBudget":true}"#)
                #expect(flushed.status == .ok, "\(flushed.text)")
                #expect(flushed.json["flushed"] as? Int == 1)
                let malformed = try await client.call("/v1/flush", .post, headers: [.contentType: "application/json"], body: #"{"device":"x","bundle":"y"}"#)
                #expect(malformed.status.code / 100 == 4, "\(malformed.text)")

                let stats = try await client.call("/v1/stats", .get)
                let byKind = stats.json["decisions"] as? [String: Int]
                #expect(byKind?["deferred"] == 2)
                #expect(byKind?["cancelled"] == 1)
                #expect(stats.json["pendingReloads"] as? Int == 0, "\(stats.text)")
            }
        }
    }

    @Test func theAdminAPIAddsAndRemovesKeysAndSetsTeamsForTheNextLookup() async throws {
        try await RouterTier.with { tier in
            try await tier.admin { client in
                let pem = P256.Signing.PrivateKey().publicKey.pemRepresentation
                let body = try String(decoding: JSONSerialization.data(withJSONObject: ["kid": "ROUTERKEY1", "team": "TEAM000001", "publicKey": pem]), as: UTF8.self)
                let added = try await client.call("/v1/keys", .post, headers: [.contentType: "application/json"], body: body)
                #expect(added.status == .ok, "\(added.text)")
                // The door refreshed the key directory: the verifier's next lookup finds it.
                #expect(tier.door.keys.key(id: "ROUTERKEY1")?.teamID == "TEAM000001")
                #expect(try await client.call("/v1/keys", .post, headers: [.contentType: "application/json"], body: body).status == .conflict)
                #expect(try await client.call("/v1/keys/ROUTERKEY1", .delete).status == .ok)
                #expect(tier.door.keys.key(id: "ROUTERKEY1") == nil)
                #expect(try await client.call("/v1/keys/ROUTERKEY1", .delete).status == .notFound)

                let bundle = try BundleID(RouterTier.bundle)
                #expect(try await tier.door.apps.appWithWebhookKey(bundle: bundle)?.app.teamID == "TEAM000001")
                let team = try await client.call("/v1/apps/\(RouterTier.bundle)/team", .post, headers: [.contentType: "application/json"], body: #"{"team":"TEAM000002"}"#)
                #expect(team.status == .ok, "\(team.text)")
                #expect(try await tier.door.apps.appWithWebhookKey(bundle: bundle)?.app.teamID == "TEAM000002")
                #expect(try await client.call("/v1/apps/com.example.none/team", .post, headers: [.contentType: "application/json"], body: #"{"team":"T1"}"#).status == .notFound)

                let rotated = try await client.call("/v1/apps/\(RouterTier.bundle)/rotate-key", .post)
                #expect(rotated.status == .ok)
                #expect(try await tier.door.apps.app(forAPIKey: tier.credentials.apiKey) == nil)
                #expect(try await tier.door.apps.app(forAPIKey: try #require(rotated.json["apiKey"] as? String))?.bundle == bundle)

                // An empty body (content-length 0, as curl -X POST sends) is no body: the API key alone.
                // Whether the directory's key checks a signature made with `secret`.
                func keyChecks(_ secret: String) async throws -> Bool {
                    let key = try #require(try await tier.door.apps.appWithWebhookKey(bundle: bundle)?.webhookKey)
                    let now = Date()
                    let header = WebhookSignature.header(body: Data("{}".utf8), timestamp: Int64(now.timeIntervalSince1970), secret: secret)
                    return (try? WebhookSignature(header: header).verify(body: Data("{}".utf8), key: key, now: now)) != nil
                }
                let secret = tier.credentials.webhookSecret
                #expect(try await keyChecks(secret))
                let empty = try await client.call("/v1/apps/\(RouterTier.bundle)/rotate-key", .post, headers: [.contentLength: "0"], body: "")
                #expect(empty.status == .ok, "\(empty.text)")
                #expect(try await keyChecks(secret))
                let both = try await client.call(
                    "/v1/apps/\(RouterTier.bundle)/rotate-key", .post, headers: [.contentType: "application/json"], body: #"{"webhookSecret":true}"#
                )
                #expect(both.status == .ok, "\(both.text)")
                #expect(try await !keyChecks(secret))
                #expect(try await keyChecks(try #require(both.json["webhookSecret"] as? String)))
            }
        }
    }

    /// A `bundle` filter of the admin API (a query's, the flush body's) is a bundle id or empty (none);
    /// anything else is refused naming it, the rule the document's pattern states.
    @Test func anAdminBundleFilterIsABundleIDOrNone() async throws {
        try await RouterTier.with { tier in
            try await tier.admin { client in
                for uri in ["/v1/devices?bundle=a..b", "/v1/pending?bundle=a%20b", "/v1/budget/\(String(repeating: "ab", count: 32))?bundle=.a"] {
                    let refused = try await client.call(uri, .get)
                    #expect(refused.status == .unprocessableContent, "\(uri): \(refused.text)")
                    #expect(refused.text.contains("is not a bundle id"), "\(uri): \(refused.text)")
                }
                #expect(try await client.call("/v1/devices?bundle=", .get).status == .ok)
                #expect(try await client.call("/v1/pending?bundle=\(RouterTier.bundle)", .get).status == .ok)
                let flush = try await client.call("/v1/flush", .post, headers: [.contentType: "application/json"], body: #"{"bundle":"a..b"}"#)
                #expect(flush.status == .unprocessableContent, "\(flush.text)")
                let empty = try await client.call(
                    "/v1/flush", .post, headers: [.contentType: "application/json"], body: #"{"device":"\#(String(repeating: "ab", count: 32))","bundle":""}"#
                )
                #expect(empty.status == .ok, "\(empty.text)")
            }
        }
    }

    @Test func aKeyWrittenToTheStoreByAnotherProcessIsLookedUpOffTheEventLoop() async throws {
        try await RouterTier.with { tier in
            // Another process (a second gateway, `reloadgate keys add` without a gateway) wrote the key.
            let pem = P256.Signing.PrivateKey().publicKey.pemRepresentation
            try await tier.door.store.addProviderKey(
                StoredProviderKey(keyID: "OTHERPROC1", teamID: "TEAM000001", publicKeyPEM: pem, topics: [], environments: "both", createdAt: Date())
            )
            // The verifier asks on an event loop, which is not held for a store read: an unknown id is
            // "no key" at once and starts a refresh (at most one a second); a moment later it is there.
            #expect(tier.door.keys.key(id: "OTHERPROC1") == nil)
            var found: ProviderKey?
            _ = try await eventually(every: .milliseconds(10)) {
                found = tier.door.keys.key(id: "OTHERPROC1")
                return found != nil
            }
            #expect(found?.teamID == "TEAM000001")
        }
    }
}
