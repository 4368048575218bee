import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import ReloadGateCore
import Testing

@testable import ReloadGateServer

/// ``PathRouter`` against Hummingbird's `Router`: the same routes in both, each answering with what it was
/// given (its route, the parameters, the endpoint path the metrics read), and thousands of paths made from
/// the routes and mutated, through both. Every answer must be the same, 404s included.
struct PathRouterTests {
    static let methods: [HTTPRequest.Method] = [.get, .put, .post, .delete, .head, .patch]

    /// The gateway's two routers take the table: none of their routes falls back to Hummingbird's.
    @Test func theGatewaysRoutersRouteOnBytes() async throws {
        try await RouterTier.with { tier in
            let api = GatewayRouters.api(door: tier.door, readiness: Readiness(), metrics: GatewayMetrics(), drain: RequestDrain())
            let admin = GatewayRouters.admin(door: tier.door, logger: Logger(label: "test"))
            #expect(api.buildResponder().routesOnBytes)
            #expect(admin.buildResponder().routesOnBytes)
        }
    }

    @Test func theGatewaysRoutesAnswerAsHummingbirdsRouterDoes() async throws {
        try await RouterTier.with { tier in
            let api = GatewayRouters.api(door: tier.door, readiness: Readiness(), metrics: GatewayMetrics(), drain: RequestDrain())
                .routes.map { ($0.method, $0.path.description) }
            let admin = GatewayRouters.admin(door: tier.door, logger: Logger(label: "test"))
                .routes.map { ($0.method, $0.path.description) }
            #expect(api.count >= 12 && admin.count >= 15)
            try await Self.compare(api, paths: 4_000, seed: 1, onBytes: true)
            try await Self.compare(admin, paths: 4_000, seed: 2, onBytes: true)
        }
    }

    /// Route sets the table refuses (two routes that could match one path, where Hummingbird's trie prefers
    /// the literal; a wildcard; a name captured twice) go to Hummingbird's router whole; a root route and
    /// one-letter literals stay in the table.
    @Test func routesTheTableCannotHoldGoToHummingbird() async throws {
        try await Self.compare([(.get, "/"), (.get, "/a"), (.put, "/a/{x}"), (.get, "/a/{x}/b")], paths: 1_500, seed: 3, onBytes: true)
        try await Self.compare([(.get, "/a/{x}"), (.get, "/a/b"), (.get, "/c")], paths: 1_500, seed: 4, onBytes: false)
        try await Self.compare([(.get, "/a/*"), (.get, "/c/{x}")], paths: 1_000, seed: 6, onBytes: false)
        try await Self.compare([(.get, "/a/{x}/b/{x}")], paths: 1_000, seed: 7, onBytes: false)
    }

    // MARK: - The comparison

    /// Builds both routers over `routes`, checks whether the table took them, and compares the answers
    /// to `paths` requests.
    static func compare(
        _ routes: [(HTTPRequest.Method, String)],
        paths: Int,
        seed: UInt64,
        onBytes: Bool
    ) async throws {
        let hummingbird = Router()
        let table = PathRouter(context: BasicRequestContext.self)
        for (method, path) in routes {
            let route = "\(method.rawValue) \(path)"
            hummingbird.on(RouterPath(path), method: method) { _, context in echo(route, context) }
            table.on(RouterPath(path), method: method) { _, context in echo(route, context) }
        }
        let reference = hummingbird.buildResponder()
        let responder = table.buildResponder()
        #expect(responder.routesOnBytes == onBytes, "\(routes)")

        let channel = EmbeddedChannel()
        var random = SplitMix64(seed: seed)
        let templates = routes.map(\.1)
        var found = 0
        for _ in 0..<paths {
            let path = mutatedPath(templates.randomElement(using: &random)!, literals: templates, using: &random)
            let method = Bool.random(using: &random)
                ? routes.randomElement(using: &random)!.0 : methods.randomElement(using: &random)!
            let expected = try await answer(reference, method, path, channel)
            let actual = try await answer(responder, method, path, channel)
            #expect(actual.status == expected.status && actual.echo == expected.echo, "\(method) \(path)")
            if expected.status == .ok { found += 1 }
        }
        // Not vacuous: many of the paths reach a route, and many do not.
        #expect(found > paths / 10 && found < paths * 9 / 10, "\(found) of \(paths) found a route")
    }

    static func echo(_ route: String, _ context: BasicRequestContext) -> Response {
        let parameters = context.parameters.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        let text = "\(route) [\(parameters)] \(context.endpointPath ?? "-")"
        return Response(status: .ok, headers: [.echo: text])
    }

    static func answer(
        _ responder: some HTTPResponder<BasicRequestContext>,
        _ method: HTTPRequest.Method,
        _ path: String,
        _ channel: EmbeddedChannel
    ) async throws -> (status: HTTPResponse.Status, echo: String?) {
        let request = Request(
            head: HTTPRequest(method: method, scheme: "https", authority: "localhost", path: path),
            body: RequestBody(buffer: ByteBuffer())
        )
        let logger = Logger(label: "path-router-tests")
        let context = BasicRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger))
        let response = try await responder.respond(to: request, context: context)
        return (response.status, response.headers[.echo])
    }

    /// A path made from `template` (its captures filled in), then perhaps changed: a component dropped,
    /// added, doubled slashes, a trailing slash, a literal's case, a literal from another route, a value
    /// that is not ASCII, or an empty path.
    static func mutatedPath(_ template: String, literals: [String], using random: inout SplitMix64) -> String {
        let values = [
            "com.example.app", String(repeating: "ab", count: 32), "a", "%2F", "caf%C3%A9", "café", "e\u{301}",
            "..", ".", "{x}", ":x", "*", "x y", "ÿ", "ﬁ", "-", "1", "\u{301}x",
        ]
        let others = literals.flatMap { $0.split(separator: "/").filter { !$0.hasPrefix("{") }.map(String.init) }
        var components = template.split(separator: "/").map { component in
            component.hasPrefix("{") ? values.randomElement(using: &random)! : String(component)
        }
        switch Int.random(in: 0..<12, using: &random) {
        case 0 where !components.isEmpty: components.remove(at: Int.random(in: 0..<components.count, using: &random))
        case 1: components.insert(values.randomElement(using: &random)!, at: Int.random(in: 0...components.count, using: &random))
        case 2 where !components.isEmpty && !others.isEmpty:
            components[Int.random(in: 0..<components.count, using: &random)] = others.randomElement(using: &random)!
        case 3 where !components.isEmpty:
            let index = Int.random(in: 0..<components.count, using: &random)
            components[index] = components[index].uppercased()
        case 4: return "/" + components.joined(separator: "//") + "/"
        case 5: return components.joined(separator: "/")
        case 6: return Bool.random(using: &random) ? "" : "//"
        case 7 where !components.isEmpty:
            let index = Int.random(in: 0..<components.count, using: &random)
            components[index] += values.randomElement(using: &random)!
        default: break
        }
        return "/" + components.joined(separator: "/")
    }
}

extension HTTPField.Name {
    fileprivate static let echo = Self("x-echo")!
}
