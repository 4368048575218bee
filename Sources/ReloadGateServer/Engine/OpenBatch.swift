import ReloadGateCore
import ReloadGateStore

/// What the engine decides into between two commits (``CommitPipeline/open``): the ledger's rows, the
/// idempotency keys its requests answer, and the fence generation it was begun under. The pipeline seals
/// it into a commit or drops it whole; the engine only adds to it.
struct OpenBatch: PipelineBatch {
    /// The rows the commit writes (its deliveries go to the delivery worker once it committed).
    var ledger = LedgerBatch()
    /// The idempotency keys in flight that this batch answers.
    var keys: [SchedulerEngine.KeyName] = []
    /// The generation the batch was begun under, when a heartbeat has changed it since: the batch may hold
    /// decisions for partitions taken over meanwhile, so it commits (and fails) under that one.
    var generation: Int64?
    /// The timeline reloads its ticks made (for freshness: they serve the requests absorbed before them).
    var timelineReloads: [TimelineReload] = []
    /// The arrival of each forwarded request decided here (its row was written by the gateway that took it).
    var forwardedArrivals: [(id: RequestID, received: Timestamp)] = []

    var isEmpty: Bool { ledger.isEmpty }
}
