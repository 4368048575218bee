// What a router costs when called directly, without a listener: Hummingbird's router and the API listener's
// `PathRouter` (decision 0116), each with routes and middleware shaped like the API listener's, called in a
// loop with a request made each time, beside the reference of a dictionary from method and path to a
// closure doing the same work.
//
//   swift build -c release --product reloadgate-bench-router && .build/release/reloadgate-bench-router [CALLS]
//
// Prints nanoseconds per call (the best of five rounds) and each router's ratio to the dictionary loop.
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOEmbedded
import ReloadGateServer

/// A middleware that only passes the request on (the API's metrics, drain and error middleware each
/// wrap the call like this).
struct PassOn: RouterMiddleware {
    func handle(_ request: Request, context: BasicRequestContext, next: (Request, BasicRequestContext) async throws -> Response) async throws -> Response {
        try await next(request, context)
    }
}

let calls = CommandLine.arguments.dropFirst().first.flatMap { Int($0) }.map { min(max($0, 1000), 50_000_000) } ?? 1_000_000
let alive = ByteBuffer(string: #"{"status":"alive"}"#)
let accepted = ByteBuffer(string: #"{"decisions":{"scheduled":1},"requestId":1,"targets":1}"#)

/// Adds the API listener's routes (their shape: the handlers only answer) to `router`.
func addRoutes(to router: some RouterMethods<BasicRequestContext>) {
    for _ in 0..<3 { _ = router.add(middleware: PassOn()) }
    router.get("/health") { _, _ in Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: alive)) }
    router.get("/ready") { _, _ in Response(status: .ok) }
    let apps = router.group("v1/apps/:bundle")
    apps.put("devices/:token") { _, _ in Response(status: .ok) }
    apps.delete("devices/:token") { _, _ in Response(status: .noContent) }
    apps.put("controls/:token") { _, _ in Response(status: .ok) }
    apps.put("devices/:token/widgets/:widget/timeline") { _, _ in Response(status: .ok) }
    apps.get("configurations") { _, _ in Response(status: .ok) }
    apps.post("reloads") { _, context in
        // The webhook route reads its path parameter, as the real one does.
        _ = context.parameters.get("bundle")
        return Response(status: .accepted, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: accepted))
    }
}
let router = Router()
addRoutes(to: router)
let pathRouter = PathRouter(context: BasicRequestContext.self)
addRoutes(to: pathRouter)
let responder = router.buildResponder()
let pathResponder = pathRouter.buildResponder()
precondition(pathResponder.routesOnBytes)
let channel = EmbeddedChannel()
let logger: Logger = {
    var logger = Logger(label: "bench-router")
    logger.logLevel = .critical
    return logger
}()

/// The reference: a dictionary from method and path to a closure that makes the same response.
let table: [String: @Sendable (HTTPRequest) -> (HTTPResponse.Status, ByteBuffer)] = [
    "GET /health": { _ in (.ok, alive) },
    "POST /v1/apps/com.example.bench/reloads": { _ in (.accepted, accepted) },
    "PUT /v1/apps/com.example.bench/devices/" + String(repeating: "ab", count: 32): { _ in (.ok, accepted) },
]

func measure(_ name: String, _ round: () async throws -> Int) async rethrows -> Double {
    var best = Double.infinity
    var sink = 0
    for _ in 0..<5 {
        let start = ContinuousClock.now
        sink &+= try await round()
        let elapsed = start.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        best = min(best, seconds / Double(calls) * 1e9)
    }
    precondition(sink != 0)
    return best
}

func head(_ method: HTTPRequest.Method, _ path: String) -> HTTPRequest {
    HTTPRequest(method: method, scheme: "https", authority: "localhost", path: path)
}

/// Runs off the main actor (top-level code is on it): a call from the main actor to the nonisolated responder
/// would hop threads twice per call, which is not what a server's connection task pays.
@Sendable nonisolated func run() async throws {
for (method, path) in [
    (HTTPRequest.Method.get, "/health"), (.post, "/v1/apps/com.example.bench/reloads"),
    (.put, "/v1/apps/com.example.bench/devices/" + String(repeating: "ab", count: 32)),
] {
    let key = "\(method.rawValue) \(path)"
    let reference = await measure("dictionary") {
        var total = 0
        for _ in 0..<calls {
            let request = head(method, path)
            guard let route = table["\(request.method.rawValue) \(request.path ?? "")"] else { continue }
            let (status, body) = route(request)
            total &+= status.code + body.readableBytes
        }
        return total
    }
    func routing(_ responder: some HTTPResponder<BasicRequestContext>) async throws -> Double {
        try await measure("router") {
            var total = 0
            for _ in 0..<calls {
                let request = Request(head: head(method, path), body: RequestBody(buffer: ByteBuffer()))
                let context = BasicRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger))
                let response = try await responder.respond(to: request, context: context)
                total &+= response.status.code + (response.body.contentLength ?? 0)
            }
            return total
        }
    }
    let routed = try await routing(responder)
    let onBytes = try await routing(pathResponder)
    print(String(
        format: "%@: dictionary loop %.0f ns/call, Hummingbird router %.0f ns/call (%.1fx), PathRouter %.0f ns/call (%.1fx)",
        key, reference, routed, routed / reference, onBytes, onBytes / reference
    ))
}
}
try await Task.detached { try await run() }.value
print("\(calls) calls a round, best of 5 rounds; \(ProcessInfo.processInfo.activeProcessorCount) cores")
