import Foundation
import Logging
public import NIOSSL
import ReloadGateCertificates

/// The listener's TLS material, loaded from the configured files (or the development certificate) and
/// checked before anything starts.
public struct ListenerTLS: Sendable {
    /// The server TLS configuration: TLS 1.2 or newer, the certificate chain and key, and, when a client
    /// CA is configured, optional client certificates verified against it (a connection without a client
    /// certificate is accepted and authenticates pushes with provider tokens).
    public let configuration: TLSConfiguration
    /// The CA certificate clients should trust, when the gateway knows it (development certificate).
    public let trustedCAPath: String?
    /// The CA that client certificates must chain to, if client certificates are accepted.
    public let clientCAPath: String?

    /// Loads and checks the TLS material of `tls`, creating the development CA and server certificate
    /// on first run when no certificate is configured.
    /// - Throws: ``ConfigurationError`` naming the key and file at fault.
    public static func load(
        _ tls: GatewayConfiguration.TLS,
        now: Date,
        logger: Logger
    ) throws(ConfigurationError) -> ListenerTLS {
        let certificatePath: String
        let keyPath: String
        var clientCAPath = tls.clientCA
        var trustedCAPath: String?
        switch (tls.certificate, tls.key) {
        case (nil, nil):
            let development = DevelopmentCertificates(directory: tls.developmentDirectory)
            do {
                let preparation = try development.prepare(now: now)
                if preparation.createdAuthority {
                    logger.notice(
                        "created a development CA; clients must trust it",
                        metadata: ["path": "\(development.caCertificatePath)"]
                    )
                }
                if preparation.issuedServerCertificate {
                    logger.notice(
                        "issued a development server certificate for localhost, 127.0.0.1 and ::1",
                        metadata: ["path": "\(development.serverCertificatePath)"]
                    )
                }
            } catch {
                throw .unusableFile(
                    key: "tls.developmentDirectory",
                    path: development.directory.path,
                    reason: String(describing: error)
                )
            }
            certificatePath = development.serverCertificatePath
            keyPath = development.serverKeyPath
            trustedCAPath = development.caCertificatePath
            clientCAPath = clientCAPath ?? development.caCertificatePath
        case (let certificate?, let key?):
            certificatePath = certificate
            keyPath = key
        case (nil, _?):
            throw .inconsistent(key: "tls.certificate", reason: "tls.key is set: set tls.certificate with it")
        case (_?, nil):
            throw .inconsistent(key: "tls.key", reason: "tls.certificate is set: set tls.key with it")
        }

        let chain = try loadCertificates(key: "tls.certificate", path: certificatePath)
        let privateKey: NIOSSLPrivateKey
        do {
            privateKey = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw .unusableFile(key: "tls.key", path: keyPath, reason: fileProblem(keyPath) ?? "not a PEM private key")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(privateKey)
        )
        configuration.minimumTLSVersion = .tlsv12
        configuration.cipherSuiteValues = Self.cipherSuites
        if let clientCAPath {
            let roots = try loadCertificates(key: "tls.clientCA", path: clientCAPath)
            configuration.trustRoots = .certificates(roots)
            // Client certificates are optional (token auth needs none) but verified when presented.
            configuration.certificateVerification = .optionalVerification
        }
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw .inconsistent(
                key: "tls.key",
                reason: "\(keyPath) is not the private key of the certificate in \(certificatePath) (\(error))"
            )
        }
        return ListenerTLS(configuration: configuration, trustedCAPath: trustedCAPath, clientCAPath: clientCAPath)
    }

    /// The TLS 1.2 suites offered: forward secrecy and AEAD only (no CBC, no static RSA). TLS 1.3's
    /// suites are all AEAD and not configurable.
    public static let cipherSuites: [NIOTLSCipher] = [
        .TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, .TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        .TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, .TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        .TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, .TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ]

    private static func loadCertificates(key: String, path: String) throws(ConfigurationError) -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw .unusableFile(key: key, path: path, reason: fileProblem(path) ?? "not a PEM certificate")
        }
        guard !certificates.isEmpty else {
            throw .unusableFile(key: key, path: path, reason: "the file holds no PEM certificate")
        }
        return certificates
    }

    /// Why a file cannot be read at all, or `nil` when it can (and its content is at fault).
    private static func fileProblem(_ path: String) -> String? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return "no such file" }
        if isDirectory.boolValue { return "it is a directory" }
        guard FileManager.default.isReadableFile(atPath: path) else { return "permission denied" }
        return nil
    }
}
