import Foundation
import ReloadGateTesting
import Testing

/// The README's five-minute tour, replayed as printed: its `console` blocks' commands run in one bash
/// session against a fresh `reloadgate serve` in a temporary directory, and each command's output is
/// compared with the README's, times, ids, keys and paths masked and runs of spaces read as one.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct ReadmeTourTests {
    static let readme = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("README.md")

    /// One `$ ` command of the tour (continuation lines joined as bash reads them) and the output printed
    /// under it.
    struct Step {
        var command: String
        var output: [String]
    }

    /// The steps of the `console` blocks in the section "A five-minute tour".
    static func steps(of readme: String) throws -> [Step] {
        let section = try #require(readme.firstRange(of: "## A five-minute tour"))
        let text = readme[section.upperBound...]
        let body = text.firstRange(of: "\n## ").map { text[..<$0.lowerBound] } ?? text
        var steps: [Step] = []
        var inBlock = false
        var continuing = false
        for line in body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") {
                inBlock = line == "```console"
                continuing = false
                continue
            }
            guard inBlock else { continue }
            if continuing, !steps.isEmpty {
                steps[steps.count - 1].command += "\n" + line
            } else if line.hasPrefix("$ ") {
                steps.append(Step(command: String(line.dropFirst(2)), output: []))
            } else if !steps.isEmpty {
                steps[steps.count - 1].output.append(line)
            }
            continuing = line.hasSuffix("\\") && (line.hasPrefix("$ ") || continuing)
        }
        return steps
    }

    /// What may differ between two runs of the tour, replaced by a placeholder; then every run of blanks
    /// is one space and trailing blank lines go.
    static func masked(_ lines: [String]) -> String {
        lines.map { line in
            line.replacing("\r", with: "")
                .replacing(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/, with: "<uuid>")
                .replacing(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/, with: "<time>")
                .replacing(/\d{2}:\d{2}:\d{2}/, with: "<clock>")
                .replacing(/\b\d{2}:\d{2}\b/, with: "<clock>")
                .replacing(/in (\d+h )?(\d+m )?\d+s/, with: "in <duration>")
                .replacing(/≤\d+(\.\d+)?(ms|s|m|h|d)/, with: "≤<wait>")
                .replacing(/rg[ksr]_[A-Za-z0-9_-]+/, with: "<secret>")
                .replacing(/\/\S*\/certs\//, with: "<dir>/certs/")
                .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        .reversed().drop(while: \.isEmpty).reversed().joined(separator: "\n")
    }

    @Test func theTourRunsAsPrinted() async throws {
        let steps = try Self.steps(of: String(contentsOf: Self.readme, encoding: .utf8))
        #expect(steps.count >= 12, "the tour's console blocks: \(steps.map(\.command))")
        #expect(steps.contains { $0.command.contains("reloadgate apps add") })
        #expect(steps.contains { $0.command.contains("/3/device/") })
        #expect(steps.contains { $0.command.hasPrefix("reloadgate pending") })
        #expect(steps.contains { $0.command.contains("/reloads") })

        let directory = try TemporaryDirectory("readme-tour")
        defer { directory.remove() }
        let gateway = try ReloadGateProcess(
            ["serve"], in: directory.url, environment: ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"]
        )
        defer { gateway.send(SIGKILL) }
        let apiLine = try await gateway.waitForOutputLine(containing: "listening on")
        let apnsLine = try await gateway.waitForOutputLine(containing: "APNs pushes to")
        let apiPort = try #require(apiLine.firstMatch(of: /127\.0\.0\.1:(\d+)/)).1
        let apnsPort = try #require(apnsLine.firstMatch(of: /127\.0\.0\.1:(\d+)/)).1

        // One bash session, so that variables and functions carry from step to step; a marker line
        // before each step splits the output. The outbox is written after the push's answer, by the
        // delivery worker: before reading it, the script waits for the lines the tour expects so far.
        var script = "exec 2>&1\n"
        var outboxLines = 0
        for (index, step) in steps.enumerated() {
            var command = step.command
                .replacing("localhost:8443", with: "localhost:\(apiPort)")
                .replacing("localhost:2197", with: "localhost:\(apnsPort)")
            if command.hasPrefix("tail -n 1 data/outbox.jsonl") {
                outboxLines += 1
                command = """
                    for _ in $(seq 400); do [ "$(cat data/outbox.jsonl 2>/dev/null | wc -l)" -ge \(outboxLines) ] && break; sleep 0.05; done
                    \(command)
                    """
            }
            script += "printf '\\n@@step \(index)@@\\n'\n\(command)\n"
        }
        let scriptFile = directory.url.appendingPathComponent("tour.sh")
        try script.write(to: scriptFile, atomically: true, encoding: .utf8)

        let binDirectory = try ReloadGateProcess.binaryURL.deletingLastPathComponent().path
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RELOADGATE_") }
        environment["PATH"] = binDirectory + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        let bash = try ChildProcess(URL(fileURLWithPath: "/bin/bash"), [scriptFile.path], in: directory.url, environment: environment)
        let status = try await bash.waitForExit(timeout: .seconds(120))
        // curl's headers end in CR LF, which Swift reads as one character: made plain line ends first.
        let output = bash.standardOutput.replacing("\r\n", with: "\n")
        #expect(status == 0, "the tour's script: \(output)")

        var printed: [Int: [String]] = [:]
        var current: Int?
        for line in output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if let marker = line.wholeMatch(of: /@@step (\d+)@@/) {
                current = Int(marker.1)
                printed[current!] = []
            } else if let index = current {
                printed[index, default: []].append(line)
            }
        }
        for (index, step) in steps.enumerated() {
            let expected = Self.masked(step.output)
            let actual = Self.masked(printed[index] ?? [])
            #expect(actual == expected, "README step `\(step.command)` printed:\n\(printed[index]?.joined(separator: "\n") ?? "")")
        }
    }

    /// The masking keeps what the tour shows: a different decision, count or id of a request is a
    /// difference, not noise.
    @Test func maskingKeepsWhatMatters() {
        let a = Self.masked(["reloadgate-decision: scheduled", "request 2 from push, received 2026-11-29T02:43:40.856Z"])
        let b = Self.masked(["reloadgate-decision: deferred", "request 2 from push, received 2026-11-29T02:43:41.000Z"])
        let c = Self.masked(["reloadgate-decision: scheduled", "request 3 from push, received 2026-11-30T00:00:00Z"])
        #expect(a != b)
        #expect(a != c)
        #expect(Self.masked(["in 5m 0s  2026-11-29T02:48:40.829Z  10"]) == Self.masked(["in 4m 59s 2026-11-29T02:48:40.001Z 10", ""]))
    }
}
