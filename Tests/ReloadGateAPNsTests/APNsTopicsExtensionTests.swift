import ReloadGateAPNs
import ReloadGateCore
import SwiftASN1
import Testing
import X509

struct APNsTopicsExtensionTests {
    /// The bytes Apple writes for a certificate with an app topic, a VoIP topic and a complication topic.
    static func appleStyleValue() throws -> ArraySlice<UInt8> {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            for (topic, qualifier) in [
                ("com.example.scores", "app"),
                ("com.example.scores.voip", "voip"),
                ("com.example.scores.complication", "complication"),
            ] {
                try coder.serialize(ASN1UTF8String(topic))
                try coder.appendConstructedNode(identifier: .sequence) { coder in
                    try coder.serialize(ASN1UTF8String(qualifier))
                }
            }
        }
        return serializer.serializedBytes[...]
    }

    @Test func readsAppleStyleTopicList() throws {
        let ext = Certificate.Extension(oid: APNsTopicsExtension.oid, critical: false, value: try Self.appleStyleValue())
        let topics = try APNsTopicsExtension(ext)
        #expect(topics.topics.map(\.name) == ["com.example.scores", "com.example.scores.voip", "com.example.scores.complication"])
        #expect(topics.topics.map(\.qualifiers) == [["app"], ["voip"], ["complication"]])
        #expect(topics.allows(try BundleID("com.example.scores")))
        #expect(!topics.allows(try BundleID("com.example.news")))
    }

    @Test func writesWhatItReads() throws {
        let original = APNsTopicsExtension(bundles: [try BundleID("com.example.scores"), try BundleID("com.example.news")])
        let ext = try original.makeCertificateExtension()
        #expect(ext.oid == APNsTopicsExtension.oid)
        #expect(!ext.critical)
        #expect(try APNsTopicsExtension(ext) == original)
        #expect(ext.value == (try Self.valueOf(["com.example.scores", "com.example.news"])))
    }

    @Test func rejectsAnotherOID() throws {
        let ext = Certificate.Extension(oid: [1, 2, 3], critical: false, value: try Self.appleStyleValue())
        #expect(throws: CertificateError.self) { try APNsTopicsExtension(ext) }
    }

    @Test func rejectsQualifiersWithoutTopicAndOtherTypes() throws {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            try coder.appendConstructedNode(identifier: .sequence) { coder in try coder.serialize(ASN1UTF8String("app")) }
        }
        let orphan = Certificate.Extension(oid: APNsTopicsExtension.oid, critical: false, value: serializer.serializedBytes[...])
        #expect(throws: (any Error).self) { try APNsTopicsExtension(orphan) }

        var integers = DER.Serializer()
        try integers.appendConstructedNode(identifier: .sequence) { coder in try coder.serialize(42) }
        let wrongType = Certificate.Extension(oid: APNsTopicsExtension.oid, critical: false, value: integers.serializedBytes[...])
        #expect(throws: (any Error).self) { try APNsTopicsExtension(wrongType) }

        let truncated = Certificate.Extension(oid: APNsTopicsExtension.oid, critical: false, value: [0x30, 0x05, 0x0C])
        #expect(throws: (any Error).self) { try APNsTopicsExtension(truncated) }
    }

    /// The DER of topics with the `app` qualifier, built independently of the type under test.
    static func valueOf(_ topics: [String]) throws -> ArraySlice<UInt8> {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            for topic in topics {
                try coder.serialize(ASN1UTF8String(topic))
                try coder.appendConstructedNode(identifier: .sequence) { coder in try coder.serialize(ASN1UTF8String("app")) }
            }
        }
        return serializer.serializedBytes[...]
    }
}
