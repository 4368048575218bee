import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The registry API end to end: real TLS, HTTP/2, the SQLite file, an app created by a second store
/// handle on the same data directory (as `reloadgate apps add` does while the server runs).
@Suite(.timeLimit(.minutes(10)), .heavy)
struct RegistryAPITests {
    static let tokenA = String(repeating: "ab", count: 32)
    static let tokenB = String(repeating: "cd", count: 32)

    struct Client {
        let http: HTTPClient
        let baseURL: String
        let apiKey: String

        func send(_ method: HTTPMethod, _ path: String, json: String? = nil, key: String? = nil, bodyBytes: Int? = nil)
            async throws -> (status: HTTPResponseStatus, body: [String: Any])
        {
            var request = HTTPClientRequest(url: baseURL + path)
            request.method = method
            if let key = key ?? Optional(apiKey), !key.isEmpty { request.headers.add(name: "authorization", value: "bearer \(key)") }
            if let json {
                request.headers.add(name: "content-type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: json))
            } else if let bodyBytes {
                request.body = .bytes(ByteBuffer(repeating: UInt8(ascii: " "), count: bodyBytes))
            }
            let response = try await http.execute(request, timeout: .seconds(30))
            let data = Data((try await response.body.collect(upTo: 1 << 20)).readableBytesView)
            let body = data.isEmpty ? [:] : (try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:])
            return (response.status, body)
        }
    }

    func withRegistry(_ body: @Sendable (Client, AppCredentials) async throws -> Void) async throws {
        try await TestGateway.withRunning { gateway in
            let store = try SQLiteStore(directory: gateway.configuration.dataDirectory, environment: .sandbox, now: Date())
            let credentials = try await store.createApp(bundle: try BundleID("com.example.scores"), now: Date())
            try store.close()
            try await gateway.withHTTPClient { http in
                try await body(Client(http: http, baseURL: gateway.baseURL, apiKey: credentials.apiKey), credentials)
            }
        }
    }

    static let twoWidgets = """
        {"environment":"sandbox","widgets":[
          {"id":"w1","kind":"scores","family":"systemSmall","configuration":{"team":"42"},"pushEnabled":true},
          {"id":"w2","kind":"news","family":"systemMedium","configuration":{}}
        ]}
        """

    @Test func registerADeviceReportATimelineAndReadConfigurations() async throws {
        try await withRegistry { client, _ in
            let put = try await client.send(.PUT, "/v1/apps/com.example.scores/devices/\(Self.tokenA)", json: Self.twoWidgets)
            #expect(put.status == .ok)
            #expect((put.body["widgets"] as? [[String: Any]])?.count == 2)

            let timeline = try await client.send(
                .PUT,
                "/v1/apps/com.example.scores/devices/\(Self.tokenA)/widgets/w1/timeline",
                json: #"{"entries":[{"date":"2026-11-22T14:00:00Z"},{"date":1795442400,"relevance":0.5}],"policy":"atEnd"}"#
            )
            #expect(timeline.status == .ok)
            #expect(timeline.body["plannedReload"] as? String == "2026-11-23T14:00:00Z")

            let configurations = try await client.send(.GET, "/v1/apps/com.example.scores/configurations?kind=scores")
            #expect(configurations.status == .ok)
            let list = try #require(configurations.body["configurations"] as? [[String: Any]])
            #expect(list.count == 1)
            #expect(list.first?["family"] as? String == "systemSmall")
            #expect(list.first?["count"] as? Int == 1)
            #expect((list.first?["configuration"] as? [String: String]) == ["team": "42"])

            let all = try await client.send(.GET, "/v1/apps/com.example.scores/configurations")
            #expect((all.body["configurations"] as? [[String: Any]])?.count == 2)
        }
    }

    @Test func callsWithoutTheAppsKeyAreRefused() async throws {
        try await withRegistry { client, _ in
            let none = try await client.send(.GET, "/v1/apps/com.example.scores/configurations", key: "")
            #expect(none.status == .unauthorized)
            #expect(none.body["code"] as? String == "unauthorized")
            let wrong = try await client.send(.GET, "/v1/apps/com.example.scores/configurations", key: "rgk_nope")
            #expect(wrong.status == .unauthorized)
            let otherApp = try await client.send(.GET, "/v1/apps/com.example.news/configurations")
            #expect(otherApp.status == .forbidden)
            #expect(otherApp.body["code"] as? String == "forbidden")
        }
    }

    @Test func badInputGetsAClearErrorAndStoresNothing() async throws {
        try await withRegistry { client, _ in
            let path = "/v1/apps/com.example.scores/devices/\(Self.tokenA)"
            let cases: [(String?, Int?, HTTPResponseStatus, String)] = [
                ("not json", nil, .badRequest, "invalid-json"),
                ("[1,2]", nil, .badRequest, "invalid-json"),
                (#"{"widgets":[{"id":"w1","kind":"scores","family":"systemHuge"}]}"#, nil, .unprocessableEntity, "invalid-field"),
                (#"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall","configuration":{"nested":{"a":1}}}]}"#, nil, .unprocessableEntity, "invalid-field"),
                (#"{"environment":"production","widgets":[]}"#, nil, .conflict, "other-environment"),
                (#"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall","pushEnabled":1}]}"#, nil, .unprocessableEntity, "invalid-field"),
                (#"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall"}],"previousToken":"xyz"}"#, nil, .unprocessableEntity, "invalid-field"),
                (
                    #"{"widgets":["# + (0..<65).map { #"{"id":"w\#($0)","kind":"k","family":"systemSmall"}"# }.joined(separator: ",") + "]}",
                    nil, .unprocessableEntity, "invalid-field"
                ),
                (nil, 70 * 1024, .payloadTooLarge, "too-large"),
            ]
            for (json, bytes, status, code) in cases {
                let answer = try await client.send(.PUT, path, json: json, bodyBytes: bytes)
                #expect(answer.status == status, "\(json ?? "\(bytes ?? 0) bytes")")
                #expect(answer.body["code"] as? String == code)
                #expect((answer.body["message"] as? String)?.isEmpty == false)
            }
            let family = try await client.send(.PUT, path, json: #"{"widgets":[{"id":"w1","kind":"scores","family":"systemHuge"}]}"#)
            #expect((family.body["message"] as? String)?.hasPrefix("widgets[0].family must be one of systemSmall") == true)
            let badToken = try await client.send(.PUT, "/v1/apps/com.example.scores/devices/xyz", json: Self.twoWidgets)
            #expect(badToken.status == .unprocessableEntity)

            let configurations = try await client.send(.GET, "/v1/apps/com.example.scores/configurations")
            #expect((configurations.body["configurations"] as? [Any])?.isEmpty == true)
        }
    }

    @Test func previousTokenRetiresTheOldTokenAndDeleteRemovesTheDevice() async throws {
        try await withRegistry { client, _ in
            let base = "/v1/apps/com.example.scores/devices/"
            #expect(try await client.send(.PUT, base + Self.tokenA, json: Self.twoWidgets).status == .ok)
            let moved = try await client.send(
                .PUT,
                base + Self.tokenB,
                json: #"{"previousToken":"\#(Self.tokenA)","widgets":[{"id":"w1","kind":"scores","family":"systemSmall"}]}"#
            )
            #expect(moved.body["retiredPreviousToken"] as? Bool == true)
            let oldTimeline = try await client.send(.PUT, base + Self.tokenA + "/widgets/w1/timeline", json: #"{"entries":[],"policy":"never"}"#)
            #expect(oldTimeline.status == .gone)
            #expect(oldTimeline.body["code"] as? String == "unregistered")
            let unknownWidget = try await client.send(.PUT, base + Self.tokenB + "/widgets/w9/timeline", json: #"{"entries":[],"policy":"never"}"#)
            #expect(unknownWidget.status == .notFound)
            let badPolicy = try await client.send(.PUT, base + Self.tokenB + "/widgets/w1/timeline", json: #"{"entries":[],"policy":"sometimes"}"#)
            #expect(badPolicy.status == .unprocessableEntity)

            #expect(try await client.send(.DELETE, base + Self.tokenB).status == .noContent)
            #expect(try await client.send(.DELETE, base + Self.tokenB).status == .notFound)
        }
    }
}
