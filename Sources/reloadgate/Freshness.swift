import ArgumentParser
import Foundation
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer

/// `reloadgate freshness`: how stale widgets were, from the running gateway.
struct Freshness: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "How long requests waited for the reload that served them, per app and kind, against each kind's objective.",
        discussion: """
            For every push and webhook call this gateway decided: the time from its arrival to the delivery the \
            push service (or the outbox) took, or to the timeline reload that served an absorbed one; expired \
            and cancelled requests are misses. Per app and kind over the last hour and day: the 50th, 90th and \
            99th percentile waits, the objective (<prefix>.freshness.quantile and .within), how many met it, and \
            the top causes of misses (budget, interval, priority, merge, timeline, upstream, expired, cancelled). \
            Kept in memory by the gateway: a restart starts the day again. Asks the running gateway over its \
            admin socket.
            """
    )

    @Option(name: .long, help: "Only this app.") var bundle: String?
    @Option(name: .long, help: "Only this kind (a control's as control:KIND).") var kind: String?
    @OptionGroup var admin: AdminOptions

    func run() async throws {
        var query: [String] = []
        if let bundle { query.append("bundle=\(AdminText.queryValue(bundle))") }
        if let kind { query.append("kind=\(AdminText.queryValue(kind))") }
        let path = "/v1/freshness" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
        let answer = try await admin.call(.GET, path, as: AdminAPI.Freshness.self)
        if admin.json { return try printJSON(answer) }
        printLine(Self.text(answer))
    }

    /// The figures as text (the README shows them): a row per app, kind and window (the last hour, the
    /// last day).
    static func text(_ answer: AdminAPI.Freshness) -> String {
        guard !answer.kinds.isEmpty else { return "freshness: no request served or missed in the last day" }
        var rows: [[String]] = []
        for kind in answer.kinds {
            for (window, figures) in [("1h", kind.hour), ("1d", kind.day)] {
                let within: String = figures.share.map { "\(figures.within) (\(percent($0)))" } ?? "-"
                let met: String = figures.met.map { $0 ? "yes" : "no" } ?? "-"
                let misses: String = figures.misses.isEmpty ? "-" : figures.misses.prefix(3).map { "\($0.cause) \($0.count)" }.joined(separator: ", ")
                rows.append([
                    kind.bundle, kind.kind, objective(kind), window, String(figures.requests), within, met,
                    wait(figures.p50), wait(figures.p90), wait(figures.p99), misses,
                ])
            }
        }
        return "freshness at \(answer.at), this gateway's requests:\n"
            + AdminText.table(["APP", "KIND", "OBJECTIVE", "WINDOW", "REQUESTS", "WITHIN", "MET", "P50", "P90", "P99", "TOP MISSES"], rows)
    }

    /// The last hour in one line (`reloadgate stats`): how many app kinds met their objective, and the
    /// worst of those that did not.
    static func line(_ answer: AdminAPI.Freshness) -> String {
        let judged = answer.kinds.filter { $0.hour.met != nil }
        guard !judged.isEmpty else { return "no request in the last hour (reloadgate freshness)" }
        let missed = judged.filter { $0.hour.met == false }.sorted { ($0.hour.share ?? 0) < ($1.hour.share ?? 0) }
        var line = "\(judged.count - missed.count) of \(judged.count) app kinds met their objective in the last hour"
        if let worst = missed.first, let share = worst.hour.share {
            line += "; below: \(worst.bundle) \(worst.kind) \(percent(share)) (objective \(objective(worst)))"
            if missed.count > 1 { line += " and \(missed.count - 1) more" }
        }
        return line
    }

    /// "90% in 10m".
    static func objective(_ kind: AdminAPI.FreshnessKind) -> String {
        "\(percent(kind.objectiveQuantile)) in \(duration(kind.objectiveWithin))"
    }

    static func percent(_ share: Double) -> String { FreshnessObjective.percent(share) }

    static func duration(_ milliseconds: Int64) -> String { FreshnessObjective.duration(milliseconds) }

    static func wait(_ milliseconds: Int64?) -> String {
        milliseconds.map { "≤" + duration($0) } ?? "-"
    }
}
