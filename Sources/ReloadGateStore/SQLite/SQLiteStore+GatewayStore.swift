import Foundation
import ReloadGateCore

extension SQLiteStore: GatewayStore {
    /// The file is local: always.
    public func isReachable(within timeout: Duration) async -> Bool { true }

    /// One gateway owns a SQLite file.
    public var cluster: (any ClusterStore)? { nil }

    /// Checkpoints the WAL off the commit path (``checkpointWAL()``).
    public var periodicUpkeep: (@Sendable () throws -> Void)? {
        { _ = try self.checkpointWAL() }
    }
}
