import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

struct TargetingTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test(arguments: StoreImplementation.all) func kindMatchAndDevicesSelectExactlyTheWidgetsTheyName(_ implementation: StoreImplementation) async throws {
        let directory = try TemporaryDirectory("targeting")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now).app
        let tokenA = try DeviceToken(String(repeating: "aa", count: 32))
        let tokenB = try DeviceToken(String(repeating: "bb", count: 32))
        let tokenC = try DeviceToken(String(repeating: "cc", count: 32))
        func widget(_ id: String, _ kind: String, _ configuration: [String: WidgetConfiguration.Value], push: Bool = true) -> WidgetRegistration {
            WidgetRegistration(id: id, kind: kind, family: .systemSmall, configuration: WidgetConfiguration(configuration), pushEnabled: push)
        }
        let a = try await store.putDevice(app: app, token: tokenA, widgets: [
            widget("s42", "scores", ["team": .string("42"), "live": .bool(true)]),
            widget("news", "news", [:]),
            widget("quiet", "scores", ["team": .string("42")], push: false),
        ], previousToken: nil, now: now)
        let b = try await store.putDevice(app: app, token: tokenB, widgets: [
            widget("s7", "scores", ["team": .string("7"), "live": .bool(false)]),
            widget("n42", "scores", ["team": .number(42)]),
        ], previousToken: nil, now: now)
        // A retired device is never targeted.
        _ = try await store.putDevice(app: app, token: tokenC, widgets: [widget("s42", "scores", ["team": .string("42")])], previousToken: nil, now: now)
        _ = try await store.putDevice(app: app, token: try DeviceToken(String(repeating: "dd", count: 32)), widgets: [], previousToken: tokenC, now: now)

        func ids(_ target: ReloadTarget) async throws -> [Int64] { try await store.targetInstances(app: app, target: target).map(\.instance) }
        let s42 = a.instances.first { $0.widget.id == "s42" }!.id
        let news = a.instances.first { $0.widget.id == "news" }!.id
        let s7 = b.instances.first { $0.widget.id == "s7" }!.id
        let n42 = b.instances.first { $0.widget.id == "n42" }!.id

        #expect(try await ids(ReloadTarget()) == [s42, news, s7, n42])
        #expect(try await ids(ReloadTarget(kind: "scores")) == [s42, s7, n42])
        #expect(try await ids(ReloadTarget(kind: "scores", match: ["team": .string("42")])) == [s42])
        #expect(try await ids(ReloadTarget(kind: "scores", match: ["team": .number(42)])) == [n42])
        #expect(try await ids(ReloadTarget(match: ["live": .bool(false)])) == [s7])
        #expect(try await ids(ReloadTarget(match: ["team": .string("42"), "live": .bool(true)])) == [s42])
        #expect(try await ids(ReloadTarget(match: ["league": .string("nba")])).isEmpty)
        #expect(try await ids(ReloadTarget(devices: [tokenB])) == [s7, n42])
        #expect(try await ids(ReloadTarget(devices: [tokenC])).isEmpty)
        #expect(try await ids(ReloadTarget(devices: [])).isEmpty)
        #expect(try await ids(ReloadTarget(match: ["x\"); DROP TABLE widget; --": .string("1")])).isEmpty)
        #expect(try await store.targetInstances(app: app, target: ReloadTarget(kind: "news")).map(\.device) == [a.device])

        // A widget whose configuration changes is matched by its new values only.
        _ = try await store.putDevice(app: app, token: tokenB, widgets: [
            widget("s7", "scores", ["team": .string("7"), "live": .bool(false)]),
            widget("n42", "scores", ["team": .number(43.5)]),
        ], previousToken: nil, now: now)
        #expect(try await ids(ReloadTarget(match: ["team": .number(42)])).isEmpty)
        #expect(try await ids(ReloadTarget(match: ["team": .number(43.5)])) == [n42])
        #expect(try await ids(ReloadTarget(match: ["team": .string("43.5")])).isEmpty)
    }
}
