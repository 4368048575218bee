import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ReloadGateAPI
import ServiceLifecycle
import UnixSignals
import Synchronization

/// `reloadgate dashboard` (like `kubectl proxy`): serves the admin API, the dashboard included, on a
/// loopback port, behind a random token, for a browser on the operator's machine.
///
/// It listens on 127.0.0.1 only and answers only requests whose `host` names that address (a page of
/// another site cannot reach it through DNS rebinding). A request must carry the token: in the URL the
/// command prints (`?token=`: the answer sets it as a cookie and sends the browser to the same address
/// without it), as that cookie (`HttpOnly`, `SameSite=Strict`), or as `authorization: bearer <token>`
/// (scripts). Everything else is forwarded to the admin socket as it came, and the answer back.
public struct DashboardProxy: Sendable {
    /// The admin socket of the gateway.
    public let socketPath: String
    /// The token every request must carry.
    public let token: String
    let logger: Logger

    /// The cookie that carries the token.
    static let cookie = "reloadgate_dashboard"
    /// The largest body forwarded (the admin API's own limits are smaller).
    static let bodyLimit = 1 << 20

    public init(socketPath: String, token: String = DashboardProxy.newToken(), logger: Logger) {
        self.socketPath = socketPath
        self.token = token
        self.logger = logger
    }

    /// 32 random bytes, base64url.
    public static func newToken() -> String {
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Serves on 127.0.0.1:`port` (0: a free port) until `SIGINT` or `SIGTERM`; `onListening` gets the
    /// port once it is bound.
    public func run(port: Int, onListening: @escaping @Sendable (Int) async -> Void) async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(timeout: .init(connect: .seconds(5), read: .seconds(60))))
        let bound = Mutex(0)
        let router = Router()
        router.add(middleware: Forwarder(proxy: self, client: client, port: { bound.withLock { $0 } }))
        let application = Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .seconds(60))),
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? port
                bound.withLock { $0 = port }
                await onListening(port)
            },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [application], gracefulShutdownSignals: [.sigint, .sigterm], logger: logger))
        do {
            try await group.run()
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    /// Whether `presented` is the token (compared by hash: in constant time).
    func accepts(_ presented: Substring) -> Bool {
        SHA256.hash(data: Data(presented.utf8)) == SHA256.hash(data: Data(token.utf8))
    }

    /// Checks, then forwards every request (it never calls `next`).
    struct Forwarder<Context: RequestContext>: RouterMiddleware {
        let proxy: DashboardProxy
        let client: HTTPClient
        let port: @Sendable () -> Int

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            let port = port()
            let host = request.head.authority ?? request.headers[HTTPField.Name("host")!] ?? ""
            guard ["127.0.0.1:\(port)", "localhost:\(port)"].contains(host.lowercased()) else {
                return APIError(status: .forbidden, code: "forbidden", message: "the dashboard answers only to http://127.0.0.1:\(port)").response
            }
            var components = URLComponents(string: request.uri.description) ?? URLComponents()
            let query = components.queryItems ?? []
            if let given = query.first(where: { $0.name == "token" })?.value {
                guard proxy.accepts(Substring(given)) else { return Self.refusal() }
                // The token moves to a cookie; the address the browser keeps has none.
                components.queryItems = query.filter { $0.name != "token" }
                if components.queryItems?.isEmpty == true { components.queryItems = nil }
                var location = components.string ?? "/"
                if location.isEmpty || location == "/" { location = "/dashboard" }
                return Response(
                    status: .seeOther,
                    headers: [
                        .location: location,
                        .setCookie: "\(DashboardProxy.cookie)=\(proxy.token); HttpOnly; SameSite=Strict; Path=/",
                        .cacheControl: "no-store",
                    ]
                )
            }
            guard Self.presentsToken(request, proxy) else { return Self.refusal() }
            // What the admin API takes (anything else, TRACE and CONNECT among them, is never forwarded).
            guard [.get, .head, .post, .put, .delete].contains(request.method) else {
                var response = APIError(
                    status: .methodNotAllowed, code: "method-not-allowed", message: "the dashboard forwards GET, HEAD, POST, PUT and DELETE"
                ).response
                response.headers[.allow] = "GET, HEAD, POST, PUT, DELETE"
                return response
            }
            if request.uri.path == "/" {
                return Response(status: .seeOther, headers: [.location: "/dashboard"])
            }
            return try await forward(request)
        }

        static func presentsToken(_ request: Request, _ proxy: DashboardProxy) -> Bool {
            if let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") {
                return proxy.accepts(header.dropFirst(7))
            }
            for header in request.headers[values: .cookie] {
                for pair in header.split(separator: ";") {
                    let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                    if parts.count == 2, parts[0] == DashboardProxy.cookie, proxy.accepts(parts[1]) { return true }
                }
            }
            return false
        }

        static func refusal() -> Response {
            APIError.unauthorized("open the address `reloadgate dashboard` printed (its token), or send authorization: bearer <token>").response
        }

        /// The request to the admin socket, its answer back.
        func forward(_ request: Request) async throws -> Response {
            guard let url = URL(httpURLWithSocketPath: proxy.socketPath, uri: request.uri.description) else {
                return APIError(status: .badRequest, code: "bad-request", message: "cannot forward \(request.uri)").response
            }
            var outgoing = HTTPClientRequest(url: url.absoluteString)
            outgoing.method = .init(rawValue: request.method.rawValue)
            if let type = request.headers[.contentType] { outgoing.headers.add(name: "content-type", value: type) }
            if request.headers[.contentLength] != nil || request.headers[.transferEncoding] != nil {
                var body = request.body
                let bytes = try await body.collect(upTo: DashboardProxy.bodyLimit)
                outgoing.body = .bytes(bytes)
            }
            let answer: HTTPClientResponse
            let bytes: ByteBuffer
            do {
                answer = try await client.execute(outgoing, timeout: .seconds(60))
                bytes = try await answer.body.collect(upTo: 64 << 20)
            } catch {
                return APIError(
                    status: .badGateway, code: "no-gateway", message: "no gateway answers on \(proxy.socketPath): \(error)"
                ).response
            }
            var headers = HTTPFields()
            for name in ["content-type", "content-security-policy", "x-content-type-options", "cache-control", "allow"] {
                if let value = answer.headers.first(name: name), let field = HTTPField.Name(name) { headers[field] = value }
            }
            return Response(status: .init(code: Int(answer.status.code)), headers: headers, body: .init(byteBuffer: bytes))
        }
    }
}
