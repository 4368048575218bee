import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// What `reloadgate export` reads (``GatewayStoreReading/exportLedger(since:bundle:)``), the same on both
/// stores: the active devices of one app or all with their widgets and timelines, the requests received
/// since a time in id order with their decisions on arrival in the order they were made (the first one in
/// the request's row, the others apart), and nothing decided later (`cancelled`).
struct ExportLedgerTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test(arguments: StoreImplementation.all) func theLedgerSinceATimeForOneAppOrAll(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with("export-ledger", implementation, now: Self.now) { fixture in
            let store = fixture.store
            let (w1, w2) = (fixture.instances[0], fixture.instances[1])
            let other = try await store.createApp(bundle: try BundleID("com.example.other"), teamID: nil, allowsExemptions: false, now: Self.now).app
            let otherDevice = try await store.putDevice(
                app: other, token: try DeviceToken(String(repeating: "cd", count: 32)), widgets: [StoreFixture.scores], previousToken: nil, now: Self.now
            )
            let planned = Timeline(entries: [Timestamp(seconds: 1_790_003_600)], policy: .atEnd)
            _ = try await store.putTimeline(app: fixture.app, token: try DeviceToken(StoreFixture.token), widgetID: "w2", timeline: planned, now: Self.now)

            func request(_ id: RequestID, app: App, at seconds: Int64) -> RecordedRequest {
                var request = StoreFixture.request(id, app: app)
                request.received = Timestamp(seconds: seconds)
                return request
            }
            let at = Timestamp(seconds: 1_790_000_000)
            let later = Timestamp(seconds: 1_790_000_300)
            var batch = LedgerBatch()
            // Request 1 before the window; 2 in it, to both widgets and then deferred; 3 of the other app;
            // 4 matched nothing.
            batch.requests = [
                request(1, app: fixture.app, at: 1_789_990_000), request(2, app: fixture.app, at: 1_790_000_000),
                request(3, app: other, at: 1_790_000_010), request(4, app: fixture.app, at: 1_790_000_020),
            ]
            batch.decisions = [
                Decision(request: 1, instance: InstanceHandle(Int32(w1)), kind: .scheduled, due: at, reason: .dueNow),
                Decision(request: 2, instance: InstanceHandle(Int32(w1)), kind: .scheduled, due: at, reason: .dueNow),
                Decision(request: 2, instance: InstanceHandle(Int32(w2)), kind: .scheduled, due: at, reason: .dueNow),
                Decision(request: 2, instance: InstanceHandle(Int32(w2)), kind: .deferred, due: later, reason: .lowPriority(until: later, delay: 300)),
                Decision(request: 3, instance: InstanceHandle(Int32(otherDevice.instances[0].id)), kind: .merged, due: at, reason: .mergedIntoPending(due: at, requests: 2)),
                Decision(request: 4, instance: nil, kind: .noMatch, due: nil, reason: .noMatchingWidget),
            ]
            try await store.commit(batch)
            var cancel = LedgerBatch()
            cancel.decisions = [Decision(request: 2, instance: InstanceHandle(Int32(w2)), kind: .cancelled, due: nil, reason: .cancelledByOperator)]
            try await store.commit(cancel)

            let since = Timestamp(seconds: 1_789_999_000)
            let one = try await store.exportLedger(since: since, bundle: "com.example.scores")
            #expect(one.devices.map(\.token) == [StoreFixture.token])
            #expect(one.devices.first?.widgets.map(\.widgetID) == ["w1", "w2"])
            #expect(one.devices.first?.widgets.map(\.kind) == ["scores", "news"])
            #expect(one.timelines.map(\.widget) == [w2])
            #expect(one.timelines.first?.plannedReload == Timestamp(seconds: 1_790_003_600))
            #expect(one.requests.map(\.id) == [2, 4])
            let decided = one.requests.first?.decisions ?? []
            #expect(decided.map(\.instance) == [w1, w2, w2])
            #expect(decided.map(\.kind) == ["scheduled", "scheduled", "deferred"])
            #expect(one.requests.last?.decisions.map(\.kind) == ["no-match"])
            #expect(one.requests.last?.decisions.first?.instance == nil)

            // `reloadgate export`'s progress is told every row read, one after the other: at least the rows
            // exported (devices, widgets, timelines, requests and their later decisions).
            let counts = Mutex<[Int]>([])
            let all = try await store.exportLedger(since: since, bundle: nil, progress: { rows in counts.withLock { $0.append(rows) } })
            let told = counts.withLock { $0 }
            #expect(told == Array(1...max(1, told.count)))
            let exported = all.devices.count + all.devices.map(\.widgets.count).reduce(0, +) + all.timelines.count + all.requests.count
            #expect(told.count >= exported && exported > 0, "\(told.count) rows told, \(exported) exported")
            #expect(all.devices.map(\.bundle) == ["com.example.scores", "com.example.other"])
            #expect(all.requests.map(\.id) == [2, 3, 4])
            #expect(all.requests.map(\.app) == [fixture.app.id, other.id, fixture.app.id])

            // An unregistered device leaves the registry: its widgets are not exported.
            _ = try await store.markDeviceInvalid(device: otherDevice.device, since: Self.now)
            #expect(try await store.exportLedger(since: since, bundle: nil).devices.map(\.bundle) == ["com.example.scores"])
            #expect(try await store.exportLedger(since: since, bundle: "com.example.none").requests.isEmpty)
        }
    }
}
