public import Foundation
public import NIOSSL
public import ReloadGateCertificates
public import ReloadGateCore
import X509

/// Certificates generated for one test: a CA, a server certificate for localhost, written as PEM files
/// so the gateway loads them exactly as it loads an operator's, and client TLS settings that trust them.
public struct TestPKI: Sendable {
    /// The test CA.
    public let authority: CertificateAuthority
    /// PEM file of the CA certificate.
    public let caCertificatePath: String
    /// PEM file of the server certificate.
    public let serverCertificatePath: String
    /// PEM file of the server key.
    public let serverKeyPath: String
    private let directory: TemporaryDirectory

    /// Generates a CA and a server certificate (localhost, 127.0.0.1, ::1) into `directory`.
    public init(in directory: TemporaryDirectory, now: Date = Date()) throws {
        self.directory = directory
        authority = try CertificateAuthority.create(commonName: "ReloadGate Test CA", now: now)
        let server = try authority.issueServerCertificate(now: now)
        caCertificatePath = directory.path("test-ca.pem")
        serverCertificatePath = directory.path("test-server.pem")
        serverKeyPath = directory.path("test-server-key.pem")
        try authority.certificatePEM().write(toFile: caCertificatePath, atomically: true, encoding: .utf8)
        try server.certificatePEM().write(toFile: serverCertificatePath, atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: serverKeyPath, atomically: true, encoding: .utf8)
    }

    /// Client TLS settings that trust the test CA (full verification: connect to `localhost`).
    public func clientTLSConfiguration() throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caCertificatePath))
        return configuration
    }

    /// Client TLS settings that also present a client certificate issued by the test CA for `topics`.
    public func clientTLSConfiguration(clientCertificateFor topics: [BundleID], now: Date = Date()) throws
        -> TLSConfiguration
    {
        try clientCertificate(for: topics, now: now).tls
    }

    /// A client certificate issued by the test CA for `topics`: the TLS settings that present it and its
    /// serial number (lower-case hex, no leading zeros).
    public func clientCertificate(for topics: [BundleID], now: Date = Date()) throws -> (tls: TLSConfiguration, serial: String) {
        let issued = try authority.issueClientCertificate(commonName: "test sender", topics: topics, now: now)
        let serial = issued.certificate.serialNumber.bytes.map { String(format: "%02x", $0) }.joined()
        var configuration = try clientTLSConfiguration()
        configuration.certificateChain = [
            .certificate(try NIOSSLCertificate(bytes: Array(issued.certificatePEM().utf8), format: .pem))
        ]
        configuration.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(issued.privateKeyPEM.utf8), format: .pem))
        return (configuration, String(serial.drop(while: { $0 == "0" })))
    }

    /// Server TLS settings with the test server certificate (for mocks of other services, such as the
    /// mock APNs server).
    public func serverTLSConfiguration() throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(serverCertificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: serverKeyPath, format: .pem))
        )
    }
}
