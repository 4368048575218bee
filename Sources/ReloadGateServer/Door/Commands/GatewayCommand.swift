/// A change of the gateway's state, carried out by ``GatewayDoor/execute(_:)``: committed to the store,
/// then applied to the scheduler and the caches, before its typed outcome is returned.
protocol GatewayCommand: Sendable {
    associatedtype Outcome: Sendable
    func execute(at door: GatewayDoor) async throws -> Outcome
}
