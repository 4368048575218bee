import HTTPTypes
import Hummingbird
import HummingbirdCore

/// The API's and the admin's routing table: Hummingbird's `Router`, which every route is added to, and
/// beside it the same routes matched on the path's bytes (decision 0116).
///
/// Hummingbird's trie walks a path one `Character` at a time, and a registration's path is about a hundred
/// of them: the walk was 4.0% of a registration's CPU in the gateway's profile. ``PathResponder`` finds
/// the route in the path's UTF-8 instead, and calls the same responder, with the same parameters and
/// endpoint path, that Hummingbird's router would. Whatever it cannot decide the same way goes to
/// Hummingbird's responder: a path that is not ASCII, no route or no method for the path, and every
/// request when a route has an element other than a literal or a capture, or when two routes could
/// match the same path (the trie's order would then choose between them).
public final class PathRouter<Context: RequestContext>: RouterMethods, HTTPResponderBuilder {
    /// Hummingbird's router, holding every route and middleware added here.
    public let router: Router<Context>
    private var endpoints: [PathEndpoint<Context>] = []
    /// Cleared by a route the table cannot hold.
    private var everyRouteFits = true

    public init(context: Context.Type = Context.self) {
        router = Router(context: context)
    }

    @discardableResult
    public func on<Responder: HTTPResponder>(
        _ path: RouterPath,
        method: HTTPRequest.Method,
        responder: Responder
    ) -> Self where Responder.Context == Context {
        router.on(path, method: method, responder: responder)
        guard let pattern = PathPattern(path) else {
            everyRouteFits = false
            return self
        }
        // As the router does: the middleware added so far wraps the route's responder.
        let chain = router.middlewares.constructResponder(finalResponder: responder)
        if let index = endpoints.firstIndex(where: { $0.pattern == pattern }) {
            endpoints[index].methods.removeAll { $0.method == method }
            endpoints[index].methods.append((method, chain))
        } else {
            endpoints.append(PathEndpoint(pattern: pattern, path: path.description, methods: [(method, chain)]))
        }
        return self
    }

    @discardableResult
    public func add(middleware: any MiddlewareProtocol<Request, Response, Context>) -> Self {
        router.add(middleware: middleware)
        return self
    }

    /// Every route's method and path, as Hummingbird's router lists them.
    public var routes: [Router<Context>.RouteDescription] { router.routes }

    public func buildResponder() -> PathResponder<Context> {
        let fallback = router.buildResponder()
        guard everyRouteFits, !PathPattern.anyOverlap(endpoints.map(\.pattern)) else {
            return PathResponder(endpoints: nil, fallback: fallback)
        }
        return PathResponder(endpoints: endpoints, fallback: fallback)
    }
}

/// Answers a request through the route ``PathRouter`` found on the path's bytes, or else through
/// Hummingbird's router.
///
/// Inlinable, as Hummingbird's `RouterResponder` is, so that a module that names its context specializes it.
public struct PathResponder<Context: RequestContext>: HTTPResponder {
    /// `nil`: the routes do not fit the table, and Hummingbird's router takes every request.
    @usableFromInline let endpoints: [PathEndpoint<Context>]?
    @usableFromInline let fallback: RouterResponder<Context>

    /// Whether requests are routed on the path's bytes (false: all through Hummingbird's router).
    public var routesOnBytes: Bool { endpoints != nil }

    @inlinable
    public func respond(to request: Request, context: Context) async throws -> Response {
        let path = request.uri.path
        guard let endpoints, let (endpoint, parameters) = PathPattern.resolve(path, in: endpoints),
              let responder = endpoint.responder(for: request.method)
        else {
            return try await fallback.respond(to: request, context: context)
        }
        // What Hummingbird's `RouterResponder` does with the route it found.
        do {
            var context = context
            context.coreContext.parameters = parameters
            context.coreContext.endpointPath.value = endpoint.path
            return try await responder.respond(to: request, context: context)
        } catch let error as any HTTPResponseError {
            return try error.response(from: request, context: context)
        }
    }
}

/// One path of the table, with its responders by method.
@usableFromInline
struct PathEndpoint<Context: RequestContext>: Sendable {
    @usableFromInline let pattern: PathPattern
    /// The route's path as Hummingbird describes it (`/v1/apps/{bundle}/reloads`), for the metrics.
    @usableFromInline let path: String
    @usableFromInline var methods: [(method: HTTPRequest.Method, responder: any HTTPResponder<Context>)]

    init(pattern: PathPattern, path: String, methods: [(method: HTTPRequest.Method, responder: any HTTPResponder<Context>)]) {
        self.pattern = pattern
        self.path = path
        self.methods = methods
    }

    @inlinable
    func responder(for method: HTTPRequest.Method) -> (any HTTPResponder<Context>)? {
        methods.first { $0.method == method }?.responder
    }
}

/// A route's path as literal components and captures, matched against a path's UTF-8 bytes.
@usableFromInline
struct PathPattern: Equatable, Sendable {
    @usableFromInline
    enum Component: Equatable, Sendable {
        case literal([UInt8])
        case capture(Substring)
    }

    @usableFromInline let components: [Component]
    /// How many of the components are captures.
    @usableFromInline let captures: Int

    /// `nil` when the path has an element other than an ASCII literal or a capture (wildcards, partial
    /// captures), or two captures of one name (Hummingbird's router keeps the last one's value).
    init?(_ path: RouterPath) {
        var components: [Component] = []
        for element in path {
            let text = element.description
            if text.first == "{", text.last == "}", element == .capture(text.dropFirst().dropLast()) {
                components.append(.capture(text.dropFirst().dropLast()))
            } else if element == text, !text.isEmpty, text.utf8.allSatisfy({ $0 < 0x80 }) {
                components.append(.literal(Array(text.utf8)))
            } else {
                return nil
            }
        }
        let names = components.compactMap { component -> Substring? in
            guard case .capture(let name) = component else { return nil }
            return name
        }
        guard Set(names).count == names.count else { return nil }
        self.components = components
        self.captures = names.count
    }

    /// Whether this pattern and `other` could both match one path: as many components, and at each a
    /// capture on either side or the same literal.
    func overlaps(_ other: PathPattern) -> Bool {
        guard components.count == other.components.count else { return false }
        return zip(components, other.components).allSatisfy { mine, theirs in
            switch (mine, theirs) {
            case (.literal(let a), .literal(let b)): a == b
            default: true
            }
        }
    }

    static func anyOverlap(_ patterns: [PathPattern]) -> Bool {
        patterns.indices.contains { i in patterns[(i + 1)...].contains { patterns[i].overlaps($0) } }
    }

    /// The endpoint whose pattern matches `path`, and the path's captured components by name. `nil` when
    /// none matches or the path is not ASCII (Hummingbird's router splits a path into `Character`s, and
    /// compares components by canonical equivalence: for ASCII, the bytes).
    @inlinable
    static func resolve<Context>(
        _ path: String,
        in endpoints: [PathEndpoint<Context>]
    ) -> (endpoint: PathEndpoint<Context>, parameters: Parameters)? {
        let utf8 = path.utf8
        // The path's components, empty ones left out, as Hummingbird's router reads them.
        var ranges: [Range<String.Index>] = []
        ranges.reserveCapacity(8)
        var index = utf8.startIndex
        var start: String.Index? = nil
        while index != utf8.endIndex {
            let byte = utf8[index]
            guard byte < 0x80 else { return nil }
            if byte == UInt8(ascii: "/") {
                if let begun = start { ranges.append(begun..<index) }
                start = nil
            } else if start == nil {
                start = index
            }
            utf8.formIndex(after: &index)
        }
        if let begun = start { ranges.append(begun..<utf8.endIndex) }

        for endpoint in endpoints where endpoint.pattern.components.count == ranges.count {
            let matches = zip(endpoint.pattern.components, ranges).allSatisfy { component, range in
                guard case .literal(let bytes) = component else { return true }
                return utf8[range].elementsEqual(bytes)
            }
            guard matches else { continue }
            // One array and one call: `Parameters`' setter is not inlinable, and hashes and searches for
            // each capture. The names of a pattern are distinct (`init?`), so the setter would append each.
            var captured: [Parameters.Element] = []
            captured.reserveCapacity(endpoint.pattern.captures)
            for (component, range) in zip(endpoint.pattern.components, ranges) {
                if case .capture(let name) = component { captured.append((name, path[range])) }
            }
            return (endpoint, Parameters(captured))
        }
        return nil
    }
}
