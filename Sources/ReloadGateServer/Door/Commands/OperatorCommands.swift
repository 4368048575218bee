import ReloadGateCore
import ReloadGateStore

// The operator's commands on pending reloads (admin API: cancel, flush).

/// `reloadgate cancel REQUEST`: drops the pending reloads listing the request; instance -> the requests
/// dropped with it (empty: none was pending).
struct CancelRequest: GatewayCommand {
    var request: Int64

    func execute(at door: GatewayDoor) async throws -> [Int64: [RequestID]] {
        let instances = try await door.store.pendingInstances(listing: request)
        return try await door.engine.cancel(instances: instances, listing: RequestID(bitPattern: request))
    }
}

/// `reloadgate flush`: the pending reloads of a device, an app or all go now; the instances that had one.
struct FlushPending: GatewayCommand {
    var deviceToken: String?
    var bundle: String?
    var ignoringBudget: Bool

    func execute(at door: GatewayDoor) async throws -> [Int64] {
        let instances = try await door.store.pendingInstances(deviceToken: deviceToken, bundle: bundle)
        return try await door.engine.flush(instances: instances, ignoringBudget: ignoringBudget)
    }
}
