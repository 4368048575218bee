import Foundation
import ReloadGateCore
public import ReloadGateServer
public import ReloadGateStore

extension TestGateway {
    /// A gateway on a new SQLite store in a temporary directory of its own (named after `name`, removed
    /// afterwards), with the app `bundle` made in the store before the gateway starts.
    public static func withRunningApp<Result: Sendable>(
        _ bundle: String,
        directoryNamed name: String = "gateway",
        configure: (inout GatewayConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestGateway, AppCredentials) async throws -> Result
    ) async throws -> Result {
        let directory = try TemporaryDirectory(name)
        defer { directory.remove() }
        let credentials: AppCredentials
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            credentials = try await store.createApp(bundle: try BundleID(bundle), now: Date())
        }
        return try await withRunning(in: directory, configure: configure) { gateway in try await body(gateway, credentials) }
    }
}
