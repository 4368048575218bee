public import Crypto
import Foundation
public import ReloadGateCore
import ReloadGateAPNs
import SwiftASN1
public import X509

/// A small certificate authority: a P-256 key and its self-signed CA certificate.
///
/// It issues the development server certificate of the listener and client certificates that carry
/// Apple's APNs topics extension, for push senders that authenticate with certificates. Time is a
/// parameter of every operation, so tests can issue certificates that are not yet valid or expired.
public struct CertificateAuthority: Sendable {
    /// The CA certificate: the file clients trust.
    public let certificate: Certificate
    /// The CA's signing key.
    public let privateKey: P256.Signing.PrivateKey

    /// Creates a new CA with a fresh key.
    /// - Parameters:
    ///   - commonName: the CA's subject common name.
    ///   - now: the start of the validity period.
    ///   - validity: how long the CA certificate is valid.
    public static func create(
        commonName: String = "ReloadGate Development CA",
        now: Date,
        validity: TimeInterval = 5 * 365 * 86_400
    ) throws -> CertificateAuthority {
        let key = P256.Signing.PrivateKey()
        let signingKey = Certificate.PrivateKey(key)
        let name = try DistinguishedName {
            OrganizationName("ReloadGate")
            CommonName(commonName)
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: signingKey.publicKey,
            notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(validity),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: signingKey.publicKey)
            },
            issuerPrivateKey: signingKey
        )
        return try CertificateAuthority(certificate: certificate, privateKey: key)
    }

    /// Wraps an existing CA certificate and its key.
    /// - Throws: ``CertificateFactoryError/keyDoesNotMatchCertificate`` when the key is not the certificate's.
    public init(certificate: Certificate, privateKey: P256.Signing.PrivateKey) throws(CertificateFactoryError) {
        guard certificate.publicKey == Certificate.PrivateKey(privateKey).publicKey else {
            throw .keyDoesNotMatchCertificate
        }
        self.certificate = certificate
        self.privateKey = privateKey
    }

    /// Issues a TLS server certificate for the given names and addresses.
    /// - Parameters:
    ///   - dnsNames: DNS names the certificate is valid for.
    ///   - ipAddresses: IPv4 or IPv6 addresses the certificate is valid for.
    ///   - now: the start of the validity period.
    ///   - validity: how long the certificate is valid.
    /// - Throws: ``CertificateFactoryError/invalidIPAddress(_:)`` for an address that does not parse.
    public func issueServerCertificate(
        dnsNames: [String] = ["localhost"],
        ipAddresses: [String] = ["127.0.0.1", "::1"],
        now: Date,
        validity: TimeInterval = 365 * 86_400
    ) throws -> IssuedCertificate {
        var names = dnsNames.map { GeneralName.dnsName($0) }
        for address in ipAddresses {
            guard let bytes = IPAddressBytes.parse(address) else { throw CertificateFactoryError.invalidIPAddress(address) }
            names.append(.ipAddress(ASN1OctetString(contentBytes: bytes[...])))
        }
        let subject = try DistinguishedName {
            OrganizationName("ReloadGate")
            CommonName(dnsNames.first ?? ipAddresses.first ?? "reloadgate")
        }
        return try issue(subject: subject, now: now, validity: validity) { publicKey in
            try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
                SubjectKeyIdentifier(hash: publicKey)
                authorityKeyIdentifier
            }
        }
    }

    /// Issues a TLS client certificate that allows pushes to the given bundles (APNs topics extension).
    /// - Parameters:
    ///   - commonName: the subject common name, shown in logs.
    ///   - topics: the bundles this certificate may push to; at least one.
    ///   - now: the start of the validity period.
    ///   - validity: how long the certificate is valid.
    public func issueClientCertificate(
        commonName: String,
        topics: [BundleID],
        now: Date,
        validity: TimeInterval = 365 * 86_400
    ) throws -> IssuedCertificate {
        guard !topics.isEmpty else { throw CertificateFactoryError.noTopics }
        let subject = try DistinguishedName {
            OrganizationName("ReloadGate")
            CommonName(commonName)
        }
        return try issue(subject: subject, now: now, validity: validity) { publicKey in
            try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
                SubjectKeyIdentifier(hash: publicKey)
                authorityKeyIdentifier
                APNsTopicsExtension(bundles: topics)
            }
        }
    }

    /// The CA certificate in PEM: the file clients trust.
    public func certificatePEM() throws -> String {
        try certificate.serializeAsPEM().pemString
    }

    private var authorityKeyIdentifier: AuthorityKeyIdentifier {
        AuthorityKeyIdentifier(
            keyIdentifier: SubjectKeyIdentifier(hash: certificate.publicKey).keyIdentifier
        )
    }

    private func issue(
        subject: DistinguishedName,
        now: Date,
        validity: TimeInterval,
        extensions: (Certificate.PublicKey) throws -> Certificate.Extensions
    ) throws -> IssuedCertificate {
        let key = P256.Signing.PrivateKey()
        let publicKey = Certificate.PrivateKey(key).publicKey
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: publicKey,
            notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(validity),
            issuer: self.certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try extensions(publicKey),
            issuerPrivateKey: Certificate.PrivateKey(privateKey)
        )
        return IssuedCertificate(certificate: certificate, privateKey: key)
    }
}

/// A certificate and its freshly generated private key.
public struct IssuedCertificate: Sendable {
    /// The signed certificate.
    public let certificate: Certificate
    /// Its private key, never written anywhere but the key file the caller chooses.
    public let privateKey: P256.Signing.PrivateKey

    /// The certificate in PEM.
    public func certificatePEM() throws -> String {
        try certificate.serializeAsPEM().pemString
    }

    /// The private key in PEM (PKCS#8), as OpenSSL, curl and NIOSSL read it.
    public var privateKeyPEM: String { privateKey.pemRepresentation }
}

/// Errors of certificate issuance and of the certificate directory.
public enum CertificateFactoryError: Error, Equatable, CustomStringConvertible {
    case keyDoesNotMatchCertificate
    case invalidIPAddress(String)
    case noTopics
    case invalidName(String)
    case unreadable(path: String, reason: String)

    public var description: String {
        switch self {
        case .keyDoesNotMatchCertificate: "the private key does not belong to the certificate"
        case .invalidIPAddress(let text): "'\(text)' is not an IPv4 or IPv6 address"
        case .noTopics: "a client certificate needs at least one topic (--topic BUNDLE)"
        case .invalidName(let name):
            "'\(name)' is not a usable file name: use letters, digits, '.', '-' and '_'"
        case .unreadable(let path, let reason): "cannot read \(path): \(reason)"
        }
    }
}
