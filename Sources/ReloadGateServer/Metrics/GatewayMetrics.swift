import Prometheus
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The gateway's metrics, exported in Prometheus' text format at `/metrics` (docs/DESIGN.md, Interfaces 5),
/// each with its `# HELP` line.
///
/// Each gateway has its own registry (swift-prometheus' collectors made directly, with their help texts;
/// swift-metrics' factory has no place for one), so that several gateways in one process (the tests)
/// count apart. Metrics with labels are made once per label set and kept.
public final class GatewayMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let counters = Mutex<[CounterKey: Prometheus.Counter]>([:])
    /// `reloadgate_forecast_next_hour_peak` per app.
    private let forecastPeaks = Mutex<[String: Prometheus.Gauge]>([:])
    /// Freshness per app and kind: the waits' histograms and the gauges, made once per label set.
    private let freshnessWaits = Mutex<[FreshnessBook.Key: DurationHistogram]>([:])
    private let gauges = Mutex<[CounterKey: Prometheus.Gauge]>([:])
    /// The freshness histogram's buckets: the book's edges and every configured objective's `within`.
    private let freshnessBuckets = Mutex<[Duration]>(FreshnessBook.edges.map { .milliseconds($0) })

    /// Deliveries released and not yet sent or failed: waiting, in flight or waiting for a retry.
    private let deliveryQueue: Prometheus.Gauge
    private let queueDepth = Mutex(0)
    /// Time from a request to the push service until its answer.
    private let deliveryLatency: DurationHistogram
    /// Pending reloads in the scheduler.
    private let pendingReloads: Prometheus.Gauge
    /// Time to commit one group of requests and decisions.
    private let storeCommit: DurationHistogram
    /// Time of the commit loop's turn that sealed each commit.
    private let sealingTurn: DurationHistogram
    /// APNs listener answers `200` (the common case, without a lookup).
    private let apnsSuccess: Prometheus.Counter
    /// A delivery's common path, counted without a lookup: an attempt `sent` with no reason, a delivery
    /// finished `sent`, and a push sent, by push type (in ``PushType/allCases``' order). Every delivery
    /// counts all three, and a lookup builds and hashes its key's strings under the lock.
    private let attemptsSent: Prometheus.Counter
    private let deliveriesSent: Prometheus.Counter
    private let pushesSent: [Prometheus.Counter]
    /// Pushes' apns-ids in the engine's index in memory (``KeptAnswerIndex``).
    private let keptAnswerKeys: Prometheus.Gauge

    struct CounterKey: Hashable {
        var name: String
        var labels: [String]
    }

    /// `reloadgate_http_requests_total`'s counters by route, method and status: every API answer counts
    /// one, and a ``CounterKey`` would build an array of six label strings (the status made a string) and
    /// hash them all for each.
    private struct HTTPRequestKey: Hashable {
        var route: String
        var method: String
        var status: Int
    }
    private let httpRequests = Mutex<[HTTPRequestKey: Prometheus.Counter]>([:])

    /// One series the gateway exports: its name, type, label names and help text. docs/METRICS.md lists
    /// every one (a documentation test compares them).
    public struct Series: Sendable {
        public enum MetricType: String, Sendable { case counter, gauge, histogram }
        public let name: String
        public let type: MetricType
        public let labels: [String]
        public let help: String
    }

    /// Every series the gateway exports.
    public static let series: [Series] = [
        Series(name: "reloadgate_http_requests_total", type: .counter, labels: ["route", "method", "status"], help: "Answers of the API listener by route pattern, method and status."),
        Series(name: "reloadgate_apns_answers_total", type: .counter, labels: ["status", "reason"], help: "Answers of the APNs listener by status and APNs reason (empty for 200)."),
        Series(name: "reloadgate_decisions_total", type: .counter, labels: ["kind"], help: "Committed scheduling decisions by kind."),
        Series(name: "reloadgate_budget_exhausted_total", type: .counter, labels: [], help: "Decisions deferred for want of a budget token (rule 1)."),
        Series(name: "reloadgate_pending_reloads", type: .gauge, labels: [], help: "Pending reloads in the scheduler after the last commit."),
        Series(name: "reloadgate_store_commit_seconds", type: .histogram, labels: [], help: "Time of each group commit of requests and decisions."),
        Series(
            name: "reloadgate_commit_turn_seconds", type: .histogram, labels: [],
            help: "Time of the commit loop's turn before each group commit: settling the one that ended, deciding what queued while it ran, sealing."
        ),
        Series(name: "reloadgate_delivery_attempts_total", type: .counter, labels: ["outcome", "reason"], help: "Delivery attempts by outcome and the push service's reason."),
        Series(name: "reloadgate_deliveries_total", type: .counter, labels: ["outcome"], help: "Deliveries that reached their end, by outcome."),
        Series(name: "reloadgate_pushes_sent_total", type: .counter, labels: ["push_type"], help: "Pushes the push service accepted (or the outbox took), by push type: widgets, controls or liveactivity."),
        Series(name: "reloadgate_delivery_latency_seconds", type: .histogram, labels: [], help: "Time from a request to the push service until its answer."),
        Series(name: "reloadgate_delivery_queue_depth", type: .gauge, labels: [], help: "Deliveries released and not yet sent or failed."),
        Series(
            name: "reloadgate_hand_back_attempts_out_total", type: .counter, labels: [],
            help: "Delivery attempts still out at the push service when their partition was handed back to another gateway, after the hand-back's wait: the new owner may send them again."
        ),
        Series(name: "reloadgate_ledger_pruned_total", type: .counter, labels: ["table"], help: "Rows of the ledger deleted past ledger.retention, by table: requests (with their decisions) or deliveries."),
        Series(name: "reloadgate_apns_ids_in_memory", type: .gauge, labels: [], help: "Pushes' apns-ids within their retry window in the index in memory (embedded store)."),
        Series(name: "reloadgate_forecast_next_hour_peak", type: .gauge, labels: ["bundle"], help: "The busiest minute of the next hour's herd forecast, per app: reloads planned in that minute (timelines and pending reloads), looked at once a minute."),
        Series(name: "reloadgate_freshness_wait_seconds", type: .histogram, labels: ["bundle", "kind"], help: "Time from a request's arrival (a push, a webhook call) to the delivery that served it, taken by the push service or the outbox (absorbed ones: to the timeline reload), per app and kind; a control's or an activity's kind carries its prefix (control:garage)."),
        Series(name: "reloadgate_freshness_misses_total", type: .counter, labels: ["bundle", "kind", "cause"], help: "Requests that missed their kind's freshness objective (served late or never), by cause: budget, interval, priority, merge, timeline, upstream, expired or cancelled."),
        Series(name: "reloadgate_freshness_within_ratio", type: .gauge, labels: ["bundle", "kind", "window"], help: "The share of an app and kind's requests served within its freshness objective over the last hour or day (window 1h or 1d), looked at once a minute."),
        Series(name: "reloadgate_freshness_breached", type: .gauge, labels: ["bundle", "kind"], help: "1 while an app and kind's share within objective over the last hour is below the objective's quantile, else 0; looked at once a minute."),
        Series(name: "reloadgate_freshness_facts_lost_total", type: .counter, labels: [], help: "Batches and deliveries the freshness accounting dropped because it fell a million rows behind (its figures undercount by them)."),
        Series(name: "reloadgate_idempotent_answers_total", type: .counter, labels: ["outcome"], help: "Requests answered by their idempotency key (a push's apns-id, a webhook call's idempotency-key) without a decision, by outcome: replay (the first answer again) or conflict (the key with another body)."),
    ]

    private static let byName = Dictionary(uniqueKeysWithValues: series.map { ($0.name, $0) })

    static func descriptor(_ name: String) -> MetricNameDescriptor {
        // The unit is part of the names above (`_total`, `_seconds`): none here.
        MetricNameDescriptor(metricName: name, unitName: "", helpText: byName[name]?.help ?? "")
    }

    public init() {
        deliveryQueue = registry.makeGauge(descriptor: Self.descriptor("reloadgate_delivery_queue_depth"))
        deliveryLatency = registry.makeDurationHistogram(
            descriptor: Self.descriptor("reloadgate_delivery_latency_seconds"),
            buckets: [
                .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
            ]
        )
        pendingReloads = registry.makeGauge(descriptor: Self.descriptor("reloadgate_pending_reloads"))
        storeCommit = registry.makeDurationHistogram(
            descriptor: Self.descriptor("reloadgate_store_commit_seconds"),
            buckets: [
                .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            ]
        )
        sealingTurn = registry.makeDurationHistogram(
            descriptor: Self.descriptor("reloadgate_commit_turn_seconds"),
            buckets: [
                .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
                .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1),
            ]
        )
        apnsSuccess = registry.makeCounter(
            descriptor: Self.descriptor("reloadgate_apns_answers_total"),
            labels: [("status", "200"), ("reason", "")]
        )
        attemptsSent = registry.makeCounter(
            descriptor: Self.descriptor("reloadgate_delivery_attempts_total"),
            labels: [("outcome", "sent"), ("reason", "")]
        )
        deliveriesSent = registry.makeCounter(descriptor: Self.descriptor("reloadgate_deliveries_total"), labels: [("outcome", "sent")])
        let registry = registry
        pushesSent = PushType.allCases.map {
            registry.makeCounter(descriptor: Self.descriptor("reloadgate_pushes_sent_total"), labels: [("push_type", $0.rawValue)])
        }
        keptAnswerKeys = registry.makeGauge(descriptor: Self.descriptor("reloadgate_apns_ids_in_memory"))
        deliveryQueue.set(Int64(0))
        pendingReloads.set(Int64(0))
        keptAnswerKeys.set(Int64(0))
    }

    /// The metrics in Prometheus' text exposition format.
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }

    func increment(_ name: String, _ labels: KeyValuePairs<String, String>, by amount: Int = 1) {
        Self.collector(name, labels, in: counters) { registry.makeCounter(descriptor: Self.descriptor(name), labels: $0) }
            .increment(by: Int64(amount))
    }

    /// The collector of `name` with `labels`, made once (by `make`) and kept in `made`.
    private static func collector<Collector: Sendable>(
        _ name: String, _ labels: KeyValuePairs<String, String>, in made: borrowing Mutex<[CounterKey: Collector]>,
        make: ([(String, String)]) -> Collector
    ) -> Collector {
        assert(byName[name]?.labels == labels.map(\.key), "\(name) is exported with the labels its Series names")
        let key = CounterKey(name: name, labels: labels.flatMap { [$0.key, $0.value] })
        return made.withLock { collectors in
            if let known = collectors[key] { return known }
            let collector = make(labels.map { ($0.key, $0.value) })
            collectors[key] = collector
            return collector
        }
    }

    // MARK: Requests

    /// An answer of the API listener: `route` is the route's pattern (`/v1/apps/{bundle}/reloads`).
    func httpRequest(route: String, method: String, status: Int) {
        let key = HTTPRequestKey(route: route, method: method, status: status)
        let counter = httpRequests.withLock { known in
            if let counter = known[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: Self.descriptor("reloadgate_http_requests_total"),
                labels: [("route", route), ("method", method), ("status", String(status))]
            )
            known[key] = counter
            return counter
        }
        counter.increment()
    }

    /// An answer of the APNs listener: its status and reason (none for 200).
    func apnsAnswer(status: Int, reason: String?) {
        if status == 200 { return apnsSuccess.increment() }
        increment("reloadgate_apns_answers_total", ["status": String(status), "reason": reason ?? ""])
    }

    // MARK: Scheduler and store

    /// The decisions of one committed batch, by kind; requests deferred for want of a budget token are
    /// also counted as budget exhaustion.
    func decisionsCommitted(_ decisions: [Decision]) {
        guard !decisions.isEmpty else { return }
        let byKind = DecisionCounts(decisions)
        for kind in DecisionKind.allCases where byKind[kind] > 0 {
            increment("reloadgate_decisions_total", ["kind": kind.rawValue], by: byKind[kind])
        }
        let exhausted = decisions.count {
            if case .waitingForBudget = $0.reason { true } else { false }
        }
        if exhausted > 0 { increment("reloadgate_budget_exhausted_total", [:], by: exhausted) }
    }

    /// One group commit took `duration`; `pending` reloads wait in the scheduler after it.
    func committed(in duration: Duration, pending: Int) {
        storeCommit.record(duration)
        pendingReloads.set(Int64(pending))
    }

    /// The commit loop's turn that sealed a commit took `duration` (what the gateway does between the end
    /// of one commit and the start of the next).
    func sealed(after duration: Duration) {
        sealingTurn.record(duration)
    }

    /// The index of kept answers holds `count` apns-ids.
    /// A request answered by its idempotency key: `replay` or `conflict`.
    func idempotentAnswer(_ outcome: String) {
        increment("reloadgate_idempotent_answers_total", ["outcome": outcome])
    }

    func keptAnswers(_ count: Int) {
        keptAnswerKeys.set(Int64(count))
    }

    /// A step of the ledger's retention deleted these rows.
    func ledgerPruned(_ pruned: LedgerPruned) {
        if pruned.requests > 0 { increment("reloadgate_ledger_pruned_total", ["table": "requests"], by: pruned.requests) }
        if pruned.deliveries > 0 { increment("reloadgate_ledger_pruned_total", ["table": "deliveries"], by: pruned.deliveries) }
    }

    // MARK: Forecast

    /// The next hour's busiest minute per app (an app no longer in the forecast goes to 0).
    func setForecastPeaks(_ peaks: [String: Int]) {
        forecastPeaks.withLock { gauges in
            for bundle in Set(gauges.keys).union(peaks.keys) {
                let gauge = gauges[bundle] ?? registry.makeGauge(
                    descriptor: Self.descriptor("reloadgate_forecast_next_hour_peak"), labels: [("bundle", bundle)]
                )
                gauges[bundle] = gauge
                gauge.set(Int64(peaks[bundle] ?? 0))
            }
        }
    }

    // MARK: Freshness

    /// Adds each objective's `within` to the freshness histogram's buckets (before the first wait).
    func freshnessObjectives(_ objectives: [FreshnessObjective]) {
        freshnessBuckets.withLock { buckets in
            let milliseconds = Set(FreshnessBook.edges + objectives.map(\.within)).sorted()
            buckets = milliseconds.map { .milliseconds($0) }
        }
    }

    /// What the freshness accounting recorded: each served request's wait, each miss by cause.
    func freshnessRecorded(_ entries: [FreshnessBook.Entry]) {
        guard !entries.isEmpty else { return }
        let buckets = freshnessBuckets.withLock { $0 }
        // Grouped first: one histogram and one counter looked up per app, kind (and cause), not per request.
        var waits: [FreshnessBook.Key: [Int64]] = [:]
        var misses: [FreshnessBook.Key: [FreshnessCause: Int]] = [:]
        for entry in entries {
            if let wait = entry.wait { waits[entry.key, default: []].append(wait) }
            if let miss = entry.miss { misses[entry.key, default: [:]][miss, default: 0] += 1 }
        }
        for (key, recorded) in waits {
            let histogram = freshnessWaits.withLock { histograms in
                if let known = histograms[key] { return known }
                let made = registry.makeDurationHistogram(
                    descriptor: Self.descriptor("reloadgate_freshness_wait_seconds"),
                    labels: [("bundle", key.bundle), ("kind", key.kind)], buckets: buckets
                )
                histograms[key] = made
                return made
            }
            for wait in recorded { histogram.record(.milliseconds(wait)) }
        }
        for (key, causes) in misses {
            for (cause, count) in causes {
                increment("reloadgate_freshness_misses_total", ["bundle": key.bundle, "kind": key.kind, "cause": cause.rawValue], by: count)
            }
        }
    }

    /// An app and kind's share within objective over the last hour and day, and whether the hour's is
    /// below the objective.
    func setFreshness(_ key: FreshnessBook.Key, hour: Double?, day: Double?, breached: Bool) {
        set("reloadgate_freshness_within_ratio", ["bundle": key.bundle, "kind": key.kind, "window": "1h"], hour ?? 1)
        set("reloadgate_freshness_within_ratio", ["bundle": key.bundle, "kind": key.kind, "window": "1d"], day ?? 1)
        set("reloadgate_freshness_breached", ["bundle": key.bundle, "kind": key.kind], breached ? 1 : 0)
    }

    /// Facts the freshness accounting could not hold.
    func freshnessFactsLost(_ count: Int) {
        if count > 0 { increment("reloadgate_freshness_facts_lost_total", [:], by: count) }
    }

    private func set(_ name: String, _ labels: KeyValuePairs<String, String>, _ value: Double) {
        Self.collector(name, labels, in: gauges) { registry.makeGauge(descriptor: Self.descriptor(name), labels: $0) }.set(value)
    }

    // MARK: Delivery

    /// One attempt ended: `outcome` is `sent`, `failed`, `device-invalid`, `retry` or `unknown`; `reason`
    /// Apple's reason (or the error) when not sent.
    func deliveryAttempt(outcome: String, reason: String?, latency: Duration?) {
        if outcome == "sent", reason == nil {
            attemptsSent.increment()
        } else {
            increment("reloadgate_delivery_attempts_total", ["outcome": outcome, "reason": reason ?? ""])
        }
        if let latency { deliveryLatency.record(latency) }
    }

    /// A push of `pushType` was accepted by the push service (or written to the outbox).
    func pushSent(_ pushType: PushType) {
        pushesSent[pushType.ordinal].increment()
    }

    /// A delivery reached its end: `sent` or `failed` (including an invalid device).
    func deliveryFinished(outcome: String) {
        if outcome == "sent" {
            deliveriesSent.increment()
        } else {
            increment("reloadgate_deliveries_total", ["outcome": outcome])
        }
        changeDeliveryQueue(by: -1)
    }

    /// A hand-back released its partitions with `count` attempts still out (``ClusterMembership/handBack(_:)``).
    func handBackAttemptsOut(_ count: Int) {
        if count > 0 { increment("reloadgate_hand_back_attempts_out_total", [:], by: count) }
    }

    /// Deliveries were released to the worker (or found unfinished on start).
    func deliveriesQueued(_ count: Int) {
        if count > 0 { changeDeliveryQueue(by: count) }
    }

    private func changeDeliveryQueue(by change: Int) {
        let depth = queueDepth.withLock { depth in
            depth += change
            return depth
        }
        deliveryQueue.set(Int64(depth))
    }
}

extension Duration {
    /// The duration in whole nanoseconds.
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
