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
}
