import ReloadGateCore
public import SwiftASN1
public import X509

/// Apple's APNs topics certificate extension, OID `1.2.840.113635.100.6.3.6`.
///
/// Apple's push certificates list the topics they may send to as one DER SEQUENCE in which each topic is a
/// UTF8String followed by a SEQUENCE of UTF8String qualifiers, for example
/// `SEQUENCE { "com.example.scores", SEQUENCE { "app" }, "com.example.scores.voip", SEQUENCE { "voip" } }`.
/// The gateway reads the same extension from client certificates to decide which bundles a push sender
/// using certificate authentication may push to. swift-certificates knows no such extension, so it is
/// parsed and written here.
public struct APNsTopicsExtension: Hashable, Sendable {
    /// The extension's object identifier.
    public static let oid: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 6]

    /// One topic the certificate may push to, with Apple's qualifiers (`app`, `voip`, `complication`, ...).
    public struct Topic: Hashable, Sendable {
        /// The topic, usually a bundle identifier.
        public var name: String
        /// Apple's qualifiers for the topic; `["app"]` for an app's own bundle.
        public var qualifiers: [String]

        /// Creates a topic.
        public init(name: String, qualifiers: [String] = ["app"]) {
            self.name = name
            self.qualifiers = qualifiers
        }
    }

    /// The topics in the order the certificate lists them.
    public var topics: [Topic]

    /// Creates the extension for the given topics.
    public init(topics: [Topic]) {
        self.topics = topics
    }

    /// Creates the extension that allows pushes to each bundle, each with the `app` qualifier.
    public init(bundles: [BundleID]) {
        self.topics = bundles.map { Topic(name: $0.rawValue) }
    }

    /// Reads the extension from a certificate extension.
    /// - Throws: `CertificateError` when the OID is another one or the value is not the DER Apple writes.
    public init(_ ext: Certificate.Extension) throws {
        guard ext.oid == Self.oid else {
            throw CertificateError.incorrectOIDForExtension(reason: "Expected \(Self.oid), got \(ext.oid)")
        }
        let root = try DER.parse(ext.value)
        var topics: [Topic] = []
        try DER.sequence(root, identifier: .sequence) { nodes in
            while let node = nodes.next() {
                switch node.identifier {
                case .utf8String:
                    topics.append(Topic(name: try Self.string(node), qualifiers: []))
                case .sequence:
                    guard !topics.isEmpty else {
                        throw ASN1Error.invalidASN1Object(reason: "APNs topic qualifiers before any topic")
                    }
                    let qualifiers = try DER.sequence(of: ASN1UTF8String.self, identifier: .sequence, rootNode: node)
                    topics[topics.count - 1].qualifiers += try qualifiers.map { try Self.string($0) }
                default:
                    throw ASN1Error.unexpectedFieldType(node.identifier)
                }
            }
        }
        self.topics = topics
    }

    /// Whether a push to `bundle`'s widget topic is allowed by this certificate.
    public func allows(_ bundle: BundleID) -> Bool {
        topics.contains { $0.name == bundle.rawValue }
    }

    private static func string(_ node: ASN1Node) throws -> String {
        try string(ASN1UTF8String(derEncoded: node))
    }

    private static func string(_ value: ASN1UTF8String) throws -> String {
        guard let text = String(validating: value.bytes, as: UTF8.self) else {
            throw ASN1Error.invalidASN1Object(reason: "APNs topic is not valid UTF-8")
        }
        return text
    }
}

extension APNsTopicsExtension: CertificateExtensionConvertible {
    /// Writes the extension (not critical: clients that do not know it must still accept the certificate).
    public func makeCertificateExtension() throws -> Certificate.Extension {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            for topic in topics {
                try coder.serialize(ASN1UTF8String(topic.name))
                try coder.appendConstructedNode(identifier: .sequence) { coder in
                    for qualifier in topic.qualifiers {
                        try coder.serialize(ASN1UTF8String(qualifier))
                    }
                }
            }
        }
        return Certificate.Extension(oid: Self.oid, critical: false, value: serializer.serializedBytes[...])
    }
}

extension Certificate {
    /// The APNs topics this certificate carries, or `nil` when it has no APNs topics extension.
    /// - Throws: when the extension is present but malformed.
    public func apnsTopics() throws -> APNsTopicsExtension? {
        guard let ext = extensions[oid: APNsTopicsExtension.oid] else { return nil }
        return try APNsTopicsExtension(ext)
    }
}
