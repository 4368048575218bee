import Foundation
import ReloadGateTesting
import Testing

/// The server learns what its store offers from ``GatewayStore`` (``GatewayStore/cluster``,
/// ``GatewayStore/periodicUpkeep``), never by asking which engine it has: a new engine then needs no
/// change in the server.
@Suite(.offThePool)
struct StoreCapabilityTests {
    @Test func theServerNeverAsksWhichStoreItHas() throws {
        let folder = DocumentationTests.root.appendingPathComponent("Sources/ReloadGateServer")
        let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        #expect(files.count > 50)
        let downcast = /(as[?!]|is)\s+(any\s+)?(SQLiteStore|PostgresStore|ClusterStore)\b/
        var found: [String] = []
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains(downcast) {
                found.append("\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(found.isEmpty, "the server tells stores apart by their type: \(found)")
    }
}
