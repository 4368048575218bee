import Foundation
import NIOHTTP2
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The API listener's frame-level HTTP/2 (issue 30) against what the APNs listener's handler is held to:
/// malformed header blocks reset with PROTOCOL_ERROR and the connection kept, bodies past the limit
/// answered and reset, more streams than allowed refused, many streams at once answered, a flood of
/// requests that the client gives up on leaving the gateway answering. Over real TLS and HTTP/2.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct APIHTTP2HostileTests {
    static let bundle = "com.example.scores"

    static func withGateway(_ body: @Sendable (TestGateway, AppCredentials) async throws -> Void) async throws {
        try await TestGateway.withRunningApp(bundle, directoryNamed: "api-hostile", body)
    }

    static func request(_ method: String, _ path: String, _ fields: [(String, String)] = []) -> [(String, String)] {
        [(":method", method), (":scheme", "https"), (":path", path), (":authority", "localhost")] + fields
    }

    @Test func malformedRequestsAreResetWithProtocolErrorAndTheConnectionStays() async throws {
        try await Self.withGateway { gateway, credentials in
            let client = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration(), validating: false)
            defer { Task { await client.close() } }
            let path = "/v1/apps/\(Self.bundle)/devices/\(String(repeating: "ab", count: 32))"
            let pseudo = [(":method", "PUT"), (":scheme", "https"), (":path", path), (":authority", "localhost")]
            let fields = [("authorization", "bearer \(credentials.apiKey)")]
            let body = Array(#"{"widgets":[]}"#.utf8)
            let cases: [(String, [(String, String)])] = [
                ("an upper-case name", pseudo + fields + [("X-Client-Build", "1")]),  // not in HPACK's static table, which would lower its case
                ("a pseudo-header after a regular field", [(":method", "PUT"), (":scheme", "https")] + fields + [(":path", path)]),
                ("an unknown pseudo-header", pseudo + [(":protocol", "websocket")] + fields),
                ("a repeated pseudo-header", pseudo + [(":path", path)] + fields),
                ("no :scheme", [(":method", "PUT"), (":path", path)] + fields),
                ("a connection-specific field", pseudo + fields + [("connection", "keep-alive")]),
                ("a line feed in a value", pseudo + fields + [("user-agent", "a\nb")]),
                ("a content-length that is no number", pseudo + fields + [("content-length", "many")]),
                ("a body shorter than its content-length", pseudo + fields + [("content-length", "40")]),
                ("a body longer than its content-length", pseudo + fields + [("content-length", "5")]),
            ]
            for (name, headers) in cases {
                let answer = try await client.send(headers, body: body)
                #expect(answer.reset == .protocolError, "\(name): status \(answer.status) \(answer.body)")
            }
            let valid = try await client.send(pseudo + fields + [("content-length", "\(body.count)")], body: body)
            #expect(valid.status == 200, "\(valid.body)")
            #expect(valid.header("content-type") == "application/json")
        }
    }

    /// A body past the 64 KiB limit gets the route's own answer (413 too-large), and the gateway reads no
    /// more of it; the connection serves the next request.
    @Test func aBodyPastTheLimitIsAnsweredByTheRouteAndTheConnectionGoesOn() async throws {
        try await Self.withGateway { gateway, credentials in
            let client = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration())
            defer { Task { await client.close() } }
            let path = "/v1/apps/\(Self.bundle)/devices/\(String(repeating: "ab", count: 32))"
            let large = Array(repeating: UInt8(ascii: " "), count: 100_000)
            let answer = try await client.send(Self.request("PUT", path, [("authorization", "bearer \(credentials.apiKey)")]), body: large)
            #expect(answer.status == 413, "\(answer.status) \(answer.body)")
            #expect(answer.body.contains("too-large"), "\(answer.body)")
            let health = try await client.send(Self.request("GET", "/health"))
            #expect(health.status == 200)
            #expect(health.body == #"{"status":"alive"}"#)
        }
    }

    /// A HEAD request gets the head of the route's answer and no body (RFC 9110 9.3.2), and the stream ends.
    @Test func aHeadRequestIsAnsweredWithoutABody() async throws {
        try await Self.withGateway { gateway, _ in
            let client = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration())
            defer { Task { await client.close() } }
            let get = try await client.send(Self.request("GET", "/health"))
            #expect(!get.body.isEmpty)
            let head = try await client.send(Self.request("HEAD", "/health"))
            #expect(head.reset == nil, "\(head)")
            #expect(head.body.isEmpty, "a HEAD answer carried a body: \(head.body)")
        }
    }

    /// Many streams at once on one connection: every one answered (the registry's group commit gathers them).
    @Test func twoHundredStreamsAtOnceAreAllAnswered() async throws {
        try await Self.withGateway { gateway, credentials in
            let client = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration())
            defer { Task { await client.close() } }
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let token = String(format: "%064x", index + 1)
                        let body = Array(#"{"widgets":[{"id":"w","kind":"scores","family":"systemSmall"}]}"#.utf8)
                        return try await client.send(
                            Self.request("PUT", "/v1/apps/\(Self.bundle)/devices/\(token)", [("authorization", "bearer \(credentials.apiKey)")]),
                            body: body
                        ).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            // Beyond the 100 concurrent streams the server allows, the client waits (NIO queues them).
            #expect(statuses.count == 200)
            #expect(statuses.allSatisfy { $0 == 200 }, "\(Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count))")
        }
    }

    /// A header block larger than the 16 KiB the listener announces: refused, and the gateway goes on.
    @Test func anOversizeHeaderBlockIsRefusedAndTheGatewayGoesOn() async throws {
        try await Self.withGateway { gateway, _ in
            let client = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration(), validating: false)
            defer { Task { await client.close() } }
            let huge = (0..<40).map { ("x-filler-\($0)", String(repeating: "a", count: 1000)) }
            let refused = try? await client.send(Self.request("GET", "/health", huge))
            #expect(refused?.status != 200, "a 40 KB header block was served")
            let fresh = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration())
            defer { Task { await fresh.close() } }
            #expect(try await fresh.send(Self.request("GET", "/health")).status == 200)
        }
    }

    /// A client that opens streams and leaves (a thousand requests whose body never comes, then the
    /// connection dropped): nothing is left behind that stops the gateway answering.
    @Test func abandonedStreamsLeaveTheGatewayAnswering() async throws {
        try await Self.withGateway { gateway, credentials in
            for _ in 0..<5 {
                let client = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration())
                let path = "/v1/apps/\(Self.bundle)/reloads"
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<50 {
                        group.addTask { _ = try? await client.send(Self.request("POST", path, [("content-length", "10")]), body: [UInt8(ascii: "{")], endingStream: false) }
                    }
                    try? await Task.sleep(for: .milliseconds(200))
                    await client.close()
                    group.cancelAll()
                }
            }
            let client = try await RawHTTP2Client.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration())
            defer { Task { await client.close() } }
            let health = try await client.send(Self.request("GET", "/health"))
            #expect(health.status == 200)
            _ = credentials
        }
    }
}
