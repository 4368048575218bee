import Foundation
import ReloadGateAPNs
import ReloadGateTesting
import SwiftASN1
import Testing
import X509

@Suite(.timeLimit(.minutes(10)), .heavy)
struct CertsCommandTests {
    @Test func devThenClientIssuesACertificateWithTopicsSignedByTheDevelopmentCA() async throws {
        let directory = try TemporaryDirectory("certs-cli")
        defer { directory.remove() }

        let dev = try await ReloadGateProcess.run(["certs", "dev", "--dir", "pki", "--host", "gateway.test"], in: directory.url)
        #expect(dev.status == 0, "\(dev.stderr)")
        #expect(dev.stdout.contains("pki/ca.pem"))

        let client = try await ReloadGateProcess.run(
            ["certs", "client", "--dir", "pki", "--topic", "com.example.scores", "--topic", "com.example.news", "--out", "backend"],
            in: directory.url
        )
        #expect(client.status == 0, "\(client.stderr)")
        let ca = try Certificate(pemEncoded: String(contentsOfFile: directory.path("pki/ca.pem"), encoding: .utf8))
        let certificate = try Certificate(pemEncoded: String(contentsOfFile: directory.path("pki/backend.pem"), encoding: .utf8))
        #expect(ca.publicKey.isValidSignature(certificate.signature, for: certificate))
        #expect(try certificate.apnsTopics()?.topics.map(\.name) == ["com.example.scores", "com.example.news"])
        let keyMode = try FileManager.default.attributesOfItem(atPath: directory.path("pki/backend-key.pem"))[.posixPermissions] as? NSNumber
        #expect(keyMode?.intValue == 0o600)
        let server = try Certificate(pemEncoded: String(contentsOfFile: directory.path("pki/server.pem"), encoding: .utf8))
        #expect(try server.extensions.subjectAlternativeNames?.contains(.dnsName("gateway.test")) == true)

        // Every PEM file ends with a newline, so that `cat backend.pem backend-key.pem > combined.pem`
        // (what libraries taking one file need) is a valid file: the certificate and the key read back.
        for file in ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem", "backend.pem", "backend-key.pem"] {
            let text = try String(contentsOfFile: directory.path("pki/\(file)"), encoding: .utf8)
            #expect(text.hasSuffix("-----\n"), "\(file) has no final newline")
        }
        let combined = try String(contentsOfFile: directory.path("pki/backend.pem"), encoding: .utf8)
            + String(contentsOfFile: directory.path("pki/backend-key.pem"), encoding: .utf8)
        let blocks = combined.split(separator: "\n").filter { $0.hasPrefix("-----BEGIN ") }
        #expect(blocks.count == 2 && !combined.contains("----------"), "\(combined)")
        let keyStart = try #require(combined.range(of: "-----BEGIN ", options: .backwards)).lowerBound
        #expect(try Certificate(pemEncoded: String(combined[..<keyStart])) == certificate)
        #expect(combined[keyStart...].contains("PRIVATE KEY-----\n"))
    }

    @Test func clientWithoutACAOrWithABadTopicExplainsWhatToDo() async throws {
        let directory = try TemporaryDirectory("certs-cli")
        defer { directory.remove() }
        let noCA = try await ReloadGateProcess.run(["certs", "client", "--topic", "com.example.scores", "--out", "x"], in: directory.url)
        #expect(noCA.status == 1)
        #expect(noCA.stderr.contains("run `reloadgate certs dev` first"))

        let topic = try await ReloadGateProcess.run(
            ["certs", "client", "--topic", "com.example.scores.push-type.widgets", "--out", "x"],
            in: directory.url
        )
        #expect(topic.status == 2)
        #expect(topic.stderr.contains("use com.example.scores"))

        let missing = try await ReloadGateProcess.run(["certs", "client", "--out", "x"], in: directory.url)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("reloadgate: error: missing expected argument '--topic"))
    }
}
