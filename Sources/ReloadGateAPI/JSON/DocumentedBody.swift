/// A body with a schema of its own in the OpenAPI document: `AdminBodySchemaTests` encodes examples of
/// every such type and checks them against it, so that the type and the document cannot drift apart.
public protocol DocumentedBody: Codable, Sendable, Hashable {
    /// Its name under `components/schemas`.
    static var schema: String { get }
}
