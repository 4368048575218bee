import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
@testable import ReloadGateServer
import ReloadGateTesting
import Synchronization
import Testing

/// `reloadgate dashboard`'s proxy keeps no ambient credential: a browser sends a host's cookies to every
/// port of it, so another page on 127.0.0.1 would carry a cookie along. The token travels only as a bearer
/// header, and a change whose browser headers say it comes from another origin is refused even with it.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct DashboardProxyTests {
    /// Runs the proxy in front of a running gateway's admin socket for `body` (given the proxy's port).
    func withProxy(_ body: @Sendable @escaping (DashboardProxy, String, HTTPClient) async throws -> Void) async throws {
        try await TestGateway.withRunning { gateway in
            let proxy = DashboardProxy(socketPath: gateway.configuration.adminSocketPath, logger: Logger(label: "test"))
            let (ports, continuation) = AsyncStream<Int>.makeStream()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await proxy.run(port: 0) { continuation.yield($0) } }
                var iterator = ports.makeAsyncIterator()
                let port = try #require(await iterator.next())
                let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
                do {
                    try await body(proxy, "http://127.0.0.1:\(port)", client)
                } catch {
                    try? await client.shutdown()
                    group.cancelAll()
                    throw error
                }
                try await client.shutdown()
                group.cancelAll()
            }
        }
    }

    func send(_ client: HTTPClient, _ method: HTTPMethod, _ url: String, headers: [(String, String)] = []) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if method == .POST {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(Data(#"{"device":"\#(String(repeating: "ab", count: 32))"}"#.utf8))
        }
        return try await client.execute(request, timeout: .seconds(30))
    }

    @Test func theTokenIsNeverACookieAndACookieIsNoCredential() async throws {
        try await withProxy { proxy, base, client in
            // The page itself (no data) loads without the token, and sets nothing.
            let page = try await send(client, .GET, base + "/dashboard")
            #expect(page.status == .ok)
            #expect(page.headers["set-cookie"].isEmpty)
            // An address with the token in its query (an earlier version's) moves it to the fragment.
            let moved = try await send(client, .GET, base + "/?token=\(proxy.token)")
            #expect(moved.status == .seeOther)
            #expect(moved.headers.first(name: "location") == "/dashboard#token=\(proxy.token)")
            #expect(moved.headers["set-cookie"].isEmpty)
            // What another local page's request would carry: the cookie of 127.0.0.1. Not a credential.
            let withCookie = try await send(client, .GET, base + "/v1/stats", headers: [("cookie", "reloadgate_dashboard=\(proxy.token)")])
            #expect(withCookie.status == .unauthorized)
            let bearer = try await send(client, .GET, base + "/v1/stats", headers: [("authorization", "Bearer \(proxy.token)")])
            #expect(bearer.status == .ok)
        }
    }

    @Test func aChangeFromAnotherOriginIsRefusedEvenWithTheToken() async throws {
        try await withProxy { proxy, base, client in
            let other = "http://127.0.0.1:1"
            // A plain cross-origin form POST with the browser's cookie (how a local page flushed a reload).
            let forged = try await send(client, .POST, base + "/v1/flush", headers: [
                ("cookie", "reloadgate_dashboard=\(proxy.token)"), ("origin", other), ("sec-fetch-site", "same-site"),
            ])
            #expect([.forbidden, .unauthorized].contains(forged.status), "\(forged.status)")
            for headers in [[("origin", other)], [("sec-fetch-site", "same-site")], [("sec-fetch-site", "cross-site")]] {
                let refused = try await send(client, .POST, base + "/v1/flush", headers: [("authorization", "Bearer \(proxy.token)")] + headers)
                #expect(refused.status == .forbidden, "\(headers)")
                let body = try await refused.body.collect(upTo: 1 << 16)
                #expect(String(buffer: body).contains("cross-origin"), "\(headers)")
            }
            // The dashboard's own page (same origin), and a script (no browser headers), get through.
            for headers in [[("origin", base), ("sec-fetch-site", "same-origin")], []] {
                let allowed = try await send(client, .POST, base + "/v1/flush", headers: [("authorization", "Bearer \(proxy.token)")] + headers)
                #expect(![.forbidden, .unauthorized].contains(allowed.status), "\(headers): \(allowed.status)")
            }
        }
    }

    /// A method the admin API does not take is answered by the proxy, never forwarded: 405 with the
    /// methods the document lists for the path in `allow`, or 404 for a path the document lacks.
    @Test func anotherMethodIsAnsweredWithTheDocumentsMethods() async throws {
        try await withProxy { proxy, base, client in
            let bearer = [("authorization", "Bearer \(proxy.token)")]
            let patch = try await send(client, .PATCH, base + "/v1/flush", headers: bearer)
            #expect(patch.status == .methodNotAllowed)
            #expect(patch.headers.first(name: "allow") == OpenAPIDocument.allowedMethods(for: "/v1/flush", admin: true).joined(separator: ", "))
            #expect(patch.headers.first(name: "allow")?.contains("POST") == true)
            let trace = try await send(client, .TRACE, base + "/v1/stats", headers: bearer)
            #expect(trace.status == .methodNotAllowed)
            #expect(trace.headers.first(name: "allow")?.contains("GET") == true)
            let unknown = try await send(client, .PATCH, base + "/v1/nothing", headers: bearer)
            #expect(unknown.status == .notFound)
            #expect(unknown.headers.first(name: "allow") == nil)
        }
    }
}
