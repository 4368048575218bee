import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Controls in the registry (issue 29), on every store implementation: a control's token is a device of
/// push type `controls` with one instance; the two push types never mix.
struct ControlRegistryStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let device = String(repeating: "ab", count: 32)
    static let front = String(repeating: "c1", count: 32)
    static let back = String(repeating: "c2", count: 32)
    static let renewed = String(repeating: "c3", count: 32)

    func withStore(_ implementation: StoreImplementation, _ body: (any GatewayStore, App) async throws -> Void) async throws {
        let directory = try TemporaryDirectory("controls")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.garage"), teamID: nil, allowsExemptions: false, now: now).app
        try await body(store, app)
    }

    func control(_ door: String) -> ControlRegistration {
        ControlRegistration(kind: "garage", configuration: WidgetConfiguration(["door": .string(door)]))
    }

    @Test(arguments: StoreImplementation.all) func aControlIsOneInstanceThatKeepsItsIDAndMovesWithItsNewToken(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let front = try DeviceToken(Self.front)
            let results = try await store.writeRegistry([
                .putDevice(app: app, token: try DeviceToken(Self.device), widgets: [
                    WidgetRegistration(id: "w1", kind: "garage", family: .systemSmall, configuration: WidgetConfiguration(["door": .string("front")])),
                ], previousToken: nil),
                .putControl(app: app, token: front, control: control("front"), previousToken: nil),
                .putControl(app: app, token: front, control: control("front"), previousToken: nil),
                .putControl(app: app, token: try DeviceToken(Self.back), control: control("back"), previousToken: nil),
            ], now: now)
            guard case .success(.device(let first)) = results[1], case .success(.device(let again)) = results[2] else {
                Issue.record("\(results)")
                return
            }
            #expect(first.pushType == .controls)
            #expect(first.instances.map(\.widget.id) == [ControlRegistration.instanceID])
            #expect(again.instances.map(\.id) == first.instances.map(\.id))

            // Statuses carry the push type; targets never mix the two.
            #expect(try await store.pushDeviceStatus(app: app, token: front) == .active(device: first.device, pushType: .controls))
            let controls = try await store.targetInstances(app: app, target: ReloadTarget(pushType: .controls, kind: "garage", match: ["door": .string("front")]))
            #expect(controls.map(\.instance) == first.instances.map(\.id))
            #expect(try await store.targetInstances(app: app, target: ReloadTarget(pushType: .controls)).count == 2)
            #expect(try await store.targetInstances(app: app, target: ReloadTarget(kind: "garage")).count == 1)
            let loaded = try await store.registeredInstances()
            #expect(loaded.filter { $0.pushType == .controls }.count == 2)
            #expect(loaded.first { $0.instance == first.instances[0].id }?.kind == "garage")
            let address = try await store.pushAddress(device: first.device, instances: CompactList(first.instances.map(\.id)))
            #expect(address?.pushType == .controls)
            let usages = try await store.configurations(app: app, kind: "garage")
            #expect(usages.map(\.family) == ["control", "control", "systemSmall"])

            // A new token for the front door retires the old one, as for a device.
            let renewed = try await store.writeRegistry(
                [.putControl(app: app, token: try DeviceToken(Self.renewed), control: control("front"), previousToken: front)], now: now
            )
            guard case .success(.device(let moved)) = renewed[0] else { Issue.record("\(renewed)"); return }
            #expect(moved.retired?.device == first.device)
            guard case .unregistered = try await store.pushDeviceStatus(app: app, token: front) else {
                Issue.record("the old token is still active")
                return
            }
        }
    }

    @Test(arguments: StoreImplementation.all) func aTokenOfOnePushTypeIsRefusedAsTheOtherAndNothingChanges(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let device = try DeviceToken(Self.device)
            let front = try DeviceToken(Self.front)
            _ = try await store.writeRegistry([
                .putDevice(app: app, token: device, widgets: [], previousToken: nil),
                .putControl(app: app, token: front, control: control("front"), previousToken: nil),
            ], now: now)
            let results = try await store.writeRegistry([
                .putControl(app: app, token: device, control: control("front"), previousToken: nil),
                .putDevice(app: app, token: front, widgets: [], previousToken: nil),
                .putControl(app: app, token: try DeviceToken(Self.back), control: control("back"), previousToken: device),
                .putTimeline(app: app, token: front, widgetID: ControlRegistration.instanceID, timeline: Timeline(entries: [], policy: .never)),
            ], now: now)
            #expect(results.map(\.failureValue) == [
                .otherPushType(device, registered: .widgets), .otherPushType(front, registered: .controls),
                .otherPushType(device, registered: .widgets), .otherPushType(front, registered: .controls),
            ])
            await #expect(throws: RegistryError.otherPushType(front, registered: .controls)) {
                try await store.deleteDevice(app: app, token: front, pushType: .widgets, now: now)
            }
            await #expect(throws: RegistryError.otherPushType(front, registered: .controls)) {
                _ = try await store.adoptDevice(app: app, token: front, pushType: .widgets, now: now)
            }
            #expect(try await store.pushDeviceStatus(app: app, token: device) != .unknown)
            #expect(try await store.registeredInstances().count == 1)
            #expect(try await store.deleteDevice(app: app, token: front, pushType: .controls, now: now).instances.count == 1)
        }
    }

    @Test(arguments: StoreImplementation.all) func anAdoptedControlTokenHasOneInstanceOfKindStarThatRegistrationKeeps(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, app in
            let token = try DeviceToken(Self.back)
            let adopted = try await store.adoptDevice(app: app, token: token, pushType: .controls, now: now)
            #expect(try await store.pushDeviceStatus(app: app, token: token) == .active(device: adopted.device, pushType: .controls))
            #expect(try await store.pushTargets(device: adopted.device, kind: nil, match: [:]) == [adopted.instance])
            let registered = try await store.writeRegistry([.putControl(app: app, token: token, control: control("back"), previousToken: nil)], now: now)
            guard case .success(.device(let registration)) = registered[0] else { Issue.record("\(registered)"); return }
            #expect(registration.instances.map(\.id) == [adopted.instance])
            #expect(registration.removedInstances.isEmpty)
        }
    }
}
