import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

@testable import ReloadGateServer

/// The OpenAPI document and the routers describe the same API: every route a router registers is an
/// operation of the document, every operation is routed (by the API listener's router, or, tagged
/// `admin`, by the admin router), and the document served is the one compiled in.
@Suite struct OpenAPIContractTests {
    /// `GET /v1/apps/{}/reloads`: a route or an operation with its path parameters' names left out
    /// (the routers write `:bundle` or `{bundle}`, the document `{bundle}`).
    static func signature(_ method: String, _ path: String) -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map { segment in
            segment.hasPrefix(":") || (segment.hasPrefix("{") && segment.hasSuffix("}")) ? "{}" : String(segment)
        }
        return "\(method.uppercased()) /" + segments.joined(separator: "/")
    }

    static func routes(_ router: Router<BasicRequestContext>) -> Set<String> {
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
}
