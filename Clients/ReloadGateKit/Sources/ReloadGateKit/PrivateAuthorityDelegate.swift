#if canImport(Security)
import Foundation
import Security

/// A session delegate that trusts only the given certificate authority (PEM), as `reloadgate certs dev`
/// makes one: for a gateway with a private certificate, on Apple platforms (Security.framework):
/// `URLSessionTransport(session: URLSession(configuration: .ephemeral, delegate: PrivateAuthorityDelegate(pem:), delegateQueue: nil))`.
public final class PrivateAuthorityDelegate: NSObject, URLSessionDelegate, Sendable {
    private let anchors: [SecCertificate]

    public init(pem text: String) {
        anchors = text.components(separatedBy: "-----BEGIN CERTIFICATE-----").dropFirst().compactMap { block in
            let base64 = block.components(separatedBy: "-----END CERTIFICATE-----")[0].filter { !$0.isWhitespace }
            return Data(base64Encoded: base64).flatMap { SecCertificateCreateWithData(nil, $0 as CFData) }
        }
    }

    public func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge) async -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
            let trust = challenge.protectionSpace.serverTrust
        else { return (.performDefaultHandling, nil) }
        SecTrustSetAnchorCertificates(trust, anchors as CFArray)
        SecTrustSetAnchorCertificatesOnly(trust, true)
        return SecTrustEvaluateWithError(trust, nil) ? (.useCredential, URLCredential(trust: trust)) : (.cancelAuthenticationChallenge, nil)
    }
}
#endif
