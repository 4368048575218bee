import ReloadGateCore
import ReloadGateStore

/// The engine's request ids: after the highest recorded one with one gateway; from blocks no other gateway
/// uses on a shared store (``SharedSchedulingStore/requestIDBlock()``).
extension SchedulerEngine {
    /// The next request id: after the highest recorded one (one gateway), or from a block no other
    /// gateway uses (a shared store).
    func takeRequestID() async throws -> RequestID {
        if let partitioning, nextRequestID > lastRequestIDOfBlock || lastRequestIDOfBlock == .max {
            let block = try await partitioning.store.requestIDBlock()
            nextRequestID = block.lowerBound
            lastRequestIDOfBlock = block.upperBound
        }
        let id = nextRequestID
        nextRequestID &+= 1
        return id
    }
}
