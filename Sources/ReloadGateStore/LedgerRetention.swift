public import ReloadGateCore

/// One step of the ledger's retention (`ledger.retention`): what a store deletes in one short
/// transaction.
///
/// A request is past retention when it was received before ``receivedBefore`` and keeps no answer to
/// a sender's retry that is still live at ``now`` (a push's apns-id answer in its row: a retry within
/// its window must find it). Its decisions go with it. A delivery is past retention when it was
/// released before ``receivedBefore`` and is `sent` or `failed` (one still on its way is kept).
public struct LedgerPruneStep: Sendable, Hashable {
    public var receivedBefore: Timestamp
    public var now: Timestamp
    /// At most this many requests, and as many deliveries, in the step.
    public var limit: Int

    /// The states of a delivery that is finished and may be pruned, as an SQL list (both stores).
    static let finishedStatesSQL = RecordedDelivery.State.sqlList([.sent, .failed])

    public init(receivedBefore: Timestamp, now: Timestamp, limit: Int) {
        self.receivedBefore = receivedBefore
        self.now = now
        self.limit = limit
    }
}

/// What one step deleted.
public struct LedgerPruned: Sendable, Hashable {
    public var requests = 0
    public var deliveries = 0
    /// Whether more may be past retention (the step deleted its limit of either): the next step
    /// should follow soon.
    public var more = false
    /// Another gateway was pruning the shared store: this one deleted nothing.
    public var skipped = false
    /// SQLite pages given back to the file system after the step.
    public var pagesReleased = 0

    public init() {}
}

/// A stretch of request ids pruned in one stretch of time: what `explain` of a pruned request says.
/// Steps a few minutes apart add to one span, so the store keeps a few spans an hour.
public struct PrunedSpan: Sendable, Hashable {
    /// The first and last request id the span's steps deleted (ids between them were deleted too, or
    /// never existed, unless a row is still found).
    public var firstRequest: Int64
    public var lastRequest: Int64
    /// Requests received before this were deleted (the latest step's bound).
    public var receivedBefore: Timestamp
    /// When the span's first and latest steps ran.
    public var since: Timestamp
    public var until: Timestamp

    public init(firstRequest: Int64, lastRequest: Int64, receivedBefore: Timestamp, since: Timestamp, until: Timestamp) {
        self.firstRequest = firstRequest
        self.lastRequest = lastRequest
        self.receivedBefore = receivedBefore
        self.since = since
        self.until = until
    }

    /// Steps this close to a span's first add to it instead of starting a new one (milliseconds).
    public static let joinWithin: Int64 = 10 * 60_000

    /// Whether a step at `now` that deleted requests from `first` on adds to this span (the newest)
    /// rather than starting one: both stores keep their spans by this rule.
    func takes(first: Int64, at now: Int64) -> Bool {
        now - since.milliseconds < Self.joinWithin && first >= firstRequest
    }
    /// Spans kept at most (the oldest go first): about five weeks of steady pruning.
    public static let kept = 5_000
}

/// The ledger's pruning as `explain` and `export` report it.
public struct LedgerPruning: Sendable, Hashable {
    /// The span that deleted the request asked about (`nil`: none kept covers it).
    public var span: PrunedSpan?
    /// The newest span: requests received before its ``PrunedSpan/receivedBefore`` are gone.
    public var latest: PrunedSpan?
    /// The oldest span kept: a request id below its first was pruned before it.
    public var oldest: PrunedSpan?

    public init(span: PrunedSpan?, latest: PrunedSpan?, oldest: PrunedSpan?) {
        self.span = span
        self.latest = latest
        self.oldest = oldest
    }

    /// Whether request `id`, not found in the ledger, was pruned (rather than never recorded).
    public func pruned(request id: Int64) -> Bool {
        span != nil || (latest.map { id <= $0.lastRequest } ?? false)
    }

    /// The sentence `explain` and the CLI say about a pruned request, or `nil` when it was not pruned.
    public func sentence(request id: Int64) -> String? {
        guard pruned(request: id) else { return nil }
        if let span {
            return "request \(id) was pruned from the ledger between \(span.since.rfc3339) and \(span.until.rfc3339) "
                + "(ledger.retention: requests received before \(span.receivedBefore.rfc3339) were deleted then)"
        }
        let before = oldest.map { " before \($0.since.rfc3339)" } ?? ""
        return "request \(id) is not in the ledger: requests up to \(latest?.lastRequest ?? id) were pruned\(before) (ledger.retention)"
    }
}

extension SQLStore {
    /// What pruning deleted: the span of `request` (when one kept covers it), the newest and the oldest.
    public func ledgerPruning(request: Int64?) async throws -> LedgerPruning {
        try await reading { session in
            let covering = try await request.asyncMap { id in
                try await session.prunedSpan("""
                    SELECT \(unescaped: PrunedSpan.columns) FROM ledger_prune WHERE firstRequest <= \(id) AND lastRequest >= \(id)
                    ORDER BY firstRequest DESC LIMIT 1
                    """)
            }
            return LedgerPruning(
                span: covering ?? nil,
                latest: try await session.prunedSpan("SELECT \(unescaped: PrunedSpan.columns) FROM ledger_prune ORDER BY until DESC LIMIT 1"),
                oldest: try await session.prunedSpan("SELECT \(unescaped: PrunedSpan.columns) FROM ledger_prune ORDER BY since LIMIT 1")
            )
        }
    }
}

extension SQLSession {
    /// Records that requests `first` to `last` were pruned by `step`: the newest span grows when it takes
    /// them (``PrunedSpan/takes(first:at:)``), else a span starts and the oldest past ``PrunedSpan/kept``
    /// go.
    func recordPrunedSpan(first: Int64, last: Int64, step: LedgerPruneStep) async throws {
        let now = step.now.milliseconds
        let before = step.receivedBefore.milliseconds
        if let latest = try await prunedSpan("SELECT \(unescaped: PrunedSpan.columns) FROM ledger_prune ORDER BY until DESC LIMIT 1"),
            latest.takes(first: first, at: now)
        {
            try await run("""
                UPDATE ledger_prune SET lastRequest = CASE WHEN lastRequest > \(last) THEN lastRequest ELSE \(last) END,
                    receivedBefore = CASE WHEN receivedBefore > \(before) THEN receivedBefore ELSE \(before) END, until = \(now)
                WHERE firstRequest = \(latest.firstRequest)
                """)
            return
        }
        try await run("INSERT INTO ledger_prune (firstRequest, lastRequest, receivedBefore, since, until) VALUES (\(first), \(last), \(before), \(now), \(now))")
        try await run("""
            DELETE FROM ledger_prune WHERE since < (SELECT since FROM ledger_prune ORDER BY since DESC LIMIT 1 OFFSET \(Int64(PrunedSpan.kept - 1)))
            """)
    }

    /// Deletes up to `step.limit` deliveries released before the bound and finished (`sent`, `failed`),
    /// oldest first; returns how many.
    func pruneDeliveries(_ step: LedgerPruneStep) async throws -> Int {
        try await rows("""
            DELETE FROM delivery WHERE apnsId IN (
                SELECT apnsId FROM delivery WHERE releasedAt < \(step.receivedBefore.milliseconds)
                    AND state IN (\(unescaped: LedgerPruneStep.finishedStatesSQL)) ORDER BY releasedAt LIMIT \(Int64(step.limit)))
            RETURNING apnsId
            """).count
    }

    /// The span of the query's one row of ``PrunedSpan/columns``, or `nil`.
    func prunedSpan(_ query: SQLQuery) async throws -> PrunedSpan? {
        try await row(query).map { row in
            PrunedSpan(
                firstRequest: try row.int64("firstRequest"), lastRequest: try row.int64("lastRequest"),
                receivedBefore: Timestamp(milliseconds: try row.int64("receivedBefore")),
                since: Timestamp(milliseconds: try row.int64("since")), until: Timestamp(milliseconds: try row.int64("until"))
            )
        }
    }
}

extension PrunedSpan {
    /// The columns of `ledger_prune`.
    static let columns = "firstRequest, lastRequest, receivedBefore, since, until"
}

extension Optional {
    /// `transform` of the wrapped value, awaited.
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
