import AsyncHTTPClient
import Hummingbird
import NIOHTTP1
import NIOPosix
import ReloadGateServer
import ReloadGateTesting
import Testing

/// The API listener runs each route on the event loop of the connection that brought the request (its task
/// prefers that loop's executor), over HTTP/2 and HTTP/1.1 alike, before and after the route awaits: no
/// hand-off to the global executor's threads and back for every request.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct RouteExecutorTests {
    @Test(arguments: [HTTPClient.Configuration.HTTPVersion.automatic, .http1Only])
    func aRouteRunsOnItsConnectionsEventLoop(_ version: HTTPClient.Configuration.HTTPVersion) async throws {
        try await TestGateway.withRunning(customizeRouter: { router in
            router.get("/test/thread") { _, _ -> String in
                let before = MultiThreadedEventLoopGroup.currentEventLoop != nil
                try await Task.sleep(for: .milliseconds(1))
                let after = MultiThreadedEventLoopGroup.currentEventLoop != nil
                return "\(before) \(after)"
            }
        }) { gateway in
            try await gateway.withHTTPClient(version) { client in
                for _ in 0..<3 {
                    let response = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/test/thread"), timeout: .seconds(30))
                    #expect(response.status == .ok)
                    // Every answer carries its date, over both protocols (RFC 9110 6.6.1).
                    #expect(response.headers.first(name: "date")?.hasSuffix(" GMT") == true)
                    #expect(String(buffer: try await response.body.collect(upTo: 1024)) == "true true")
                }
            }
        }
    }
}
