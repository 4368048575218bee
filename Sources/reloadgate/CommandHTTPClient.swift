import AsyncHTTPClient
import NIOSSL

/// The HTTP client of the commands that ask a running gateway (the admin commands, `health`): made for one
/// command, always shut down, whatever `body` does.
enum CommandHTTPClient {
    static func with<T>(tls: TLSConfiguration? = nil, _ body: (HTTPClient) async throws -> T) async throws -> T {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        let result: Result<T, any Error>
        do {
            result = .success(try await body(client))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        return try result.get()
    }

    /// A client TLS configuration that trusts the certificates of `caFile` (PEM) instead of the system's, or
    /// the system's when `nil`; an unreadable file exits with status 2.
    static func tls(trusting caFile: String?) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
            } catch {
                throw CommandFailure.exit("cannot read CA certificates from \(caFile)", status: 2)
            }
        }
        return tls
    }
}
