import Foundation
import ReloadGateAPNs
import ReloadGateCertificates
import ReloadGateCore
import ReloadGateTesting
import SwiftASN1
import Testing
import X509

struct DevelopmentCertificatesTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func firstRunCreatesCAAndServerCertificateWithPrivateKeysOnlyReadableByOwner() throws {
        let directory = try TemporaryDirectory("certs")
        defer { directory.remove() }
        let development = DevelopmentCertificates(directory: directory.path("certs"))

        let first = try development.prepare(now: now)
        #expect(first == .init(createdAuthority: true, issuedServerCertificate: true))
        for (path, mode) in [
            (development.caCertificatePath, 0o644), (development.caKeyPath, 0o600),
            (development.serverCertificatePath, 0o644), (development.serverKeyPath, 0o600),
        ] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == mode, "\(path)")
        }
        let server = try Certificate(pemEncoded: String(contentsOfFile: development.serverCertificatePath, encoding: .utf8))
        let ca = try Certificate(pemEncoded: String(contentsOfFile: development.caCertificatePath, encoding: .utf8))
        #expect(ca.publicKey.isValidSignature(server.signature, for: server))
    }

    @Test func laterRunsKeepTheCAAndRenewOnlyAnExpiringServerCertificate() throws {
        let directory = try TemporaryDirectory("certs")
        defer { directory.remove() }
        let development = DevelopmentCertificates(directory: directory.path("certs"))
        _ = try development.prepare(now: now)
        let caBefore = try String(contentsOfFile: development.caCertificatePath, encoding: .utf8)
        let serverBefore = try String(contentsOfFile: development.serverCertificatePath, encoding: .utf8)

        #expect(try development.prepare(now: now.addingTimeInterval(86_400)) == .init(createdAuthority: false, issuedServerCertificate: false))
        #expect(try String(contentsOfFile: development.serverCertificatePath, encoding: .utf8) == serverBefore)

        // 360 days later the one-year server certificate is within the renewal margin.
        #expect(try development.prepare(now: now.addingTimeInterval(360 * 86_400)) == .init(createdAuthority: false, issuedServerCertificate: true))
        #expect(try String(contentsOfFile: development.caCertificatePath, encoding: .utf8) == caBefore)
        #expect(try String(contentsOfFile: development.serverCertificatePath, encoding: .utf8) != serverBefore)
    }

    @Test func recreateReplacesTheCAAndAddsExtraNames() throws {
        let directory = try TemporaryDirectory("certs")
        defer { directory.remove() }
        let development = DevelopmentCertificates(directory: directory.path("certs"))
        _ = try development.prepare(now: now)
        let caBefore = try String(contentsOfFile: development.caCertificatePath, encoding: .utf8)

        try development.recreate(dnsNames: ["localhost", "gateway.test"], ipAddresses: ["127.0.0.1", "10.0.0.7"], now: now)
        #expect(try String(contentsOfFile: development.caCertificatePath, encoding: .utf8) != caBefore)
        let server = try Certificate(pemEncoded: String(contentsOfFile: development.serverCertificatePath, encoding: .utf8))
        let names = try #require(try server.extensions.subjectAlternativeNames)
        #expect(names.contains(.dnsName("gateway.test")))
        #expect(names.count == 4)
    }

    @Test func clientCertificatesAreWrittenBesideTheCAAndNamesAreChecked() throws {
        let directory = try TemporaryDirectory("certs")
        defer { directory.remove() }
        let development = DevelopmentCertificates(directory: directory.path("certs"))
        _ = try development.prepare(now: now)

        let paths = try development.issueClientCertificate(name: "scores-backend", topics: [try BundleID("com.example.scores")], now: now)
        #expect(paths.certificatePath.hasSuffix("certs/scores-backend.pem"))
        let certificate = try Certificate(pemEncoded: String(contentsOfFile: paths.certificatePath, encoding: .utf8))
        #expect(try certificate.apnsTopics()?.topics.map(\.name) == ["com.example.scores"])

        for name in ["../escape", "ca", "server-key", "", ".hidden", "a b"] {
            #expect(throws: CertificateFactoryError.invalidName(name)) {
                try development.issueClientCertificate(name: name, topics: [try BundleID("com.example.scores")], now: now)
            }
        }
    }

    @Test func aMissingCAIsReportedWithItsPath() throws {
        let directory = try TemporaryDirectory("certs")
        defer { directory.remove() }
        let development = DevelopmentCertificates(directory: directory.path("empty"))
        #expect(throws: CertificateFactoryError.unreadable(path: development.caCertificatePath, reason: "no such file or not readable")) {
            try development.loadAuthority()
        }
    }
}
