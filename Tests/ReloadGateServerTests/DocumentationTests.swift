import Foundation
import ReloadGateServer
import ReloadGateTesting
import Testing

/// The documents a person reads first must match the keys the code knows.
@Suite(.offThePool, .timeLimit(.minutes(5)))
struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func theExampleConfigurationIsTheDefaultAndItsCommentedKeysAreReal() throws {
        let path = Self.root.appendingPathComponent("deploy/reloadgate.example.yaml").path
        #expect(try GatewayConfiguration.load(file: path, environment: [:]) == GatewayConfiguration())

        // Uncomment the keys shown as comments (`  # certificate: /etc/...`): the file must still load.
        let text = try Self.read("deploy/reloadgate.example.yaml")
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.replacing(/^(\s+)# ([A-Za-z]+: \S.*)$/) { "\($0.output.1)\($0.output.2)" }
        }.joined(separator: "\n")
        #expect(uncommented != text)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reloadgate-doc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("all.yaml").path
        try uncommented.write(toFile: file, atomically: true, encoding: .utf8)
        let loaded = try GatewayConfiguration.load(file: file, environment: [:])
        #expect(loaded.tls.certificate == "/etc/reloadgate/server.pem")
        #expect(loaded.tls.clientCA == "/etc/reloadgate/senders-ca.pem")

        for key in ConfigurationKey.all {
            let leaf = key.name.split(separator: ".").last.map(String.init) ?? key.name
            #expect(text.contains("\(leaf):"), "deploy/reloadgate.example.yaml does not show \(key.name)")
        }
    }

    /// The reference pages a reader is sent to for configuration keys and metrics.
    static let referencePages = [
        "README.md", "docs/CONFIGURATION.md", "docs/API.md", "docs/CLI.md", "docs/METRICS.md", "docs/OPERATIONS.md",
        "docs/DEPLOYMENT.md", "docs/APNS.md",
    ]

    /// Every key has its row in docs/CONFIGURATION.md: name, variable and the values it takes, as the
    /// code parses them.
    @Test func theConfigurationReferenceListsEveryKey() throws {
        let page = try Self.read("docs/CONFIGURATION.md")
        for key in ConfigurationKey.all {
            #expect(
                page.contains("| `\(key.name)` | `\(key.environmentVariable)` | \(key.expected) |"),
                "docs/CONFIGURATION.md lacks the row of \(key.name): | `\(key.name)` | `\(key.environmentVariable)` | \(key.expected) |"
            )
        }
    }

    /// A key named on a reference page (`listen.port`, `scheduling.kinds.scores.dailyBudget`) is a key
    /// the gateway has.
    @Test func theReferenceNamesNoKeyTheCodeLacks() throws {
        let known = Set(ConfigurationKey.all.map(\.name))
        let sections = Set(known.compactMap { $0.split(separator: ".").first.map(String.init) })
        // A kind's fields: the widgets' keys after `scheduling.` (`dailyBudget`, `freshness.within`), and
        // their groups (`freshness`).
        let fields = Set(known.filter { $0.hasPrefix("scheduling.") }.map { String($0.dropFirst("scheduling.".count)) }.flatMap { field in
            [field] + (field.contains(".") ? [String(field.split(separator: ".")[0])] : [])
        })
        let named = /`([a-z]+(?:\.[A-Za-z<>][A-Za-z<> -]*)+)(?:[:=][^`]*)?`/
        var unknown: [String] = []
        for path in Self.referencePages {
            for match in try Self.read(path).matches(of: named) {
                let name = String(match.output.1)
                let parts = name.split(separator: ".").map(String.init)
                guard sections.contains(parts[0]), parts.count > 1, !name.hasSuffix(".md") else { continue }
                if known.contains(name) { continue }
                // `scheduling[.controls|.liveactivity].kinds.<kind>.<field>`, with a placeholder or a kind.
                if let kinds = parts.firstIndex(of: "kinds"), parts[0] == "scheduling",
                    known.contains(parts[..<kinds].joined(separator: ".") + ".dailyBudget"),
                    parts.count == kinds + 1 || parts.count == kinds + 2
                        || (parts.count >= kinds + 3
                            && (fields.contains(parts[(kinds + 2)...].joined(separator: ".")) || parts[kinds + 2].hasPrefix("<")))
                {
                    continue
                }
                // A section alone, or a section's keys as a pattern (`scheduling.*`, `listen.*`).
                if parts.count == 2, parts[1] == "*" || known.contains(where: { $0.hasPrefix(name + ".") }) { continue }
                unknown.append("\(path): \(name)")
            }
        }
        #expect(unknown.isEmpty, "keys named in the reference that the gateway does not have: \(unknown)")
    }

    /// docs/METRICS.md has a row per series the gateway exports, with its type and labels, and names no
    /// series the gateway does not export; the sources name no series missing from the list.
    @Test func theMetricsReferenceListsEverySeries() throws {
        let page = try Self.read("docs/METRICS.md")
        for series in GatewayMetrics.series {
            let labels = series.labels.isEmpty ? "none" : series.labels.joined(separator: ", ")
            #expect(
                page.contains("| `\(series.name)` | \(series.type.rawValue) | \(labels) |"),
                "docs/METRICS.md lacks the row of \(series.name): | `\(series.name)` | \(series.type.rawValue) | \(labels) |"
            )
        }
        let exported = Set(GatewayMetrics.series.map(\.name))
        // The store's SQL functions share the prefix; they are not metrics.
        let functions = try Self.citingFiles().filter { $0.path.hasPrefix("Sources/ReloadGateStore") }
            .flatMap { $0.text.matches(of: /CREATE FUNCTION (reloadgate_[a-z_]+)/).map { String($0.output.1) } }
        let name = /\breloadgate_[a-z_]+[a-z]\b/
        var unknown: [String] = []
        for path in Self.referencePages {
            for match in try Self.read(path).matches(of: name) where !exported.contains(String(match.output)) {
                if !functions.contains(String(match.output)) { unknown.append("\(path): \(match.output)") }
            }
        }
        for (path, text) in try Self.citingFiles() where path.hasPrefix("Sources/ReloadGateServer") {
            for match in text.matches(of: /"(reloadgate_[a-z_]+)"/) where !exported.contains(String(match.output.1)) {
                unknown.append("\(path): \(match.output.1)")
            }
        }
        #expect(unknown.isEmpty, "metrics named that GatewayMetrics.series does not list: \(unknown)")
    }

    /// The repository's text files that may cite documents: sources, tests, scripts, fuzz targets, docs.
    static func citingFiles() throws -> [(path: String, text: String)] {
        var files: [(String, String)] = []
        for folder in ["Sources", "Tests", "scripts", "Fuzz", "docs", "deploy", ".ci"] {
            guard let walker = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path) else { continue }
            for case let relative as String in walker {
                let path = "\(folder)/\(relative)"
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isDirectory),
                    !isDirectory.boolValue, let text = try? read(path)
                else { continue }
                files.append((path, text))
            }
        }
        for path in ["README.md", "Package.swift"] { files.append((path, try read(path))) }
        return files
    }

    /// Every document a file names (an upper-case name ending in `.md`, with or without a folder) is in the
    /// repository: relative to the repository, to the citing file's folder, or in docs/, and never in a folder
    /// beside the repository. Absolute paths (an installed copy) are not the repository's.
    @Test func everyDocumentNamedIsInTheRepository() throws {
        let name = /[A-Za-z0-9_.\/-]*\b[A-Z][A-Z_]+\.md\b/
        var missing: [String] = []
        for (path, text) in try Self.citingFiles() {
            let folder = (path as NSString).deletingLastPathComponent
            for match in text.matches(of: name) {
                let cited = String(match.output)
                if cited.hasPrefix("/") { continue }
                let candidates = [cited, "\(folder)/\(cited)", "docs/\((cited as NSString).lastPathComponent)"]
                // A path with `..` counts only where it stays inside the repository.
                let found = candidates.contains {
                    let resolved = Self.root.appendingPathComponent($0).standardizedFileURL.path
                    return resolved.hasPrefix(Self.root.standardizedFileURL.path + "/") && FileManager.default.fileExists(atPath: resolved)
                }
                if !found { missing.append("\(path): \(cited)") }
            }
        }
        #expect(missing.isEmpty, "documents named but not in the repository: \(Set(missing).sorted())")
    }

    /// The decision records: docs/decisions/NNNN-title.md, each opening with `# NNNN. Title`.
    static func decisionRecords() throws -> [(file: String, title: String, text: String)] {
        let folder = root.appendingPathComponent("docs/decisions")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".md") && $0 != "README.md" }
            .sorted().map { file in
                let text = try read("docs/decisions/\(file)")
                let title = text.prefix { $0 != "\n" }.replacing(#/^\# \d{4}\. /#, with: "")
                return (file, String(title), text)
            }
    }

    /// Every record has a status, its three parts, and a line in the index; a superseded record names the
    /// record that replaced it, and that record exists.
    @Test func everyDecisionRecordHasAStatusAndIsInTheIndex() throws {
        let records = try Self.decisionRecords()
        let index = try Self.read("docs/DECISIONS.md")
        #expect(records.count > 70)
        for (number, record) in records.enumerated() {
            #expect(record.file.hasPrefix(String(format: "%04d-", number + 1)), "records are numbered 0001 on, without gaps: \(record.file)")
            #expect(record.text.hasPrefix(String(format: "# %04d. ", number + 1)), "\(record.file) opens with its number and title")
            let status = record.text.firstMatch(of: /\n- Status: (Accepted\.|Superseded (?:in part )?by \[(\d{4})\]\(([^)]+)\))/)
            #expect(status != nil, "\(record.file) has no status line")
            if let replacement = status?.output.3 {
                #expect(records.contains { $0.file == replacement }, "\(record.file) is superseded by \(replacement), which does not exist")
            }
            for part in ["## Context", "## Decision", "## Consequences"] {
                #expect(record.text.contains("\n\(part)\n"), "\(record.file) lacks \(part)")
            }
            #expect(index.contains("](decisions/\(record.file))"), "docs/DECISIONS.md does not list \(record.file)")
        }
    }

    /// Every decision that a file cites by title (the index's file name, a comma and the title in double
    /// quotes, a comment wrapped over lines included) is a record, as written or as the start of its title.
    @Test func everyDecisionCitedExists() throws {
        func normalized(_ text: some StringProtocol) -> String {
            String(text).replacing("`", with: "").split(whereSeparator: \.isWhitespace).joined(separator: " ").lowercased()
        }
        let headings = try Self.decisionRecords().map { normalized($0.title) }
        #expect(headings.count > 50)
        let citation = /DECISIONS(?:\.md)?\]?(?:\([^)]*\))?[,:]?\s+"([^"]+)"/
        var missing: [String] = []
        var cited = 0
        for (path, text) in try Self.citingFiles() {
            // A citation wrapped over comment lines or a string continued with a backslash reads as one line.
            let joined = text.replacing(/\\?\n\s*(?:\/\/\/|\/\/|#)?\s?/, with: " ")
            for match in joined.matches(of: citation) {
                cited += 1
                let heading = normalized(match.output.1).trimmingCharacters(in: CharacterSet(charactersIn: ". "))
                if !headings.contains(where: { $0 == heading || $0.hasPrefix(heading) }) {
                    missing.append("\(path): \"\(match.output.1)\"")
                }
            }
        }
        #expect(cited > 20)
        #expect(missing.isEmpty, "cited DECISIONS headings that do not exist: \(missing)")
    }
}
