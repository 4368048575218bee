import ArgumentParser
import Foundation
import NIOHTTP1
import ReloadGateServer

/// `reloadgate forecast`: the reload herd ahead, from the running gateway.
struct Forecast: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The reload herd ahead: reloads per minute from every timeline's planned reload and every pending reload.",
        discussion: """
            Widgets whose timelines end in the same minute reload together, and every reload calls the app's \
            backend. From the current minute: the total, the peak minute, the busiest minutes, each app and \
            kind, a chart of the reloads per hour (the bar is the hour's busiest minute), and the minutes \
            above an app's threshold (forecast.threshold, forecast.appThresholds). Only each widget's next \
            planned reload is known, so later hours are a lower bound. Asks the running gateway over its admin \
            socket.
            """
    )

    @Option(name: .long, help: "Only this app.") var bundle: String?
    @Option(name: .long, help: "Only this kind.") var kind: String?
    @Option(name: .long, help: "Hours ahead (1 to 48).") var hours: Int = 24
    @OptionGroup var admin: AdminOptions

    func validate() throws {
        guard (1...48).contains(hours) else { throw ValidationError("--hours must be 1 to 48, not \(hours)") }
    }

    func run() async throws {
        var query = ["hours=\(hours)"]
        if let bundle { query.append("bundle=\(AdminText.queryValue(bundle))") }
        if let kind { query.append("kind=\(AdminText.queryValue(kind))") }
        let answer = try await admin.call(.GET, "/v1/forecast?" + query.joined(separator: "&"), as: AdminAPI.Forecast.self)
        if admin.json { return try printJSON(answer) }
        printLine(Self.text(answer))
    }

    /// The forecast as text (the README shows it).
    static func text(_ answer: AdminAPI.Forecast) -> String {
        var lines = ["herd forecast: \(Self.reloads(answer.total)) in the \(answer.minutes / 60) h from \(answer.start)"]
        guard let peak = answer.peak else {
            lines.append("no reload planned")
            return lines.joined(separator: "\n")
        }
        lines.append("peak: \(Self.reloads(peak.count)) in the minute from \(peak.minute)")
        lines.append("")
        lines.append("busiest minutes:")
        lines += answer.busiest.prefix(5).map { "  \($0.minute)  \($0.count)" }
        lines.append("")
        lines.append(AdminText.table(
            ["APP", "KIND", "RELOADS", "PEAK", "AT"],
            answer.series.map { [$0.bundle, $0.kind, String($0.total), String($0.peak?.count ?? 0), $0.peak?.minute ?? "-"] }
        ))
        lines.append("")
        lines.append("per hour (bar: the hour's busiest minute, \(peak.count) = \(Self.barWidth) marks):")
        for hour in 0..<(answer.minutes + 59) / 60 {
            let minutes = answer.perMinute[(hour * 60)..<min(answer.perMinute.count, hour * 60 + 60)]
            let busiest = minutes.max() ?? 0
            let marks = busiest == 0 ? 0 : max(1, busiest * Self.barWidth / peak.count)
            let start = String(answer.start.dropFirst(11).prefix(5))
            let clock = Self.clock(start, plusHours: hour)
            lines.append("  \(clock) \(String(repeating: "#", count: marks))\(String(repeating: " ", count: Self.barWidth - marks)) \(minutes.reduce(0, +)) (busiest minute \(busiest))")
        }
        if !answer.breaches.isEmpty {
            lines.append("")
            lines.append("above threshold:")
            lines += answer.breaches.prefix(10).map { "  \($0.bundle): \(Self.reloads($0.count)) in the minute from \($0.minute) (threshold \($0.threshold))" }
            if answer.breaches.count > 10 { lines.append("  and \(answer.breaches.count - 10) more minutes") }
        }
        return lines.joined(separator: "\n")
    }

    static let barWidth = 40

    static func reloads(_ count: Int) -> String { count == 1 ? "1 reload" : "\(count) reloads" }

    /// `HH:MM` `hours` later than `start` (`HH:MM`).
    static func clock(_ start: String, plusHours hours: Int) -> String {
        let parts = start.split(separator: ":").compactMap { Int($0) }
        guard parts.count == 2 else { return start }
        return String(format: "%02d:%02d", (parts[0] + hours) % 24, parts[1])
    }
}
