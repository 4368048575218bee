import Foundation
import Logging
import ReloadGateAPI
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The registry's group commit and its answers: a change is refused with nothing stored, or stored and
/// answered so; never refused as "nothing was accepted" after its commit.
@Suite struct RegistryLogTests {
    /// An engine that takes no change (here stopping) refuses a registration before the store writes it.
    @Test func aStoppingEngineRefusesARegistrationWithNothingStored() async throws {
        let directory = try TemporaryDirectory("registry-log")
        defer { directory.remove() }
        var logger = Logger(label: "registry-log")
        logger.logLevel = .critical
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.registry"), teamID: nil, allowsExemptions: false, now: Date()).app
        let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger)
        try await door.load()
        let running = Task { await door.registry.run() }
        await door.engine.stop()

        let token = try DeviceToken(String(repeating: "ab", count: 32))
        let write = RegistryWrite.putDevice(
            app: app, token: token,
            widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration([:]))],
            previousToken: nil
        )
        await #expect(throws: SchedulerUnavailable.self) { try await door.registry.write(write) }
        #expect(try await store.pushDeviceStatus(app: app, token: token) == .unknown, "the refused registration was stored")
        door.registry.finish()
        await running.value
    }

    /// A change the store committed but the scheduler did not take says so, not "nothing was accepted".
    @Test func aChangeStoredButNotTakenIsAnsweredAsSuch() {
        let refusal = APIError.refusal(RegistryNotApplied(cause: SchedulerUnavailable()))
        #expect(refusal?.status == 503)
        #expect(refusal?.code == "registry-not-applied")
        #expect(refusal?.message.contains("stored") == true)
        #expect(refusal?.message.contains("nothing was accepted") == false)
    }
}
