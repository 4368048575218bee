public import ReloadGateCore

/// The figures of one replay: per widget kind and in all, with the series the HTML report draws.
public struct SimulationReport: Sendable {
    /// Median, 90th percentile (nearest rank) and maximum.
    public struct Spread: Sendable, Hashable {
        public var median: Double
        public var p90: Double
        public var max: Double

        public init(median: Double, p90: Double, max: Double) {
            self.median = median
            self.p90 = p90
            self.max = max
        }
    }

    public struct Kind: Sendable {
        public var name: String
        /// The policy the replay used for the kind.
        public var policy: SchedulingPolicy
        /// Widget instances of the kind ever registered in the trace.
        public var instances: Int
        /// Requests decided for an instance of the kind (one per request and target).
        public var requests: Int
        public var scheduled: Int
        public var merged: Int
        public var absorbed: Int
        public var deferred: Int
        /// Expired on arrival and while waiting.
        public var expired: Int
        /// Dropped with the widget or device (a registration without it).
        public var cancelled: Int
        /// Reloads by push (one per instance a delivery reloads).
        public var deliveries: Int
        public var timelineReloads: Int
        /// Push reloads released with an empty budget bucket: WidgetKit is predicted to throttle them.
        public var throttled: Int
        /// Reloads (push and timeline) per instance per day of the trace.
        public var reloadsPerInstancePerDay: Spread?
        /// Seconds from a request to the reload that served it.
        public var staleness: Spread?
        /// Requests served by a reload (the staleness counts).
        public var served: Int
        public var requestsByHour: [Int]
        public var reloadsByHour: [Int]
        /// Served requests by staleness: counts within ``SimulationReport/stalenessEdges``.
        public var stalenessBuckets: [Int]
    }

    /// Bucket edges of the staleness chart, in seconds.
    public static let stalenessEdges = [10, 60, 300, 900, 1800, 3600, 3 * 3600, 12 * 3600]
    public static let stalenessLabels = ["<10 s", "10-60 s", "1-5 m", "5-15 m", "15-30 m", "30-60 m", "1-3 h", "3-12 h", ">12 h"]

    public var start: Timestamp
    public var end: Timestamp
    /// Whole days the trace spans (at least one): what "per day" divides by.
    public var days: Int
    public var requests: Int
    public var requestsBySource: [TraceSource: Int]
    public var unmatchedRequests: Int
    /// APNs pushes (device deliveries) the gateway would send.
    public var devicePushes: Int
    public var pendingAtEnd: Int
    public var stillWaiting: Int
    public var kinds: [Kind]
    /// The five minutes with most reloads (by push and by timeline, all kinds), most first: the herd the
    /// trace made, as `reloadgate forecast` shows one ahead.
    public var busiestMinutes: [HerdForecast.Minute] = []
    /// Decisions compared with those an exported trace recorded, and how many differ.
    public var compared: Int
    public var mismatchCount: Int
    public var mismatches: [Simulation.Mismatch]

    /// Hours the trace spans (rounded up), or the hours its series reach.
    public var hours: Int {
        let span = Int((Swift.max(0, end.milliseconds - start.milliseconds) + 3_599_999) / 3_600_000)
        return Swift.max(1, span, kinds.map { Swift.max($0.requestsByHour.count, $0.reloadsByHour.count) }.max() ?? 1)
    }
}

extension Simulation {
    /// The figures so far (call ``finish(at:)`` first to release what fell due by the end).
    public func report() -> SimulationReport {
        let start = firstTime ?? 0
        let span = Swift.max(0, lastTime - start)
        let days = Swift.max(1, Int((span + 86_399_999) / 86_400_000))
        var instancesByKind = [[UInt32]](repeating: [], count: kindNames.count)
        for (i, kind) in instanceKind.enumerated() where kind >= 0 {
            instancesByKind[Int(kind)].append(reloadsOfInstance[i])
        }
        let kinds = kindNames.indices.map { k -> SimulationReport.Kind in
            let tally = tallies[k]
            let counts = tally.decisions
            var perDay = instancesByKind[k].map { Double($0) / Double(days) }
            perDay.sort()
            func rank(_ fraction: Double) -> Double {
                perDay[Swift.max(0, Int((fraction * Double(perDay.count)).rounded(.up)) - 1)]
            }
            let policy = configuration.policy(for: kindScheduling[k])
            return SimulationReport.Kind(
                name: kindNames[k],
                policy: policy,
                instances: instancesByKind[k].count,
                requests: counts.reduce(0, +),
                scheduled: counts[DecisionKind.scheduled.index],
                merged: counts[DecisionKind.merged.index],
                absorbed: counts[DecisionKind.absorbed.index],
                deferred: counts[DecisionKind.deferred.index],
                expired: counts[DecisionKind.expired.index] + tally.expiredWaiting,
                cancelled: tally.cancelled,
                deliveries: tally.pushReloads,
                timelineReloads: tally.timelineReloads,
                throttled: tally.throttled,
                reloadsPerInstancePerDay: perDay.isEmpty ? nil : .init(median: rank(0.5), p90: rank(0.9), max: perDay.last!),
                staleness: tally.staleness.percentile(0.5).map {
                    .init(median: $0, p90: tally.staleness.percentile(0.9)!, max: Double(tally.staleness.maximum) / 1000)
                },
                served: tally.staleness.total,
                requestsByHour: tally.requestsByHour,
                reloadsByHour: tally.reloadsByHour,
                stalenessBuckets: tally.staleness.buckets(edges: SimulationReport.stalenessEdges)
            )
        }
        let firstMinute = HerdForecast.minuteStart(of: Timestamp(milliseconds: start)).milliseconds
        let busiest = HerdForecast.busiest(reloadsByMinute, 5).map {
            HerdForecast.Minute(start: Timestamp(milliseconds: firstMinute + Int64($0) * HerdForecast.minute), count: Int(reloadsByMinute[$0]))
        }
        var report = SimulationReport(
            start: Timestamp(milliseconds: start),
            end: Timestamp(milliseconds: lastTime),
            days: days,
            requests: requests,
            requestsBySource: requestsBySource,
            unmatchedRequests: unmatchedRequests,
            devicePushes: devicePushes,
            pendingAtEnd: scheduler.pendingCount,
            stillWaiting: stillWaiting,
            kinds: kinds,
            compared: compared,
            mismatchCount: mismatchCount,
            mismatches: mismatches
        )
        report.busiestMinutes = Array(busiest)
        return report
    }
}

// MARK: Text and JSON

extension SimulationReport {
    static func number(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        let text = String(value)
        // Two decimals are plenty for a report.
        let scaled = (value * 100).rounded() / 100
        return scaled == value ? text : String(scaled)
    }

    static func duration(_ seconds: Double) -> String {
        if seconds < 60 { return "\(number(seconds)) s" }
        if seconds < 3600 { return "\(number((seconds / 6).rounded() / 10)) min" }
        return "\(number((seconds / 360).rounded() / 10)) h"
    }

    /// The summary people read: one block per kind.
    public func text(title: String? = nil) -> String {
        var lines: [String] = []
        if let title { lines.append(title) }
        let sources = TraceSource.allCases.map { "\(requestsBySource[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", ")
        lines.append("trace: \(start.rfc3339) to \(end.rfc3339) (\(days) day\(days == 1 ? "" : "s")), \(requests) requests (\(sources)), \(unmatchedRequests) matched no widget")
        lines.append("APNs pushes: \(devicePushes); pending at the end: \(pendingAtEnd); requests still waiting: \(stillWaiting)")
        if let peak = busiestMinutes.first {
            let others = busiestMinutes.dropFirst().map { "\($0.count) at \($0.start.rfc3339)" }.joined(separator: ", ")
            lines.append("reload herd: the busiest minute \(peak.start.rfc3339) with \(peak.count) reloads" + (others.isEmpty ? "" : "; then \(others)"))
        }
        for kind in kinds {
            let policy = kind.policy
            lines.append("")
            lines.append("kind \(kind.name): \(kind.instances) instances; daily \(policy.dailyBudget), burst \(policy.burst), minimum interval \(policy.minimumInterval) s")
            lines.append("  requests \(kind.requests): scheduled \(kind.scheduled), merged \(kind.merged), absorbed \(kind.absorbed), deferred \(kind.deferred), expired \(kind.expired), cancelled \(kind.cancelled)")
            lines.append("  reloads: \(kind.deliveries) by push (\(kind.throttled) predicted throttled on device), \(kind.timelineReloads) by timeline")
            if let spread = kind.reloadsPerInstancePerDay {
                lines.append("  reloads per instance per day: median \(Self.number(spread.median)), p90 \(Self.number(spread.p90)), max \(Self.number(spread.max))")
            }
            if let spread = kind.staleness {
                lines.append("  staleness (\(kind.served) served): median \(Self.duration(spread.median)), p90 \(Self.duration(spread.p90)), max \(Self.duration(spread.max))")
            }
        }
        if compared > 0 {
            lines.append("")
            lines.append("compared with the gateway's decisions: \(compared), different: \(mismatchCount)")
        }
        return lines.joined(separator: "\n")
    }

    /// The figures as a JSON object (`--json`).
    public func json(run: String? = nil) -> String {
        func spread(_ value: Spread?) -> String {
            guard let value else { return "null" }
            return "{\"median\":\(Self.number(value.median)),\"p90\":\(Self.number(value.p90)),\"max\":\(Self.number(value.max))}"
        }
        func list(_ values: [Int]) -> String { "[\(values.map(String.init).joined(separator: ","))]" }
        let kindObjects = kinds.map { kind in
            let p = kind.policy
            return "{\"kind\":\(JSONText.quoted(kind.name)),\"policy\":{\"dailyBudget\":\(p.dailyBudget),\"burst\":\(p.burst),"
                + "\"minimumInterval\":\(p.minimumInterval),\"absorbWindow\":\(p.absorbWindow),\"lowPriorityDelay\":\(p.lowPriorityDelay),"
                + "\"backgroundDelay\":\(p.backgroundDelay),\"coalescingWindow\":\(p.coalescingWindow)},"
                + "\"instances\":\(kind.instances),\"requests\":\(kind.requests),\"scheduled\":\(kind.scheduled),\"merged\":\(kind.merged),"
                + "\"absorbed\":\(kind.absorbed),\"deferred\":\(kind.deferred),\"expired\":\(kind.expired),\"cancelled\":\(kind.cancelled),"
                + "\"deliveries\":\(kind.deliveries),\"timelineReloads\":\(kind.timelineReloads),\"throttled\":\(kind.throttled),"
                + "\"reloadsPerInstancePerDay\":\(spread(kind.reloadsPerInstancePerDay)),\"stalenessSeconds\":\(spread(kind.staleness)),"
                + "\"served\":\(kind.served),\"requestsByHour\":\(list(kind.requestsByHour)),\"reloadsByHour\":\(list(kind.reloadsByHour)),"
                + "\"stalenessBuckets\":\(list(kind.stalenessBuckets))}"
        }
        let mismatchObjects = mismatches.map { m in
            "{\"request\":\(m.request),\"recorded\":\(JSONText.quoted(m.recorded.rawValue)),\"simulated\":\(JSONText.quoted(m.simulated.rawValue))}"
        }
        let sources = TraceSource.allCases.map { "\(JSONText.quoted($0.rawValue)):\(requestsBySource[$0] ?? 0)" }.joined(separator: ",")
        return "{" + (run.map { "\"run\":\(JSONText.quoted($0))," } ?? "")
            + "\"start\":\(JSONText.quoted(start.rfc3339)),\"end\":\(JSONText.quoted(end.rfc3339)),\"days\":\(days),"
            + "\"requests\":\(requests),\"requestsBySource\":{\(sources)},\"unmatchedRequests\":\(unmatchedRequests),"
            + "\"devicePushes\":\(devicePushes),\"pendingAtEnd\":\(pendingAtEnd),\"stillWaiting\":\(stillWaiting),"
            + "\"kinds\":[\(kindObjects.joined(separator: ","))],"
            + "\"busiestMinutes\":[\(busiestMinutes.map { "{\"minute\":\(JSONText.quoted($0.start.rfc3339)),\"count\":\($0.count)}" }.joined(separator: ","))],"
            + "\"compared\":\(compared),\"mismatchCount\":\(mismatchCount),\"mismatches\":[\(mismatchObjects.joined(separator: ","))]}"
    }
}
