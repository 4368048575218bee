public import Foundation
public import ReloadGateStore

/// The door of a data directory with no gateway running (the CLI's `apps` and `keys` commands): catalog
/// changes are written; there are no caches to update.
public struct OfflineDoor: Sendable {
    private let store: any GatewayStore
    private let now: @Sendable () -> Date

    public init(store: any GatewayStore, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
    }

    public func execute<Command: CatalogCommand>(_ command: Command) async throws -> Command.Outcome {
        try await command.write(to: store, now: now())
    }
}
