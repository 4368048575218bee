import Foundation
import Hummingbird
import NIOCore
import Yams

/// The OpenAPI 3.1 document of the registry API, the reload webhook, the operations routes and the admin
/// API: `OpenAPI/openapi.yaml`, compiled into the binary and served as JSON at `GET /openapi.json` on the
/// API listener and the admin API. It is written by hand beside the hand-written routes; tests prove the
/// two match (every route registered is documented and every operation routed) and schemathesis checks in
/// CI that a live gateway answers as documented (docs/DECISIONS.md, "The OpenAPI document").
public enum OpenAPIDocument {
    /// The document as parsed from its YAML (anchors resolved), parsed anew at each call.
    public static var object: [String: Any] {
        let text = String(decoding: PackageResources.openapi_yaml, as: UTF8.self)
        // The document is part of the binary: a document that does not parse is a build defect.
        guard let object = (try? Yams.load(yaml: text)) as? [String: Any] else {
            preconditionFailure("OpenAPI/openapi.yaml does not parse")
        }
        return object
    }

    /// The document as JSON (keys sorted), as served.
    public static let json: Data = {
        // Yams gives JSONSerialization's types (strings, numbers, booleans, arrays, dictionaries).
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            preconditionFailure("OpenAPI/openapi.yaml does not convert to JSON")
        }
        return data
    }()

    /// The operations the document describes: `(method, path, tags)`, methods upper case, paths as
    /// written (`/v1/apps/{bundle}/reloads`).
    public static var operations: [(method: String, path: String, tags: [String])] {
        let paths = object["paths"] as? [String: Any] ?? [:]
        var result: [(String, String, [String])] = []
        for (path, item) in paths {
            guard let item = item as? [String: Any] else { continue }
            for method in ["get", "put", "post", "delete", "patch", "head", "options"] {
                guard let operation = item[method] as? [String: Any] else { continue }
                result.append((method.uppercased(), path, operation["tags"] as? [String] ?? []))
            }
        }
        return result.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
    }

    /// The methods the document lists for `path` on one listener (the admin API, or the API listener),
    /// upper case; empty when no documented path matches.
    static func allowedMethods(for path: String, admin: Bool) -> [String] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return operationTemplates.filter { operation in
            (operation.admin == admin || operation.template == ["openapi.json"]) && operation.template.count == segments.count
                && zip(operation.template, segments).allSatisfy { template, segment in template == "{}" || template == segment }
        }
        .map(\.method)
    }

    /// The operations with their paths split into segments (`{}` for a parameter).
    private static let operationTemplates: [(method: String, template: [String], admin: Bool)] = operations.map { operation in
        let template = operation.path.split(separator: "/", omittingEmptySubsequences: true).map { segment in
            segment.hasPrefix("{") ? "{}" : String(segment)
        }
        return (operation.method, template, operation.tags.contains("admin"))
    }

    /// Serves the document at `/openapi.json`.
    static func register(on router: some RouterMethods) {
        router.get("/openapi.json") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: json))
            )
        }
    }
}
