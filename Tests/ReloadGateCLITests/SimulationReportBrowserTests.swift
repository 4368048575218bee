import Foundation
import ReloadGateTesting
import Testing

/// The what-if report in a real browser: `reloadgate simulate` on a generated day, two ways of pushing
/// side by side, the HTML opened in headless Chromium (selenium, as the dashboard's test). The tables show
/// the figures of `--json`, every chart is drawn with both runs, and the page loads nothing from
/// elsewhere. The screenshot goes to `.build/simulation-screenshots/report.png`.
@Suite(.timeLimit(.minutes(10)), .enabled(if: browserTestsEnabled), .heavy)
struct SimulationReportBrowserTests {
    static let root = DashboardBrowserTests.root

    @Test func theReportShowsTheFiguresAndDrawsBothRuns() async throws {
        let python = try await DashboardBrowserTests.python()
        let directory = try TemporaryDirectory("simulation-report")
        defer { directory.remove() }
        let report = directory.path("report.html")
        let simulated = try await ReloadGateProcess.run(
            ["simulate", "--generate", "sports-evening", "--devices", "3000", "--push-every", "change", "--compare-push-every", "10", "--report", report, "--json"],
            in: Self.root
        )
        try #require(simulated.status == 0, "\(simulated.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(simulated.stdout.utf8)) as? [String: Any])
        let runs = try #require(object["runs"] as? [[String: Any]])
        #expect(runs.count == 2)

        let shot = Self.root.appendingPathComponent(".build/simulation-screenshots/report.png").path
        let script = Self.root.appendingPathComponent("Tests/Browser/report_check.py").path
        let result = try await ChildProcess.run(python, [script, report, shot], in: Self.root, timeout: .seconds(180))
        try #require(result.status == 0, "\(result.output) \(result.error)")
        let page = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        let figures = try #require(page["figures"] as? [String: String])
        func number(_ key: String) -> Int? { figures[key].flatMap { Int($0.replacingOccurrences(of: ",", with: "")) } }

        var names: [String] = []
        for run in runs {
            let name = try #require(run["run"] as? String)
            names.append(name)
            #expect(number("all.requests.\(name)") == run["requests"] as? Int)
            #expect(number("all.devicePushes.\(name)") == run["devicePushes"] as? Int)
            for kind in try #require(run["kinds"] as? [[String: Any]]) {
                let kindName = try #require(kind["kind"] as? String)
                for field in ["instances", "requests", "scheduled", "merged", "deferred", "deliveries", "timelineReloads"] {
                    #expect(number("\(kindName).\(field).\(name)") == kind[field] as? Int, "\(kindName).\(field).\(name)")
                }
            }
        }
        #expect(names == ["push on every score change", "push every 10 min"])
        // The two ways differ (the comparison is not of one run with itself).
        #expect(number("scores.requests.\(names[0])") != number("scores.requests.\(names[1])"))

        let charts = try #require(page["charts"] as? [String: [String: Any]])
        #expect(Set(charts.keys) == ["scores.reloads", "scores.staleness", "news.reloads", "news.staleness"])
        for (name, chart) in charts {
            #expect((chart["width"] as? Double ?? 0) > 100, "\(name) is not drawn")
            let series = chart["series"] as? [String: Int] ?? [:]
            for run in names { #expect(series[run, default: 0] > 0, "\(name) has no \(run)") }
        }
        // One day of hours, two points per hour.
        #expect((charts["scores.reloads"]?["series"] as? [String: Int])?[names[0]] == 48)
        let resources = page["resources"] as? [String] ?? ["?"]
        #expect(resources.isEmpty, "the report loaded \(resources)")
        #expect(FileManager.default.fileExists(atPath: shot))
    }
}
