import Foundation
import ReloadGateTesting
import Testing

/// Progress of the long commands (`simulate`, `simulate --generate`, `export`): lines on standard error
/// when it is a terminal (a pseudo-terminal made by util-linux's `script`), none when it is not (a file)
/// or with `--json`, and the command's own output the same either way.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct ProgressTests {
    /// Runs `reloadgate ARGUMENTS` with a pseudo-terminal as its standard error (and input), its standard
    /// output going to `stdout` in `directory`. Returns what reached the terminal and the exit status.
    static func onTerminal(_ arguments: [String], in directory: TemporaryDirectory, stdout: String) async throws -> (terminal: String, status: Int32) {
        let script = URL(fileURLWithPath: "/usr/bin/script")
        try #require(FileManager.default.isExecutableFile(atPath: script.path), "util-linux's script (Debian's bsdutils) is needed")
        let binary = try ReloadGateProcess.binaryURL.path
        let command = ([binary] + arguments).map(Self.quoted).joined(separator: " ") + " > " + Self.quoted(directory.path(stdout))
        let typescript = directory.path("typescript-\(stdout)")
        // -q: no "Script started" line on its output; -e: the command's exit status; -c: the command.
        let child = try ChildProcess(script, ["-q", "-e", "-c", command, typescript], in: directory.url)
        let status = try await child.waitForExit()
        return ((try? String(contentsOfFile: typescript, encoding: .utf8)) ?? "", status)
    }

    static func quoted(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Standard output without the one line that says how long the run took.
    static func withoutTiming(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("replayed ") }.joined(separator: "\n")
    }

    @Test func simulateShowsProgressOnATerminalOnlyAndTheReportsAreTheSame() async throws {
        let directory = try TemporaryDirectory("progress")
        defer { directory.remove() }
        // Small (8,000 requests): this suite runs beside the connection-deadline tests, and its CPU is theirs.
        let generate = ["simulate", "--generate", "sports-evening", "--devices", "1000"]
        let written = try await ReloadGateProcess.run(generate + ["--write-trace", "trace.jsonl", "--no-report"], in: directory.url)
        try #require(written.status == 0, "\(written.stderr)")

        let runs: [(name: String, arguments: [String], phases: [String])] = [
            (
                "trace", ["simulate", "trace.jsonl"],
                ["simulate: reading trace.jsonl: ", "simulate: replaying: registrations and timelines: 0 events", "simulate: replaying: 0 of "]
            ),
            ("generated", generate, ["simulate: generating a sports evening for 1,000 devices", "simulate: replaying: 0 of "]),
            ("compared", ["simulate", "trace.jsonl", "--compare-set", "scores.daily=10"], ["simulate: replaying A: 0 of ", "simulate: replaying B: 0 of "]),
        ]
        for run in runs {
            let tty = try await Self.onTerminal(run.arguments + ["--report", "\(run.name)-tty.html"], in: directory, stdout: "\(run.name)-tty.txt")
            #expect(tty.status == 0, "\(run.name): \(tty.terminal)")
            for phase in run.phases {
                #expect(tty.terminal.contains(phase), "\(run.name): no \(phase) in \(tty.terminal)")
            }
            // Each line is drawn over the last and the last is cleared: no stray text is left on the screen.
            // (The rate and the time left are drawn from 200 ms into a phase: a run this small may end first.)
            #expect(tty.terminal.contains("\r\u{1B}[K"), "\(run.name): the progress line is not cleared")

            let plain = try await ReloadGateProcess.run(run.arguments + ["--report", "\(run.name)-plain.html"], in: directory.url)
            #expect(plain.status == 0, "\(plain.stderr)")
            #expect(plain.stderr.isEmpty, "\(run.name): standard error without a terminal: \(plain.stderr)")

            let ttyOutput = try String(contentsOfFile: directory.path("\(run.name)-tty.txt"), encoding: .utf8)
            #expect(!ttyOutput.contains("\r") && !ttyOutput.contains("replaying"), "\(run.name): progress on standard output")
            let fromTerminal = Self.withoutTiming(ttyOutput).replacingOccurrences(of: "\(run.name)-tty.html", with: "REPORT")
            let fromFile = Self.withoutTiming(plain.stdout).replacingOccurrences(of: "\(run.name)-plain.html", with: "REPORT")
            #expect(fromTerminal == fromFile, "\(run.name): the text report differs with a terminal")
            #expect(fromFile.contains("scores"))
            let reports = try ["tty", "plain"].map { try Data(contentsOf: directory.url.appendingPathComponent("\(run.name)-\($0).html")) }
            #expect(reports[0] == reports[1], "\(run.name): the HTML report differs with a terminal")
        }

        // --json: nothing but the JSON, even on a terminal.
        let json = try await Self.onTerminal(["simulate", "trace.jsonl", "--json", "--no-report"], in: directory, stdout: "json.txt")
        #expect(json.status == 0)
        #expect(!json.terminal.contains("simulate:"), "progress with --json: \(json.terminal)")
        let plainJSON = try await ReloadGateProcess.run(["simulate", "trace.jsonl", "--json", "--no-report"], in: directory.url)
        #expect(try String(contentsOfFile: directory.path("json.txt"), encoding: .utf8) == plainJSON.stdout)
    }

    @Test func exportShowsProgressOnATerminalOnly() async throws {
        let directory = try TemporaryDirectory("progress-export")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", "com.example.scores"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")

        let tty = try await Self.onTerminal(["export", "--since", "1h"], in: directory, stdout: "tty.jsonl")
        #expect(tty.status == 0, "\(tty.terminal)")
        #expect(tty.terminal.contains("export: reading the ledger: 0 rows"), "\(tty.terminal)")
        #expect(tty.terminal.contains("export: writing the trace: 0 of 0 lines"), "\(tty.terminal)")
        #expect(tty.terminal.contains("reloadgate: exported 0 devices"), "\(tty.terminal)")

        let plain = try await ReloadGateProcess.run(["export", "--since", "1h"], in: directory.url)
        #expect(plain.status == 0)
        // Only the summary line: no progress without a terminal.
        #expect(plain.stderr.split(separator: "\n").count == 1 && plain.stderr.hasPrefix("reloadgate: exported 0 devices"), "\(plain.stderr)")
        #expect(try String(contentsOfFile: directory.path("tty.jsonl"), encoding: .utf8) == plain.stdout)
    }
}
