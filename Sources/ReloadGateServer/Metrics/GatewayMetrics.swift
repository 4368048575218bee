import CoreMetrics
import Prometheus
import ReloadGateCore
import Synchronization

/// The gateway's metrics, exported in Prometheus' text format at `/metrics` (DESIGN.md, Interfaces 5).
///
/// Each gateway has its own registry (swift-metrics with a `PrometheusMetricsFactory` passed in, not
/// the process-wide bootstrap), so that several gateways in one process (the tests) count apart.
/// Metrics with labels are made once per label set and kept.
public final class GatewayMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let counters = Mutex<[CounterKey: CoreMetrics.Counter]>([:])

    /// Deliveries released and not yet sent or failed: waiting, in flight or waiting for a retry.
    private let deliveryQueue: CoreMetrics.Gauge
    private let queueDepth = Mutex(0)
    /// Time from a request to the push service until its answer.
    private let deliveryLatency: CoreMetrics.Timer
    /// Pending reloads in the scheduler.
    private let pendingReloads: CoreMetrics.Gauge
    /// Time to commit one group of requests and decisions.
    private let storeCommit: CoreMetrics.Timer
    /// APNs listener answers `200` (the common case, without a lookup).
    private let apnsSuccess: CoreMetrics.Counter

    struct CounterKey: Hashable {
        var name: String
        var labels: [String]
    }

    public init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["reloadgate_store_commit_seconds"] = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        ]
        factory.durationHistogramBuckets["reloadgate_delivery_latency_seconds"] = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        self.factory = factory
        deliveryQueue = CoreMetrics.Gauge(label: "reloadgate_delivery_queue_depth", factory: factory)
        deliveryLatency = CoreMetrics.Timer(label: "reloadgate_delivery_latency_seconds", factory: factory)
        pendingReloads = CoreMetrics.Gauge(label: "reloadgate_pending_reloads", factory: factory)
        storeCommit = CoreMetrics.Timer(label: "reloadgate_store_commit_seconds", factory: factory)
        apnsSuccess = CoreMetrics.Counter(label: "reloadgate_apns_answers_total", dimensions: [("status", "200"), ("reason", "")], factory: factory)
        deliveryQueue.record(0)
        pendingReloads.record(0)
    }

    /// The metrics in Prometheus' text exposition format.
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }

    func increment(_ name: String, _ labels: KeyValuePairs<String, String>, by amount: Int = 1) {
        let key = CounterKey(name: name, labels: labels.flatMap { [$0.key, $0.value] })
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(label: name, dimensions: labels.map { ($0.key, $0.value) }, factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment(by: amount)
    }

    // MARK: Requests

    /// An answer of the API listener: `route` is the route's pattern (`/v1/apps/{bundle}/reloads`).
    func httpRequest(route: String, method: String, status: Int) {
        increment("reloadgate_http_requests_total", ["route": route, "method": method, "status": String(status)])
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
        var byKind: [DecisionKind: Int] = [:]
        var exhausted = 0
        for decision in decisions {
            byKind[decision.kind, default: 0] += 1
            if case .waitingForBudget = decision.reason { exhausted += 1 }
        }
        for (kind, count) in byKind { increment("reloadgate_decisions_total", ["kind": kind.rawValue], by: count) }
        if exhausted > 0 { increment("reloadgate_budget_exhausted_total", [:], by: exhausted) }
    }

    /// One group commit took `duration`; `pending` reloads wait in the scheduler after it.
    func committed(in duration: Duration, pending: Int) {
        storeCommit.recordNanoseconds(duration.nanoseconds)
        pendingReloads.record(pending)
    }

    // MARK: Delivery

    /// One attempt ended: `outcome` is `sent`, `failed`, `device-invalid`, `retry` or `unknown`; `reason`
    /// Apple's reason (or the error) when not sent.
    func deliveryAttempt(outcome: String, reason: String?, latency: Duration?) {
        increment("reloadgate_delivery_attempts_total", ["outcome": outcome, "reason": reason ?? ""])
        if let latency { deliveryLatency.recordNanoseconds(latency.nanoseconds) }
    }

    /// A delivery reached its end: `sent` or `failed` (including an invalid device).
    func deliveryFinished(outcome: String) {
        increment("reloadgate_deliveries_total", ["outcome": outcome])
        changeDeliveryQueue(by: -1)
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
        deliveryQueue.record(depth)
    }
}

extension Duration {
    /// The duration in whole nanoseconds.
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
