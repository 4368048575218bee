import Foundation
import ReloadGateKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// WidgetKit's `WidgetInfo` as the mapping sees it (the WidgetKit layer conforms Apple's type the same way).
struct StandInWidget: WidgetDescribing {
    var kind: String
    var familyName: String
    /// What the app's configuration closure reads (an intent's team, say).
    var team: String?
}

/// WidgetKit's `ControlInfo` as the mapping sees it.
struct StandInControl: ControlDescribing {
    var kind: String
    var pushTokenData: Data?
}

/// A gateway in the test process: answers each request from a script (a status, a body, headers, or
/// no answer at all), and records what it was sent.
final class ScriptedTransport: RegistryTransport {
    enum Answer: Sendable {
        case status(Int, body: String = "{}", headers: [String: String] = [:])
        case away
    }

    private let state: Mutex<(script: [Answer], otherwise: Answer, sent: [URLRequest])>

    init(_ script: [Answer] = [], otherwise: Answer = .status(200)) {
        state = Mutex((script, otherwise, []))
    }

    /// From now on, every request gets `answer`.
    func answerAll(_ answer: Answer) { state.withLock { $0.script = []; $0.otherwise = answer } }

    var sent: [URLRequest] { state.withLock { $0.sent } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let answer = state.withLock { state -> Answer in
            state.sent.append(request)
            return state.script.isEmpty ? state.otherwise : state.script.removeFirst()
        }
        switch answer {
        case .away:
            throw URLError(.cannotConnectToHost)
        case .status(let status, let body, let headers):
            let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/2", headerFields: headers)!
            return (Data(body.utf8), response)
        }
    }
}

func temporaryDirectory(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("reloadgatekit-\(name)-\(UUID().uuidString)")
}

func client(_ transport: ScriptedTransport, deadline: Duration = .seconds(20), attempts: Int = 4) -> ReloadGateClient {
    ReloadGateClient(
        GatewayConfiguration(
            baseURL: URL(string: "https://gateway.example:8443/")!, bundle: "com.example.scores", registrationKey: "rgr_test",
            deadline: deadline, attempts: attempts
        ),
        transport: transport
    )
}

func json(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}
