import ReloadGateCore

/// The HTML report of one replay, or of two side by side (`--compare`): one self-contained file (inline
/// CSS and SVG, no script, nothing fetched) that a browser opens from disk.
///
/// Per kind: a table of the figures, reloads per instance per hour against the budget's average rate
/// (daily / 24), and the staleness of served requests by bucket. Every figure of the table carries
/// `data-figure="KIND.FIELD.RUN"` and every chart `data-chart`, so that a browser test can read them.
public enum SimulationPage {
    /// A replay and the name it is shown under (`A`, `B`, or the policy's name).
    public struct Run: Sendable {
        public var name: String
        public var report: SimulationReport

        public init(name: String, report: SimulationReport) {
            self.name = name
            self.report = report
        }
    }

    static let colors = ["#2563eb", "#ea580c"]

    public static func html(title: String, runs: [Run]) -> String {
        var body = ""
        let first = runs[0].report
        body += "<header><h1>\(escape(title))</h1>"
        body += "<p>Trace \(first.start.rfc3339) to \(first.end.rfc3339) (\(first.days) day\(first.days == 1 ? "" : "s")), replayed through"
        body += " the gateway's scheduler on a virtual clock.</p>"
        body += "<p class=\"legend\">" + runs.enumerated().map { index, run in
            "<span class=\"swatch\" style=\"background:\(colors[index % 2])\"></span>\(escape(run.name))"
        }.joined(separator: " ") + "</p></header>"
        body += "<section><h2>All kinds</h2><table><tr><th></th>" + runs.map { "<th>\(escape($0.name))</th>" }.joined() + "</tr>"
        body += row("requests", runs.map { ("all.requests.\($0.name)", grouped($0.report.requests)) })
        body += row("matched no widget", runs.map { ("all.unmatchedRequests.\($0.name)", grouped($0.report.unmatchedRequests)) })
        body += row("APNs pushes", runs.map { ("all.devicePushes.\($0.name)", grouped($0.report.devicePushes)) })
        body += row("pending at the end", runs.map { ("all.pendingAtEnd.\($0.name)", grouped($0.report.pendingAtEnd)) })
        body += "</table></section>"
        let kindNames = runs.flatMap { $0.report.kinds.map(\.name) }.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        for name in kindNames {
            let kinds = runs.map { run in run.report.kinds.first { $0.name == name } }
            body += "<section class=\"kind\"><h2>kind <code>\(escape(name))</code></h2>"
            body += "<table><tr><th></th>" + runs.map { "<th>\(escape($0.name))</th>" }.joined() + "</tr>"
            func add(_ label: String, _ field: String, _ value: (SimulationReport.Kind) -> String) {
                body += row(label, zip(runs, kinds).map { run, kind in ("\(name).\(field).\(run.name)", kind.map(value) ?? "-") })
            }
            add("policy", "policy") { "daily \($0.policy.dailyBudget), burst \($0.policy.burst), interval \($0.policy.minimumInterval) s" }
            add("instances", "instances") { grouped($0.instances) }
            add("requests", "requests") { grouped($0.requests) }
            add("scheduled", "scheduled") { grouped($0.scheduled) }
            add("merged", "merged") { grouped($0.merged) }
            add("absorbed by a timeline", "absorbed") { grouped($0.absorbed) }
            add("deferred", "deferred") { grouped($0.deferred) }
            add("expired", "expired") { grouped($0.expired) }
            add("cancelled", "cancelled") { grouped($0.cancelled) }
            add("reloads by push", "deliveries") { grouped($0.deliveries) }
            add("predicted throttled on device", "throttled") { grouped($0.throttled) }
            add("reloads by timeline", "timelineReloads") { grouped($0.timelineReloads) }
            add("reloads per instance per day (median / p90 / max)", "reloadsPerInstancePerDay") { kind in
                kind.reloadsPerInstancePerDay.map { "\(SimulationReport.number($0.median)) / \(SimulationReport.number($0.p90)) / \(SimulationReport.number($0.max))" } ?? "-"
            }
            add("staleness (median / p90 / max)", "staleness") { kind in
                kind.staleness.map {
                    "\(SimulationReport.duration($0.median)) / \(SimulationReport.duration($0.p90)) / \(SimulationReport.duration($0.max))"
                } ?? "-"
            }
            body += "</table><div class=\"charts\">"
            body += reloadChart(kind: name, runs: runs, kinds: kinds)
            body += stalenessChart(kind: name, runs: runs, kinds: kinds)
            body += "</div></section>"
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title))</title>
            <style>
            body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#111827;background:#fff;max-width:1400px}
            h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:24px 0 8px}code{font-size:15px}
            table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 12px;border-bottom:1px solid #e5e7eb;text-align:right}
            th:first-child,td:first-child{text-align:left;color:#374151}
            .charts{display:flex;flex-wrap:wrap;gap:16px}.chart{border:1px solid #e5e7eb;border-radius:6px;padding:8px}
            .chart h3{font-size:14px;margin:0 0 4px}.legend{color:#374151}.swatch{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-1px}
            svg text{font:11px system-ui,sans-serif;fill:#4b5563}
            </style></head>
            <body>\(body)</body></html>

            """
    }

    static func row(_ label: String, _ cells: [(figure: String, value: String)]) -> String {
        "<tr><td>\(escape(label))</td>" + cells.map { "<td data-figure=\"\(escape($0.figure))\">\(escape($0.value))</td>" }.joined() + "</tr>"
    }

    /// Reloads per instance per hour, each run a line, with the budget's average rate dashed.
    static func reloadChart(kind: String, runs: [Run], kinds: [SimulationReport.Kind?]) -> String {
        let width = 560.0, height = 220.0, left = 48.0, right = 12.0, top = 12.0, bottom = 28.0
        let hours = max(1, runs.map { $0.report.hours }.max() ?? 1)
        let series: [[Double]] = kinds.map { kind in
            guard let kind, kind.instances > 0 else { return [] }
            return (0..<hours).map { hour in
                Double(hour < kind.reloadsByHour.count ? kind.reloadsByHour[hour] : 0) / Double(kind.instances)
            }
        }
        let budgets = kinds.map { kind in kind.map { Double($0.policy.dailyBudget) / 24 } }
        let top1 = max(series.flatMap { $0 }.max() ?? 0, budgets.compactMap { $0 }.max() ?? 0, 0.01) * 1.1
        func x(_ hour: Double) -> Double { left + (width - left - right) * hour / Double(hours) }
        func y(_ value: Double) -> Double { top + (height - top - bottom) * (1 - value / top1) }
        var svg = "<svg data-chart=\"\(escape(kind)).reloads\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\">"
        svg += axes(width: width, height: height, left: left, right: right, top: top, bottom: bottom, maximum: top1, hours: hours, x: x, y: y)
        for (index, budget) in budgets.enumerated() {
            guard let budget else { continue }
            svg += "<line x1=\"\(f(x(0)))\" x2=\"\(f(x(Double(hours))))\" y1=\"\(f(y(budget)))\" y2=\"\(f(y(budget)))\" stroke=\"\(colors[index % 2])\" stroke-dasharray=\"5 4\" stroke-width=\"1\"/>"
        }
        for (index, values) in series.enumerated() where !values.isEmpty {
            // A step per hour: the hour's figure from its start to its end.
            var points: [String] = []
            for (hour, value) in values.enumerated() {
                points.append("\(f(x(Double(hour)))),\(f(y(value)))")
                points.append("\(f(x(Double(hour + 1)))),\(f(y(value)))")
            }
            svg += "<polyline data-series=\"\(escape(runs[index].name))\" fill=\"none\" stroke=\"\(colors[index % 2])\" stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>"
        }
        svg += "</svg>"
        return "<div class=\"chart\"><h3>Reloads per instance per hour (dashed: the budget's average, daily / 24)</h3>\(svg)</div>"
    }

    /// Served requests by staleness bucket, as shares, each run a bar in each bucket.
    static func stalenessChart(kind: String, runs: [Run], kinds: [SimulationReport.Kind?]) -> String {
        let width = 560.0, height = 220.0, left = 48.0, right = 12.0, top = 12.0, bottom = 28.0
        let labels = SimulationReport.stalenessLabels
        let shares: [[Double]] = kinds.map { kind in
            guard let kind, kind.served > 0 else { return [] }
            return kind.stalenessBuckets.map { Double($0) / Double(kind.served) }
        }
        let maximum = max(shares.flatMap { $0 }.max() ?? 0, 0.01) * 1.1
        let slot = (width - left - right) / Double(labels.count)
        let bar = slot * 0.8 / Double(max(1, runs.count))
        func y(_ value: Double) -> Double { top + (height - top - bottom) * (1 - value / maximum) }
        var svg = "<svg data-chart=\"\(escape(kind)).staleness\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\">"
        svg += "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(y(0)))\" y2=\"\(f(y(0)))\" stroke=\"#9ca3af\"/>"
        for step in 0...4 {
            let value = maximum / 1.1 * Double(step) / 4
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(y(value) + 4))\" text-anchor=\"end\">\(Int((value * 100).rounded()))%</text>"
        }
        for (index, label) in labels.enumerated() {
            svg += "<text x=\"\(f(left + slot * (Double(index) + 0.5)))\" y=\"\(f(height - 10))\" text-anchor=\"middle\">\(escape(label))</text>"
        }
        for (run, values) in shares.enumerated() {
            for (index, share) in values.enumerated() where share > 0 {
                let x = left + slot * Double(index) + slot * 0.1 + bar * Double(run)
                svg += "<rect data-series=\"\(escape(runs[run].name))\" x=\"\(f(x))\" y=\"\(f(y(share)))\" width=\"\(f(bar))\" height=\"\(f(y(0) - y(share)))\" fill=\"\(colors[run % 2])\"><title>\(escape(runs[run].name)) \(escape(label(index))): \(Int((share * 1000).rounded()) / 10)%</title></rect>"
            }
        }
        svg += "</svg>"
        return "<div class=\"chart\"><h3>Staleness of served requests (share per bucket)</h3>\(svg)</div>"
    }

    static func label(_ index: Int) -> String { SimulationReport.stalenessLabels[index] }

    /// An integer with thousands separators (`1,234,567`), as the tables show them.
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return value < 0 ? "-" + result : result
    }

    static func axes(
        width: Double, height: Double, left: Double, right: Double, top: Double, bottom: Double, maximum: Double, hours: Int,
        x: (Double) -> Double, y: (Double) -> Double
    ) -> String {
        var svg = "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(y(0)))\" y2=\"\(f(y(0)))\" stroke=\"#9ca3af\"/>"
        svg += "<line x1=\"\(f(left))\" x2=\"\(f(left))\" y1=\"\(f(top))\" y2=\"\(f(y(0)))\" stroke=\"#9ca3af\"/>"
        for step in 0...4 {
            let value = maximum / 1.1 * Double(step) / 4
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(y(value) + 4))\" text-anchor=\"end\">\(SimulationReport.number((value * 100).rounded() / 100))</text>"
        }
        let every = max(1, (hours + 11) / 12)
        for hour in stride(from: 0, through: hours, by: every) {
            svg += "<text x=\"\(f(x(Double(hour))))\" y=\"\(f(height - 10))\" text-anchor=\"middle\">\(hour)h</text>"
        }
        return svg
    }

    static func f(_ value: Double) -> String { String((value * 10).rounded() / 10) }

    static func escape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            default: result.append(character)
            }
        }
        return result
    }
}
