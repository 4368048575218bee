import Crypto
public import Foundation
public import ReloadGateCore
import SwiftASN1
import X509

/// The development PKI in one directory (`certs/` by default):
///
/// | file | what |
/// | --- | --- |
/// | `ca.pem` | the development CA certificate: what clients trust (`curl --cacert certs/ca.pem`) |
/// | `ca-key.pem` | the CA's private key (mode 0600); signs the server and client certificates |
/// | `server.pem`, `server-key.pem` | the listener's certificate (localhost, 127.0.0.1, ::1) and key |
/// | `NAME.pem`, `NAME-key.pem` | client certificates issued with `reloadgate certs client --out NAME` |
///
/// Keys are generated here and never leave the directory; the directory is git-ignored.
public struct DevelopmentCertificates: Sendable {
    /// The directory holding the files.
    public let directory: URL

    /// A server certificate is issued again when it expires within this interval.
    public static let renewalMargin: TimeInterval = 7 * 86_400

    /// Uses `directory`, relative paths being relative to the current directory.
    public init(directory: String) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
    }

    public var caCertificatePath: String { path("ca.pem") }
    public var caKeyPath: String { path("ca-key.pem") }
    public var serverCertificatePath: String { path("server.pem") }
    public var serverKeyPath: String { path("server-key.pem") }

    /// What ``prepare(now:)`` had to do.
    public struct Preparation: Equatable, Sendable {
        /// A new CA was created (none existed).
        public var createdAuthority: Bool
        /// A new server certificate was issued (none existed, it expired soon, or another CA signed it).
        public var issuedServerCertificate: Bool

        public init(createdAuthority: Bool, issuedServerCertificate: Bool) {
            self.createdAuthority = createdAuthority
            self.issuedServerCertificate = issuedServerCertificate
        }
    }

    /// Makes sure a CA and a valid server certificate signed by it exist, creating what is missing.
    ///
    /// Used on the first run of `reloadgate serve` with the embedded default; existing files are kept.
    public func prepare(now: Date) throws -> Preparation {
        var preparation = Preparation(createdAuthority: false, issuedServerCertificate: false)
        let authority: CertificateAuthority
        if FileManager.default.fileExists(atPath: caCertificatePath) {
            authority = try loadAuthority()
        } else {
            authority = try CertificateAuthority.create(now: now)
            try writeAuthority(authority)
            preparation.createdAuthority = true
        }
        if try !serverCertificateIsUsable(signedBy: authority, now: now) {
            try writeServerCertificate(authority.issueServerCertificate(now: now))
            preparation.issuedServerCertificate = true
        }
        return preparation
    }

    /// Creates a new CA and a new server certificate, replacing any that exist (`reloadgate certs dev`).
    ///
    /// Client certificates issued by the previous CA stop being trusted.
    public func recreate(dnsNames: [String], ipAddresses: [String], now: Date) throws {
        let authority = try CertificateAuthority.create(now: now)
        let server = try authority.issueServerCertificate(dnsNames: dnsNames, ipAddresses: ipAddresses, now: now)
        try writeAuthority(authority)
        try writeServerCertificate(server)
    }

    /// Issues a client certificate for `topics` into `NAME.pem` and `NAME-key.pem`.
    /// - Returns: the paths of the certificate and the key.
    public func issueClientCertificate(
        name: String,
        topics: [BundleID],
        now: Date
    ) throws -> (certificatePath: String, keyPath: String) {
        guard Self.isPlainFileName(name), !["ca", "ca-key", "server", "server-key"].contains(name) else {
            throw CertificateFactoryError.invalidName(name)
        }
        let issued = try loadAuthority().issueClientCertificate(commonName: name, topics: topics, now: now)
        let paths = (certificatePath: path("\(name).pem"), keyPath: path("\(name)-key.pem"))
        try SecureFile.replace(paths.keyPath, with: issued.privateKeyPEM, mode: 0o600)
        try SecureFile.replace(paths.certificatePath, with: issued.certificatePEM(), mode: 0o644)
        return paths
    }

    /// Loads the CA certificate and key.
    public func loadAuthority() throws -> CertificateAuthority {
        let certificate = try Certificate(pemEncoded: read(caCertificatePath))
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: read(caKeyPath))
        } catch let error as CertificateFactoryError {
            throw error
        } catch {
            throw CertificateFactoryError.unreadable(path: caKeyPath, reason: "not a P-256 private key in PEM")
        }
        return try CertificateAuthority(certificate: certificate, privateKey: key)
    }

    private func serverCertificateIsUsable(signedBy authority: CertificateAuthority, now: Date) throws -> Bool {
        let manager = FileManager.default
        guard manager.fileExists(atPath: serverCertificatePath), manager.fileExists(atPath: serverKeyPath),
            let server = try? Certificate(pemEncoded: read(serverCertificatePath))
        else { return false }
        return server.issuer == authority.certificate.subject
            && authority.certificate.publicKey.isValidSignature(server.signature, for: server)
            && server.notValidAfter > now.addingTimeInterval(Self.renewalMargin)
    }

    private func writeAuthority(_ authority: CertificateAuthority) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try SecureFile.replace(caKeyPath, with: authority.privateKey.pemRepresentation, mode: 0o600)
        try SecureFile.replace(caCertificatePath, with: authority.certificatePEM(), mode: 0o644)
    }

    private func writeServerCertificate(_ issued: IssuedCertificate) throws {
        try SecureFile.replace(serverKeyPath, with: issued.privateKeyPEM, mode: 0o600)
        try SecureFile.replace(serverCertificatePath, with: issued.certificatePEM(), mode: 0o644)
    }

    private func path(_ file: String) -> String {
        directory.appendingPathComponent(file).path
    }

    private func read(_ path: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CertificateFactoryError.unreadable(path: path, reason: "no such file or not readable")
        }
    }

    static func isPlainFileName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && name.utf8.count <= 100
            && name.unicodeScalars.allSatisfy { scalar in
                scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                    || scalar == "." || scalar == "-" || scalar == "_")
            }
    }
}
