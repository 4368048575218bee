import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ReloadGateAPI
import ReloadGateCore
import ServiceLifecycle
import UnixSignals
import Synchronization

/// `reloadgate dashboard` (like `kubectl proxy`): serves the admin API, the dashboard included, on a
/// loopback port, behind a random token, for a browser on the operator's machine.
///
/// It listens on 127.0.0.1 only and answers only requests whose `host` names that address (a page of
/// another site cannot reach it through DNS rebinding). The token is never an ambient credential: a
/// browser sends a host's cookies to every port of that host, so any other page the operator opens on
/// 127.0.0.1 would carry a cookie too. The address the command prints has the token in its fragment
/// (`/dashboard#token=`), which a browser never sends; the page keeps it in its own tab's
/// `sessionStorage` (scoped to this origin, port included) and sends it as `authorization: bearer
/// <token>` with each call, as scripts do. Only the page itself, its script and its style sheet (no data)
/// are served without the token. A request that changes something (POST, PUT, DELETE) is refused, token or
/// not, when the browser says it comes from another origin (`Origin`, `Sec-Fetch-Site`). Everything else
/// is forwarded to the admin socket as it came, and the answer back.
public struct DashboardProxy: Sendable {
    /// The admin socket of the gateway.
    public let socketPath: String
    /// The token every request must carry.
    public let token: String
    let logger: Logger

    /// The paths served without the token: the page, its script and its style sheet hold no data.
    static let publicPaths: Set<String> = ["/dashboard", "/dashboard/app.js", "/dashboard/app.css"]
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

    /// Serves on 127.0.0.1:`port` (0: a free port) until `SIGINT` or `SIGTERM`, or until the calling task
    /// is cancelled; `onListening` gets the port once it is bound. Either way the server stops gracefully:
    /// it stops accepting and serves the connections it accepted. Cancelling its serving task instead would
    /// drop a connection accepted but not yet taken from the listener's stream, and NIO traps on that
    /// ("Deinited NIOAsyncWriter without calling finish()", apple/swift-nio#2637), so the group runs in a
    /// task of its own and a cancellation becomes a graceful shutdown.
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
        let serving = Task { try await group.run() }
        do {
            try await withTaskCancellationHandler {
                try await serving.value
            } onCancel: {
                Task { await group.triggerGracefulShutdown() }
            }
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
            let components = URLComponents(string: request.uri.description) ?? URLComponents()
            if let given = (components.queryItems ?? []).first(where: { $0.name == "token" })?.value {
                // An address of an earlier version (`/?token=`): the token moves into the fragment, which
                // the browser keeps to itself, and no cookie is set.
                guard proxy.accepts(Substring(given)) else { return Self.refusal() }
                return Response(status: .seeOther, headers: [.location: "/dashboard#token=\(proxy.token)", .cacheControl: "no-store"])
            }
            if request.uri.path == "/", [.get, .head].contains(request.method) {
                return Response(status: .seeOther, headers: [.location: "/dashboard"])
            }
            if let refusal = Self.crossOriginRefusal(request, port: port) { return refusal }
            let isPublic = [.get, .head].contains(request.method) && DashboardProxy.publicPaths.contains(request.uri.path)
            guard isPublic || Self.presentsToken(request, proxy) else { return Self.refusal() }
            // What the admin API takes (anything else, TRACE and CONNECT among them, is never forwarded):
            // another method is answered here, 405 with the methods the document lists for the path, or 404.
            guard [.get, .head, .post, .put, .delete].contains(request.method) else {
                let allowed = OpenAPIDocument.allowedMethods(for: request.uri.path, admin: true)
                guard !allowed.isEmpty else {
                    return APIError(status: .notFound, code: "not-found", message: "no such route (the API is described at /openapi.json)").response
                }
                var response = APIError(
                    status: .methodNotAllowed, code: "method-not-allowed",
                    message: "\(request.uri.path) takes \(allowed.joined(separator: ", ")) (the API is described at /openapi.json)"
                ).response
                response.headers[.allow] = allowed.joined(separator: ", ")
                return response
            }
            return try await forward(request)
        }

        /// Whether the request carries the token in `authorization: bearer` (a cookie is never accepted).
        static func presentsToken(_ request: Request, _ proxy: DashboardProxy) -> Bool {
            guard let credential = HeaderValue.bearerCredential(request.headers[.authorization]) else { return false }
            return proxy.accepts(credential)
        }

        /// A refusal for a request that would change something and that a browser says comes from another
        /// origin: another page on this machine (any other port of 127.0.0.1 is the same site but not the
        /// same origin) must not make the operator's browser act. Scripts send neither header.
        static func crossOriginRefusal(_ request: Request, port: Int) -> Response? {
            guard ![.get, .head, .options].contains(request.method) else { return nil }
            let origins = ["http://127.0.0.1:\(port)", "http://localhost:\(port)"]
            let origin = request.headers[HTTPField.Name("origin")!]
            let site = request.headers[HTTPField.Name("sec-fetch-site")!]
            let sameOrigin = (origin.map { origins.contains($0.lowercased()) } ?? true) && (site.map { ["same-origin", "none"].contains($0.lowercased()) } ?? true)
            guard !sameOrigin else { return nil }
            return APIError(
                status: .forbidden, code: "cross-origin",
                message: "a change through the dashboard must come from the dashboard's own page (http://127.0.0.1:\(port))"
            ).response
        }

        static func refusal() -> Response {
            APIError.unauthorized(
                "open the address `reloadgate dashboard` printed (the token is in its #fragment), or send authorization: bearer <token>"
            ).response
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
                let body = request.body
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
