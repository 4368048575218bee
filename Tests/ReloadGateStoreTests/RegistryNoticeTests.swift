import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// On a store several gateways share, every registry change puts a notice for the device's owner in the
/// inbox in the change's own transaction (``SharedSchedulingStore``); a refused change puts none.
struct RegistryNoticeTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test(.enabled(if: TestPostgres.isEnabled)) func everyRegistryChangeNoticesTheOwnerInItsOwnTransaction() async throws {
        let directory = try TemporaryDirectory("registry-notice")
        defer { directory.remove() }
        let store = try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Self.now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: Self.now).app
        let all = Array(0..<DevicePartition.partitionCount)
        var seen = Set<Int64>()
        /// The notices written since the last call: the devices named.
        func notices() async throws -> [Int64] {
            let entries = try await store.inbox(partitions: all, limit: 1000).filter { !seen.contains($0.id) }
            seen.formUnion(entries.map(\.id))
            return entries.map { entry in
                guard case .device(let id) = entry.work else { return -1 }
                #expect(entry.partition == DevicePartition.of(device: id))
                return id
            }
        }
        let token = try DeviceToken(String(repeating: "ab", count: 32))
        let put = try await store.putDevice(app: app, token: token, widgets: [StoreFixture.scores], previousToken: nil, now: Self.now)
        #expect(try await notices() == [put.device])
        _ = try await store.putTimeline(app: app, token: token, widgetID: "w1", timeline: Timeline(entries: [], policy: .never), now: Self.now)
        #expect(try await notices() == [put.device])
        // A new token retiring the old one: both devices.
        let next = try DeviceToken(String(repeating: "cd", count: 32))
        let moved = try await store.putDevice(app: app, token: next, widgets: [StoreFixture.scores], previousToken: token, now: Self.now)
        #expect(try await notices().sorted() == [put.device, moved.device].sorted())
        let adopted = try await store.adoptDevice(app: app, token: try DeviceToken(String(repeating: "ef", count: 32)), now: Self.now)
        #expect(try await notices() == [adopted.device])
        #expect(try await store.markDeviceInvalid(device: adopted.device, since: Self.now.addingTimeInterval(1)) == String(repeating: "ef", count: 32))
        #expect(try await notices() == [adopted.device])
        _ = try await store.deleteDevice(app: app, token: next, now: Self.now)
        #expect(try await notices() == [moved.device])
        // Refused: nothing changed, nothing noticed.
        await #expect(throws: RegistryError.self) { try await store.deleteDevice(app: app, token: next, now: Self.now) }
        #expect(try await notices().isEmpty)
    }
}
