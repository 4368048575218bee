import Foundation
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The running gateway copies the WAL into the database file in the background (the writer itself only
/// past 64 MiB of WAL), so commits never wait for a checkpoint.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct StoreServiceTests {
    @Test func theGatewayCheckpointsTheWALInTheBackground() async throws {
        try await TestGateway.withRunning { gateway in
            let data = gateway.configuration.dataDirectory
            // A write through another connection: it lands in the WAL, which no commit of this size
            // would make the writer checkpoint.
            let store = try SQLiteStore(directory: data, environment: .sandbox, now: Date())
            _ = try await store.createApp(bundle: try BundleID("com.example.checkpointed"), now: Date())
            try store.close()

            let file = URL(fileURLWithPath: data + "/reloadgate.sqlite")
            let deadline = ContinuousClock.now + .seconds(10)
            var copied = false
            while !copied, ContinuousClock.now < deadline {
                copied = try Data(contentsOf: file).range(of: Data("com.example.checkpointed".utf8)) != nil
                if !copied { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(copied, "the database file never got the app's row: no checkpoint ran")
        }
    }
}
