import Foundation
import ReloadGateTesting
import Testing

/// docs/CLI.md's table of every command and option is the binary's: what `reloadgate
/// --experimental-dump-help` (swift-argument-parser's description of the whole tool) lists, no more, no
/// less.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct DocumentationTests {
    static let page = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/CLI.md")

    /// The binary's leaf commands (`apps add`, not `apps`) and their long options, `--help` aside.
    static func commands() async throws -> [String: Set<String>] {
        let directory = try TemporaryDirectory("cli-doc")
        defer { directory.remove() }
        let run = try await ReloadGateProcess.run(["--experimental-dump-help"], in: directory.url)
        #expect(run.status == 0, "\(run.stderr)")
        let tool = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        var commands: [String: Set<String>] = [:]
        func walk(_ command: [String: Any], _ path: [String]) {
            let name = path + [command["commandName"] as? String ?? "?"]
            let subcommands = command["subcommands"] as? [[String: Any]] ?? []
            if subcommands.isEmpty, name.count > 1, name.last != "help" {
                var options: Set<String> = []
                for argument in command["arguments"] as? [[String: Any]] ?? [] {
                    for spelling in argument["names"] as? [[String: Any]] ?? [] where spelling["kind"] as? String == "long" {
                        if let long = spelling["name"] as? String, long != "help" { options.insert("--" + long) }
                    }
                }
                commands[name.joined(separator: " ")] = options
            }
            for subcommand in subcommands { walk(subcommand, name) }
        }
        walk(try #require(tool["command"] as? [String: Any]), [])
        return commands
    }

    /// The page's rows: `| `reloadgate apps add` | arguments | `--team`, ... | what it does |`.
    static func documented() throws -> [String: Set<String>] {
        let text = try String(contentsOf: page, encoding: .utf8)
        var rows: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") {
            guard let row = line.wholeMatch(of: /\| `(reloadgate [a-z -]+)` \| [^|]* \| ([^|]*) \| .*/) else { continue }
            rows[String(row.output.1)] = Set(row.output.2.matches(of: /`(--[a-z-]+)`/).map { String($0.output.1) })
        }
        return rows
    }

    @Test func theCommandLineReferenceListsEveryCommandAndOption() async throws {
        let commands = try await Self.commands()
        let documented = try Self.documented()
        #expect(commands.count > 20)
        for (command, options) in commands.sorted(by: { $0.key < $1.key }) {
            guard let listed = documented[command] else {
                Issue.record("docs/CLI.md lacks the command \(command)")
                continue
            }
            #expect(options.subtracting(listed).isEmpty, "docs/CLI.md lacks \(command)'s \(options.subtracting(listed).sorted())")
            #expect(listed.subtracting(options).isEmpty, "docs/CLI.md names \(command)'s \(listed.subtracting(options).sorted()), which it does not have")
        }
        let gone = Set(documented.keys).subtracting(commands.keys)
        #expect(gone.isEmpty, "docs/CLI.md names commands the binary does not have: \(gone.sorted())")
    }
}
