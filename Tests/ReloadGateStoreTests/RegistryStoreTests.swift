import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

struct RegistryStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let tokenA = String(repeating: "ab", count: 32)
    static let tokenB = String(repeating: "cd", count: 32)

    func withStore(_ implementation: StoreImplementation, _ body: (any GatewayStore, App) async throws -> Void) async throws {
        let directory = try TemporaryDirectory("registry")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now).app
        try await body(store, app)
    }

    func widget(_ id: String, kind: String = "scores", team: String? = nil) -> WidgetRegistration {
        WidgetRegistration(
            id: id,
            kind: kind,
            family: .systemSmall,
            configuration: WidgetConfiguration(team.map { ["team": .string($0)] } ?? [:])
        )
    }

    /// The registry's group commit: writes in one transaction, in order (a device, then its timeline), one
    /// refused for what it asks leaving the others written.
    @Test(arguments: StoreImplementation.all) func registryWritesInOneTransactionAreAppliedInOrderAndRefusedAlone(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let a = try DeviceToken(Self.tokenA)
            let b = try DeviceToken(Self.tokenB)
            let timeline = Timeline(entries: [Timestamp(seconds: 1_790_003_600)], policy: .atEnd)
            let results = try await store.writeRegistry([
                .putDevice(app: app, token: a, widgets: [widget("w1")], previousToken: nil),
                .putTimeline(app: app, token: b, widgetID: "w1", timeline: timeline),   // b is not registered yet
                .putTimeline(app: app, token: a, widgetID: "w1", timeline: timeline),   // a is, by the first write
                .putTimeline(app: app, token: a, widgetID: "nope", timeline: timeline),
                .putDevice(app: app, token: b, widgets: [widget("w1"), widget("w2", kind: "news")], previousToken: nil),
            ], now: now)
            #expect(results.count == 5)
            guard case .success(.device(let first)) = results[0], case .success(.timeline(let instance)) = results[2],
                case .success(.device(let last)) = results[4]
            else { Issue.record("\(results)"); return }
            #expect(instance == first.instances.first?.id)
            #expect(results[1].failureValue == .deviceNotFound(b))
            #expect(results[3].failureValue == .widgetNotFound(a, "nope"))
            #expect(last.instances.map(\.widget.id) == ["w1", "w2"])
            let registered = try await store.registeredInstances()
            #expect(registered.count == 3)
            #expect(registered.first { $0.instance == instance }?.plannedReload == Timestamp(seconds: 1_790_003_600))
            #expect(try await store.writeRegistry([], now: now).isEmpty)
        }
    }

    @Test(arguments: StoreImplementation.all) func putReplacesTheWidgetSetKeepingTheIdsOfWidgetsThatStay(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let token = try DeviceToken(Self.tokenA)
            let first = try await store.putDevice(app: app, token: token, widgets: [widget("w1", team: "42"), widget("w2", kind: "news")], previousToken: nil, now: now)
            #expect(first.instances.count == 2)
            #expect(first.removedInstances.isEmpty)

            let second = try await store.putDevice(app: app, token: token, widgets: [widget("w2", kind: "news"), widget("w3")], previousToken: nil, now: now)
            #expect(second.device == first.device)
            #expect(second.instances.first { $0.widget.id == "w2" }?.id == first.instances.first { $0.widget.id == "w2" }?.id)
            #expect(second.removedInstances == [first.instances.first { $0.widget.id == "w1" }!.id])
            #expect(try await store.configurations(app: app, kind: nil).map(\.kind) == ["news", "scores"])
        }
    }

    /// A registration's answer pairs each widget with its own row, in the order registered, whatever order
    /// the engine writes new rows in; a kept widget that changed is written (its kind, its configuration
    /// for targeting), one that did not keeps its row.
    @Test(arguments: StoreImplementation.all) func aRegistrationPairsEachWidgetWithItsOwnRow(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let token = try DeviceToken(Self.tokenA)
            let first = try await store.putDevice(
                app: app, token: token, widgets: [widget("w1", team: "1"), widget("w2", kind: "news", team: "2"), widget("w3")], previousToken: nil, now: now
            )
            let kept = Dictionary(uniqueKeysWithValues: first.instances.map { ($0.widget.id, $0.id) })
            // New widgets named against their order (many, so that one statement writes them), two kept,
            // one of them changed, one removed.
            let added = (0..<70).reversed().map { widget("n\($0)", kind: $0 % 2 == 0 ? "scores" : "news", team: "n\($0)") }
            let widgets = Array(added[0..<35]) + [widget("w2", kind: "scores", team: "7"), widget("w1", team: "1")] + Array(added[35...])
            let second = try await store.putDevice(app: app, token: token, widgets: widgets, previousToken: nil, now: now)
            #expect(second.instances.map(\.widget.id) == widgets.map(\.id))
            #expect(second.instances.first { $0.widget.id == "w1" }?.id == kept["w1"])
            #expect(second.instances.first { $0.widget.id == "w2" }?.id == kept["w2"])
            #expect(second.removedInstances == [kept["w3"]!])
            #expect(Set(second.instances.map(\.id)).count == widgets.count)
            // The store names each returned id by the widget it was returned with.
            let addresses = try await store.pushAddresses(second.instances.map { (second.device, [$0.id]) })
            #expect(addresses.map { $0?.widgetIDs ?? [] } == second.instances.map { [$0.widget.id] })
            // Targeting reads each row's configuration and kind: the changed one's new values, the new ones'.
            func targeted(_ kind: String?, _ team: String) async throws -> [Int64] {
                try await store.targetInstances(app: app, target: ReloadTarget(kind: kind, match: ["team": .string(team)])).map(\.instance)
            }
            #expect(try await targeted("scores", "7") == [kept["w2"]!])
            #expect(try await targeted(nil, "2").isEmpty)
            #expect(try await targeted(nil, "1") == [kept["w1"]!])
            #expect(try await targeted("news", "n69") == [second.instances.first { $0.widget.id == "n69" }!.id])
            #expect(try await targeted("scores", "n69").isEmpty)
        }
    }

    @Test(arguments: StoreImplementation.all) func pushAddressesNameTheChosenWidgetsInInstanceOrderAndNothingForAGoneDevice(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let a = try DeviceToken(Self.tokenA)
            let first = try await store.putDevice(app: app, token: a, widgets: [widget("w3"), widget("w1"), widget("w2")], previousToken: nil, now: now)
            let ids = Dictionary(uniqueKeysWithValues: first.instances.map { ($0.widget.id, $0.id) })
            let b = try await store.putDevice(app: app, token: try DeviceToken(Self.tokenB), widgets: [widget("x1")], previousToken: nil, now: now)
            _ = try await store.deleteDevice(app: app, token: try DeviceToken(Self.tokenB), now: now)
            let addresses = try await store.pushAddresses([
                (first.device, [ids["w1"]!, ids["w3"]!]),   // listed by instance (w3 was registered first), not by name
                (first.device, []),
                (first.device, [ids["w2"]!, b.instances[0].id]),   // another device's instance is not this device's widget
                (b.device, [b.instances[0].id]),   // deleted
            ])
            #expect(addresses.map { $0?.widgetIDs } == [["w3", "w1"], [], ["w2"], nil])
            #expect(addresses[0]?.token == a)
            #expect(addresses[0]?.bundle == app.bundle)
        }
    }

    @Test(arguments: StoreImplementation.all) func previousTokenRetiresTheOldDevice(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let old = try DeviceToken(Self.tokenA)
            let new = try DeviceToken(Self.tokenB)
            // Names that sort against the order of their ids: the retired instances come in id order on
            // both stores.
            let first = try await store.putDevice(app: app, token: old, widgets: [widget("w9"), widget("w1")], previousToken: nil, now: now)
            let later = now.addingTimeInterval(60)
            let second = try await store.putDevice(app: app, token: new, widgets: [widget("w1")], previousToken: old, now: later)
            #expect(second.retired?.device == first.device)
            #expect(second.retired?.instances == first.instances.map(\.id).sorted())
            #expect(first.instances.map(\.widget.id) == ["w9", "w1"])
            #expect(try await store.deviceStatus(app: app, token: old)?.active == false)
            #expect(try await store.deviceStatus(app: app, token: old)?.unregisteredAt == later)
            #expect(try await store.deviceStatus(app: app, token: new)?.active == true)
            await #expect(throws: RegistryError.deviceUnregistered(old)) {
                try await store.putTimeline(app: app, token: old, widgetID: "w1", timeline: Timeline(entries: [], policy: .never), now: later)
            }
        }
    }

    @Test(arguments: StoreImplementation.all) func configurationsGroupTheSameConfigurationWithCounts(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            _ = try await store.putDevice(app: app, token: try DeviceToken(Self.tokenA), widgets: [widget("w1", team: "42"), widget("w2", kind: "news")], previousToken: nil, now: now)
            _ = try await store.putDevice(app: app, token: try DeviceToken(Self.tokenB), widgets: [widget("w9", team: "42")], previousToken: nil, now: now)
            #expect(try await store.configurations(app: app, kind: "scores") == [
                ConfigurationUsage(kind: "scores", family: "systemSmall", configuration: #"{"team":"42"}"#, count: 2)
            ])
        }
    }

    @Test(arguments: StoreImplementation.all) func timelinesNeedAKnownWidgetAndDeleteRemovesEverything(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let token = try DeviceToken(Self.tokenA)
            let registration = try await store.putDevice(app: app, token: token, widgets: [widget("w1")], previousToken: nil, now: now)
            let timeline = Timeline(entries: [Timestamp(seconds: 1_790_003_600)], policy: .atEnd)
            #expect(try await store.putTimeline(app: app, token: token, widgetID: "w1", timeline: timeline, now: now) == registration.instances[0].id)
            await #expect(throws: RegistryError.widgetNotFound(token, "nope")) {
                try await store.putTimeline(app: app, token: token, widgetID: "nope", timeline: timeline, now: now)
            }
            let deleted = try await store.deleteDevice(app: app, token: token, now: now)
            #expect(deleted.instances == [registration.instances[0].id])
            #expect(try await store.configurations(app: app, kind: nil).isEmpty)
            await #expect(throws: RegistryError.deviceNotFound(token)) { try await store.deleteDevice(app: app, token: token, now: now) }
        }
    }

    @Test(arguments: StoreImplementation.all) func devicesOfAnotherAppAreInvisible(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let other = try await store.createApp(bundle: try BundleID("com.example.news"), teamID: nil, allowsExemptions: false, now: now).app
            let token = try DeviceToken(Self.tokenA)
            _ = try await store.putDevice(app: app, token: token, widgets: [widget("w1")], previousToken: nil, now: now)
            #expect(try await store.deviceStatus(app: other, token: token) == nil)
            await #expect(throws: RegistryError.deviceNotFound(token)) { try await store.deleteDevice(app: other, token: token, now: now) }
        }
    }
}

extension Result {
    /// The error, when it is one.
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
