import Foundation
import ReloadGateAPNs
import ReloadGateCertificates
import ReloadGateCore
import ReloadGateTesting
import SwiftASN1
import Testing
@_spi(FixedExpiryValidationTime) import X509

struct ClientCertificateTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func clientCertificateCarriesItsTopicsAndReadsBackWithSwiftCertificates() throws {
        let authority = try CertificateAuthority.create(now: now)
        let topics = [try BundleID("com.example.scores"), try BundleID("com.example.news")]
        let issued = try authority.issueClientCertificate(commonName: "scores backend", topics: topics, now: now)

        // Read back from PEM, as a server reads it off the wire.
        let certificate = try Certificate(pemEncoded: issued.certificatePEM())
        let read = try #require(try certificate.apnsTopics())
        #expect(read.topics.map(\.name) == ["com.example.scores", "com.example.news"])
        #expect(read.topics.allSatisfy { $0.qualifiers == ["app"] })
        #expect(read.allows(topics[0]) && read.allows(topics[1]))
        #expect(!read.allows(try BundleID("com.example.weather")))

        #expect(certificate.issuer == authority.certificate.subject)
        #expect(authority.certificate.publicKey.isValidSignature(certificate.signature, for: certificate))
        #expect(try certificate.extensions.extendedKeyUsage?.contains(.clientAuth) == true)
        #expect(try certificate.extensions.basicConstraints == .notCertificateAuthority)
        #expect(certificate.notValidAfter > now.addingTimeInterval(300 * 86_400))
    }

    @Test func clientCertificateChainsToTheCAUnderRFC5280Verification() async throws {
        let authority = try CertificateAuthority.create(now: now)
        let issued = try authority.issueClientCertificate(
            commonName: "sender",
            topics: [try BundleID("com.example.scores")],
            now: now
        )
        var verifier = Verifier(rootCertificates: CertificateStore([authority.certificate])) {
            RFC5280Policy(fixedExpiryValidationTime: now.addingTimeInterval(60))
        }
        let result = await verifier.validate(leaf: issued.certificate, intermediates: CertificateStore())
        guard case .validCertificate = result else {
            Issue.record("expected a valid chain, got \(result)")
            return
        }
    }

    @Test func aServerCertificateHasNoTopicsAndNamesLocalhost() throws {
        let authority = try CertificateAuthority.create(now: now)
        let server = try authority.issueServerCertificate(now: now)
        #expect(try server.certificate.apnsTopics() == nil)
        let names = try #require(try server.certificate.extensions.subjectAlternativeNames)
        #expect(names.contains(.dnsName("localhost")))
        #expect(names.contains(.ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))))
        #expect(names.contains(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(Array(repeating: 0, count: 15) + [1])))))
        #expect(try server.certificate.extensions.extendedKeyUsage?.contains(.serverAuth) == true)
    }

    @Test func issuingRefusesNoTopicsAndBadAddresses() throws {
        let authority = try CertificateAuthority.create(now: now)
        #expect(throws: CertificateFactoryError.noTopics) {
            try authority.issueClientCertificate(commonName: "x", topics: [], now: now)
        }
        #expect(throws: CertificateFactoryError.invalidIPAddress("300.1.1.1")) {
            try authority.issueServerCertificate(ipAddresses: ["300.1.1.1"], now: now)
        }
    }
}
