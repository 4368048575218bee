import Foundation
import ReloadGateServer
import Testing

/// The documents a person reads first must match the keys the code knows.
@Suite(.timeLimit(.minutes(5)))
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

    @Test func theREADMEListsEveryKeyAndItsVariable() throws {
        let readme = try Self.read("README.md")
        for key in ConfigurationKey.all {
            #expect(readme.contains("| `\(key.name)` | `\(key.environmentVariable)` |"), "README.md lacks \(key.name)")
        }
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
    /// repository: relative to the repository, to the citing file's folder, or in docs/ (issue 31: the design
    /// documents were cited from a folder beside the repository). Absolute paths (an installed copy) are not
    /// the repository's.
    @Test func everyDocumentNamedIsInTheRepository() throws {
        let name = /[A-Za-z0-9_.\/-]*\b[A-Z][A-Z_]+\.md\b/
        var missing: [String] = []
        for (path, text) in try Self.citingFiles() {
            let folder = (path as NSString).deletingLastPathComponent
            for match in text.matches(of: name) {
                let cited = String(match.output)
                if cited.hasPrefix("/") { continue }
                let candidates = [cited, "\(folder)/\(cited)", "docs/\((cited as NSString).lastPathComponent)"]
                let found = !cited.contains("../") && candidates.contains {
                    FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0).path)
                }
                if !found { missing.append("\(path): \(cited)") }
            }
        }
        #expect(missing.isEmpty, "documents named but not in the repository: \(Set(missing).sorted())")
    }

    /// Every heading of docs/DECISIONS.md that a file cites (the file's name, a comma and the heading in
    /// double quotes, a comment wrapped over lines included) exists, as written or as the start of a heading.
    @Test func everyDecisionCitedExists() throws {
        func normalized(_ text: some StringProtocol) -> String {
            String(text).replacing("`", with: "").split(whereSeparator: \.isWhitespace).joined(separator: " ").lowercased()
        }
        let headings = try Self.read("docs/DECISIONS.md").split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("## ") else { return nil }
            // Without the date and issue in parentheses at the end.
            return normalized(line.dropFirst(3).replacing(/\s*\((?:\d{4}-\d{2}|foundation)[^)]*\)\s*$/, with: ""))
        }
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
