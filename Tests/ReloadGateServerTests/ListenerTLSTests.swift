import Foundation
import Logging
import NIOSSL
import ReloadGateCertificates
import ReloadGateServer
import ReloadGateTesting
import Testing

/// TLS material errors: each names the key and the file, and nothing starts.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct ListenerTLSTests {
    let logger = Logger(label: "test")

    func load(_ change: (inout GatewayConfiguration.TLS) -> Void) throws(ConfigurationError) -> ListenerTLS {
        var tls = GatewayConfiguration.TLS()
        change(&tls)
        return try ListenerTLS.load(tls, now: Date(), logger: logger)
    }

    /// TLS 1.2 offers AEAD suites only (ECDHE with AES-GCM or ChaCha20-Poly1305), on both listeners: a
    /// client offering only CBC suites gets no handshake; one offering AES-GCM does.
    @Test func tls12OffersOnlyAEADSuites() async throws {
        try await TestGateway.withRunning { gateway in
            let health = [(":method", "GET"), (":scheme", "https"), (":path", "/health"), (":authority", "localhost")]
            for port in [gateway.port, gateway.ingressPort] {
                var cbc = try gateway.pki.clientTLSConfiguration()
                cbc.maximumTLSVersion = .tlsv12
                cbc.cipherSuites = "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES256-SHA:AES128-SHA:AES256-SHA"
                await #expect(throws: (any Error).self, "port \(port)") {
                    let refused = try await RawConnection.connect(port: port, tls: cbc, alpn: ["h2"])
                    await refused.close()
                }
                var gcm = try gateway.pki.clientTLSConfiguration()
                gcm.maximumTLSVersion = .tlsv12
                gcm.cipherSuites = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"
                let client = try await RawHTTP2Client.connect(port: port, tls: gcm)
                let answer = try await client.send(health)
                await client.close()
                #expect(answer.status == (port == gateway.port ? 200 : 404), "port \(port)")
            }
        }
    }

    @Test func aMissingCertificateFileIsNamed() throws {
        #expect(throws: ConfigurationError.unusableFile(key: "tls.certificate", path: "/missing/server.pem", reason: "no such file")) {
            try load { $0.certificate = "/missing/server.pem"; $0.key = "/missing/server-key.pem" }
        }
        let error = ConfigurationError.unusableFile(key: "tls.certificate", path: "/missing/server.pem", reason: "no such file")
        #expect(error.description == "tls.certificate: cannot use /missing/server.pem: no such file")
    }

    @Test func certificateAndKeyGoTogether() throws {
        #expect(throws: ConfigurationError.inconsistent(key: "tls.key", reason: "tls.certificate is set: set tls.key with it")) {
            try load { $0.certificate = "/etc/server.pem" }
        }
        #expect(throws: ConfigurationError.inconsistent(key: "tls.certificate", reason: "tls.key is set: set tls.certificate with it")) {
            try load { $0.key = "/etc/server-key.pem" }
        }
    }

    @Test func filesThatAreNotPEMAreRefused() throws {
        let directory = try TemporaryDirectory("tls")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        try "hello".write(toFile: directory.path("junk.pem"), atomically: true, encoding: .utf8)
        #expect(throws: ConfigurationError.unusableFile(key: "tls.certificate", path: directory.path("junk.pem"), reason: "not a PEM certificate")) {
            try load { $0.certificate = directory.path("junk.pem"); $0.key = pki.serverKeyPath }
        }
        #expect(throws: ConfigurationError.unusableFile(key: "tls.key", path: directory.path("junk.pem"), reason: "not a PEM private key")) {
            try load { $0.certificate = pki.serverCertificatePath; $0.key = directory.path("junk.pem") }
        }
        #expect(throws: ConfigurationError.unusableFile(key: "tls.clientCA", path: directory.path("missing-ca.pem"), reason: "no such file")) {
            try load {
                $0.certificate = pki.serverCertificatePath
                $0.key = pki.serverKeyPath
                $0.clientCA = directory.path("missing-ca.pem")
            }
        }
    }

    @Test func aKeyOfAnotherCertificateIsRefused() throws {
        let directory = try TemporaryDirectory("tls")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let other = try pki.authority.issueServerCertificate(now: Date())
        try other.privateKeyPEM.write(toFile: directory.path("other-key.pem"), atomically: true, encoding: .utf8)
        do {
            _ = try load { $0.certificate = pki.serverCertificatePath; $0.key = directory.path("other-key.pem") }
            Issue.record("a mismatched key was accepted")
        } catch {
            #expect(error.code == "config.inconsistent")
            #expect(error.description.hasPrefix("tls.key: \(directory.path("other-key.pem")) is not the private key of the certificate in \(pki.serverCertificatePath)"))
        }
    }

    @Test func developmentModeCreatesCertificatesAndAcceptsClientsOfTheDevelopmentCA() throws {
        let directory = try TemporaryDirectory("tls")
        defer { directory.remove() }
        let tls = try load { $0.developmentDirectory = directory.path("certs") }
        #expect(tls.trustedCAPath == directory.url.appendingPathComponent("certs/ca.pem").standardizedFileURL.path)
        #expect(tls.clientCAPath == tls.trustedCAPath)
        #expect(tls.configuration.minimumTLSVersion == .tlsv12)
        #expect(FileManager.default.fileExists(atPath: directory.path("certs/server-key.pem")))
    }

    @Test func anUnwritableDevelopmentDirectoryIsNamed() throws {
        let directory = try TemporaryDirectory("tls")
        defer { directory.remove() }
        try "file".write(toFile: directory.path("certs"), atomically: true, encoding: .utf8)
        do {
            _ = try load { $0.developmentDirectory = directory.path("certs") }
            Issue.record("a file was used as the certificate directory")
        } catch {
            #expect(error.description.hasPrefix("tls.developmentDirectory: cannot use \(directory.path("certs"))"))
        }
    }
}
