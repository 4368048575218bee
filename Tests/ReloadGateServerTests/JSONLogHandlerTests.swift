import Foundation
import Logging
import ReloadGateServer
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(5)))
struct JSONLogHandlerTests {
    @Test func writesOneParsableObjectPerLineWithMetadata() throws {
        let lines = Mutex<[String]>([])
        var handler = JSONLogHandler(label: "reloadgate") { line in lines.withLock { $0.append(line) } }
        handler.logLevel = .debug
        handler[metadataKey: "request"] = "r-1"
        var logger = Logger(label: "reloadgate") { _ in handler }
        logger.logLevel = .debug
        logger.info("store \"open\"\nnext line", metadata: ["path": "/data/reloadgate.sqlite", "tab": "a\tb\u{1}"])
        logger.trace("not written")

        let written = lines.withLock { $0 }
        try #require(written.count == 1)
        #expect(written[0].hasSuffix("}\n"))
        #expect(written[0].filter { $0 == "\n" }.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written[0].utf8)) as? [String: String])
        #expect(object["level"] == "info")
        #expect(object["label"] == "reloadgate")
        #expect(object["message"] == "store \"open\"\nnext line")
        #expect(object["path"] == "/data/reloadgate.sqlite")
        #expect(object["request"] == "r-1")
        #expect(object["tab"] == "a\tb\u{1}")
        #expect(object["time"]?.hasSuffix("Z") == true)
    }
}
