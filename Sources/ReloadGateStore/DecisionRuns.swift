import ReloadGateCore

/// A batch's decisions as both engines store them: a request's first decision in the request's row, its
/// other decisions (more targets, and later ones such as `cancelled`) in `decision_run`, consecutive alike
/// ones in one row (docs/DECISIONS.md, "A request's first decision is in its row", "Decisions are written
/// in runs").
struct StoredDecisions {
    /// A run: decisions of one request with the same kind, due time and reason, all with an instance
    /// (listed) or all without (counted).
    struct Run {
        var request: RequestID
        var kind: DecisionKind
        var due: Timestamp?
        var reason: String
        var instances: [Int64]
        var count: Int
    }

    /// For each of the batch's requests, in order, its first decision (`nil`: it has none in the batch).
    let first: [Decision?]
    /// The other decisions, in batch order.
    let runs: [Run]

    init(_ batch: LedgerBatch) {
        var position: [RequestID: Int] = [:]
        position.reserveCapacity(batch.requests.count)
        for (index, request) in batch.requests.enumerated() { position[request.id] = index }
        var first = [Decision?](repeating: nil, count: batch.requests.count)
        var runs: [Run] = []
        var last: Decision?
        for decision in batch.decisions {
            if let index = position[decision.request], first[index] == nil {
                first[index] = decision
                continue
            }
            if let current = last, !runs.isEmpty, current.request == decision.request, current.kind == decision.kind,
                current.due == decision.due, (current.instance == nil) == (decision.instance == nil), current.reason == decision.reason
            {
                if let instance = decision.instance { runs[runs.count - 1].instances.append(Int64(instance.rawValue)) }
                runs[runs.count - 1].count += 1
                continue
            }
            runs.append(Run(
                request: decision.request, kind: decision.kind, due: decision.due, reason: decision.reason.description,
                instances: decision.instance.map { [Int64($0.rawValue)] } ?? [], count: 1
            ))
            last = decision
        }
        self.first = first
        self.runs = runs
    }
}
