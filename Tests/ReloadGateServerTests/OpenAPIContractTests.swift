import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ReloadGateCore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The OpenAPI document and the routers describe the same API: every route a router registers is an
/// operation of the document, every operation is routed (by the API listener's router, or, tagged
/// `admin`, by the admin router), and the document served is the one compiled in.
@Suite(.offThePool) struct OpenAPIContractTests {
    /// `GET /v1/apps/{}/reloads`: a route or an operation with its path parameters' names left out
    /// (the routers write `:bundle` or `{bundle}`, the document `{bundle}`).
    static func signature(_ method: String, _ path: String) -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map { segment in
            segment.hasPrefix(":") || (segment.hasPrefix("{") && segment.hasSuffix("}")) ? "{}" : String(segment)
        }
        return "\(method.uppercased()) /" + segments.joined(separator: "/")
    }

    static func routes(_ router: PathRouter<GatewayRequestContext>) -> Set<String> {
        Set(router.routes.map { signature($0.method.rawValue, "\($0.path)") })
    }

    static func documented(admin: Bool) -> Set<String> {
        Set(OpenAPIDocument.operations.filter { $0.tags.contains("admin") == admin || $0.path == "/openapi.json" }
            .map { signature($0.method, $0.path) })
    }

    @Test func everyRouteIsDocumentedAndEveryOperationRouted() async throws {
        try await RouterTier.with { tier in
            let api = Self.routes(GatewayRouters.api(door: tier.door, readiness: Readiness(), metrics: GatewayMetrics(), drain: RequestDrain()))
            let admin = Self.routes(GatewayRouters.admin(door: tier.door, logger: Logger(label: "test")))
            #expect(api.subtracting(Self.documented(admin: false)).isEmpty, "API routes not in the document")
            #expect(Self.documented(admin: false).subtracting(api).isEmpty, "operations the API listener does not route")
            #expect(admin.subtracting(Self.documented(admin: true)).isEmpty, "admin routes not in the document")
            #expect(Self.documented(admin: true).subtracting(admin).isEmpty, "admin operations the admin router does not route")
            // Not vacuous: both routers have routes, and the document names them.
            #expect(api.contains("PUT /v1/apps/{}/devices/{}"))
            #expect(admin.contains("GET /v1/pending"))
        }
    }

    @Test func theServedDocumentIsTheCompiledOneAndIsOpenAPI31() async throws {
        try await RouterTier.with { tier in
            for body in [
                try await tier.api { try await $0.execute(uri: "/openapi.json", method: .get).body },
                try await tier.admin { try await $0.execute(uri: "/openapi.json", method: .get).body },
            ] {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
                #expect(object["openapi"] as? String == "3.1.0")
                #expect(Data(body.readableBytesView) == OpenAPIDocument.json)
            }
        }
    }

    /// The router's own refusals (no route, another method) have the document's error body.
    @Test func refusalsOfTheRouterHaveTheErrorBody() async throws {
        try await RouterTier.with { tier in
            for (uri, method, status) in [
                ("/v1/nothing", HTTPRequest.Method.get, HTTPResponse.Status.notFound),
                ("/v1/apps/com.example.scores/reloads", .get, .methodNotAllowed),
            ] {
                let answer = try await tier.api { try await $0.execute(uri: uri, method: method) }
                #expect(answer.status == status)
                #expect(answer.headers[.contentType] == "application/json")
                let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.readableBytesView)) as? [String: Any])
                #expect(Set(object.keys) == ["code", "message"], "\(uri): \(object)")
            }
        }
    }

    /// The document's schema at a JSON pointer into `components` (`parameters/Bundle/schema`, ...).
    static func component(_ pointer: String) throws -> [String: Any] {
        var node: Any = try JSONSerialization.jsonObject(with: OpenAPIDocument.json)
        for key in ["components"] + pointer.split(separator: "/").map(String.init) {
            node = try #require((node as? [String: Any])?[key], "no \(key) in components/\(pointer)")
        }
        return try #require(node as? [String: Any])
    }

    /// Whether `text` matches a schema's `pattern` and `maxLength` (what the document tells a client).
    static func matches(_ text: String, _ schema: [String: Any]) throws -> Bool {
        let pattern = try #require(schema["pattern"] as? String)
        let expression = try NSRegularExpression(pattern: pattern)
        let found = expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
        return found && text.unicodeScalars.count <= (schema["maxLength"] as? Int ?? .max)
    }

    /// The bundle rule is `BundleID`'s; the document repeats it as a pattern in three places (a path, a
    /// query, the flush request). Each place takes exactly what `BundleID` takes (the query and the flush
    /// also take an empty bundle, the same as none).
    @Test func theDocumentsBundleRuleIsBundleIDs() throws {
        let samples = [
            "com.example.scores", "a", "A-1.b-2", "-", "1.2.3", String(repeating: "a", count: 155),
            "", ".", "a.", ".a", "a..b", "a b", "a_b", "é.com", "a\nb", String(repeating: "a", count: 156),
        ]
        for (pointer, emptyAllowed) in [
            ("parameters/Bundle/schema", false), ("parameters/BundleQuery/schema", true),
            ("schemas/FlushRequest/properties/bundle", true),
        ] {
            let schema = try Self.component(pointer)
            for sample in samples {
                let parsed = (try? BundleID(sample)) != nil || (emptyAllowed && sample.isEmpty)
                #expect(try Self.matches(sample, schema) == parsed, "\(pointer): \(sample.debugDescription)")
            }
        }
    }

    /// The time range is `Timestamp.acceptedRange`; the document repeats it as bounds on numbers and as a
    /// year pattern on RFC 3339 text (the `dueBefore` query and `Time`). Both say what the parser says.
    @Test func theDocumentsTimeRangeIsTimestamps() throws {
        let milliseconds = Timestamp.acceptedRange
        let seconds = try #require((try Self.component("schemas/Time")["oneOf"] as? [[String: Any]])?.first { $0["type"] as? String == "number" })
        #expect((seconds["minimum"] as? NSNumber)?.int64Value == milliseconds.lowerBound / 1000)
        #expect((seconds["maximum"] as? NSNumber)?.doubleValue == Double(milliseconds.upperBound) / 1000)
        let unix = try Self.component("schemas/UnixSeconds")
        #expect((unix["minimum"] as? NSNumber)?.int64Value == milliseconds.lowerBound / 1000)
        #expect((unix["maximum"] as? NSNumber)?.int64Value == milliseconds.upperBound / 1000)
        let text = try #require((try Self.component("schemas/Time")["oneOf"] as? [[String: Any]])?.first { $0["type"] as? String == "string" })
        let document = try #require(try JSONSerialization.jsonObject(with: OpenAPIDocument.json) as? [String: Any])
        let pending = ((document["paths"] as? [String: Any])?["/v1/pending"] as? [String: Any])?["get"] as? [String: Any]
        let dueBefore = try #require((pending?["parameters"] as? [[String: Any]])?.first { $0["name"] as? String == "dueBefore" })
        let query = try #require(dueBefore["schema"] as? [String: Any])
        for year in ["0001", "1969", "1970", "2026", "9999"] {
            let sample = "\(year)-06-01T12:00:00Z"
            let parsed = Timestamp(rfc3339: sample) != nil
            #expect(try Self.matches(sample, text) == parsed, "Time: \(sample)")
            #expect(try Self.matches(sample, query) == parsed, "dueBefore: \(sample)")
        }
    }
}
