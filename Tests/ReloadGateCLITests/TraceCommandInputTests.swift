import Foundation
import ReloadGateTesting
import Testing

/// `reloadgate export` and `reloadgate simulate` given hostile options and trace lines: each is refused
/// with one line naming what is wrong and a usage status (2), or 1 for an app the store does not have;
/// never a trap (a crash ends with a signal's status, not these) and never a file written.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct TraceCommandInputTests {
    static let registration =
        #"{"at":"2026-11-26T00:00:00.000Z","event":"registration","device":"d","widgets":[{"widget":"w0","kind":"scores"}]}"#

    /// Runs `reloadgate ARGUMENTS` in `directory` and checks it was refused with `status` and one line
    /// containing `message`.
    static func expectRefused(
        _ arguments: [String], in directory: TemporaryDirectory, status: Int32 = 2, saying message: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let result = try await ReloadGateProcess.run(arguments, in: directory.url)
        #expect(result.status == status, "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test func exportRefusesAnOutOfRangeDurationAndAnAppTheStoreDoesNotHave() async throws {
        let directory = try TemporaryDirectory("export-input")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", "com.example.scores"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")
        let output = directory.path("out.jsonl")
        for since in ["99999999999999999999h", "9223372036854775807s", "1e300s", "3651d", "24", "h", "1.5h", "-5m"] {
            try await Self.expectRefused(["export", "--since=\(since)", "--output", output], in: directory, saying: "--since must be a duration")
        }
        try await Self.expectRefused(["export", "--since", "1h", "--bundle", "bad bundle!", "--output", output], in: directory, saying: "bad bundle!")
        try await Self.expectRefused(
            ["export", "--since", "1h", "--bundle", "com.example.nope", "--output", output], in: directory, status: 1, saying: "no app com.example.nope"
        )
        #expect(!FileManager.default.fileExists(atPath: output))

        let known = try await ReloadGateProcess.run(["export", "--since", "3650d", "--bundle", "com.example.scores", "--output", output], in: directory.url)
        #expect(known.status == 0, "\(known.stderr)")
        #expect(FileManager.default.fileExists(atPath: output))
    }

    @Test func simulateRefusesExtremeNumbersInTraceLinesAndOptions() async throws {
        let directory = try TemporaryDirectory("simulate-input")
        defer { directory.remove() }
        let deep = "{\"at\":" + String(repeating: "[", count: 90) + String(repeating: "]", count: 90) + "}"
        let lines: [(line: String, message: String)] = [
            (#"{"at":1e300,"event":"push","device":"d"}"#, "at must be a time"),
            (#"{"at":-9223372036854775808,"event":"push","device":"d"}"#, "at must be a time"),
            // A five-digit year is not RFC 3339 (four digits), so not a time at all.
            (#"{"at":"99999-11-26T00:00:01.000Z","event":"push","device":"d"}"#, "at must be an RFC 3339 date"),
            (#"{"at":"0001-11-26T00:00:01.000Z","event":"push","device":"d"}"#, "at must be a time"),
            (#"{"at":"2026-11-26T00:00:01Z","event":"push","device":"d","priority":99999999999999999999}"#, "priority must be"),
            (#"{"at":"2026-11-26T00:00:01Z","event":"push","device":"d","priority":-9223372036854775808}"#, "priority must be"),
            (#"{"at":"2026-11-26T00:00:01Z","event":"push","device":"d","expiration":9223372036854775807}"#, "expiration must be a time"),
            (#"{"at":"2026-11-26T00:00:01Z","event":"push","device":"d","expiration":1e300}"#, "expiration must be a time"),
            (deep, "line 2: at must be"),
        ]
        let trace = directory.path("trace.jsonl")
        let report = directory.path("report.html")
        for (line, message) in lines {
            try Data((Self.registration + "\n" + line + "\n").utf8).write(to: URL(fileURLWithPath: trace))
            try await Self.expectRefused(["simulate", trace, "--report", report], in: directory, saying: message)
        }

        try Data((Self.registration + "\n").utf8).write(to: URL(fileURLWithPath: trace))
        let options: [(arguments: [String], message: String)] = [
            (["--set", "scores.daily=1e300"], "dailyBudget must be an integer"),
            (["--set", "scores.daily=-9223372036854775808"], "dailyBudget must be an integer"),
            (["--compare-set", "scores.interval=9223372036854775807"], "minimumInterval must be an integer"),
            (["--until", "99999-01-01T00:00:00Z"], "--until must be"),
        ]
        for (arguments, message) in options {
            try await Self.expectRefused(["simulate", trace, "--report", report] + arguments, in: directory, saying: message)
        }
        let generated: [(arguments: [String], message: String)] = [
            (["--devices", "99999999999999999999"], "--devices"),
            (["--push-every", "9223372036854775807"], "--push-every must be"),
            (["--changes", "9223372036854775807"], "--changes must be"),
        ]
        for (arguments, message) in generated {
            try await Self.expectRefused(
                ["simulate", "--generate", "sports-evening", "--devices", "5", "--report", report] + arguments, in: directory, saying: message
            )
        }
        #expect(!FileManager.default.fileExists(atPath: report))
    }
}
