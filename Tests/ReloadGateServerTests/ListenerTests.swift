import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateCore
import ReloadGateServer
import ReloadGateTesting
import Testing

/// The listener end to end: real TLS, HTTP/2 and HTTP/1.1 negotiated with ALPN, async-http-client.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct ListenerTests {
    @Test(arguments: [
        (HTTPClient.Configuration.HTTPVersion.automatic, HTTPVersion.http2),
        (.http1Only, .http1_1),
    ])
    func healthAndReadyAnswerOverBothProtocols(_ offered: HTTPClient.Configuration.HTTPVersion, _ negotiated: HTTPVersion) async throws {
        try await TestGateway.withRunning { gateway in
            try await gateway.withHTTPClient(offered) { client in
                let health = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/health"), timeout: .seconds(30))
                #expect(health.status == .ok)
                #expect(health.version == negotiated)
                #expect(health.headers["content-type"] == ["application/json"])
                #expect(String(buffer: try await health.body.collect(upTo: 1024)) == #"{"status":"alive"}"#)

                let ready = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/ready"), timeout: .seconds(30))
                #expect(ready.status == .ok)
                #expect(ready.version == negotiated)
                #expect(String(buffer: try await ready.body.collect(upTo: 1024)) == #"{"status":"ready"}"#)
            }
        }
    }

    @Test func manyRequestsShareOneHTTP2Connection() async throws {
        try await TestGateway.withRunning { gateway in
            try await gateway.withHTTPClient { client in
                let statuses = try await withThrowingTaskGroup(of: (HTTPResponseStatus, HTTPVersion).self) { group in
                    for _ in 0..<50 {
                        group.addTask {
                            let response = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/health"), timeout: .seconds(30))
                            return (response.status, response.version)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(statuses.count == 50)
                #expect(statuses.allSatisfy { $0.0 == .ok && $0.1 == .http2 })
            }
        }
    }

    @Test func unknownPathsAre404() async throws {
        try await TestGateway.withRunning { gateway in
            try await gateway.withHTTPClient { client in
                let response = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/nothing-here"), timeout: .seconds(30))
                #expect(response.status == .notFound)
            }
        }
    }

    @Test func tlsOlderThan1_2IsRefused() async throws {
        try await TestGateway.withRunning { gateway in
            var tls = try gateway.pki.clientTLSConfiguration()
            tls.minimumTLSVersion = .tlsv1
            tls.maximumTLSVersion = .tlsv11
            await #expect(throws: (any Error).self) {
                try await gateway.withHTTPClient(tls: tls, connectTimeout: .seconds(2)) { client in
                    _ = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/health"), timeout: .seconds(30))
                }
            }
        }
    }

    @Test func clientCertificatesAreOptionalButMustChainToTheClientCA() async throws {
        try await TestGateway.withRunning { gateway in
            // A certificate of the configured client CA completes the handshake.
            let trusted = try gateway.pki.clientTLSConfiguration(clientCertificateFor: [try BundleID("com.example.scores")])
            try await gateway.withHTTPClient(tls: trusted) { client in
                let response = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/health"), timeout: .seconds(30))
                #expect(response.status == .ok)
            }

            // A certificate of another CA never completes it.
            let strangerDirectory = try TemporaryDirectory("stranger")
            defer { strangerDirectory.remove() }
            let stranger = try TestPKI(in: strangerDirectory)
            var untrusted = try stranger.clientTLSConfiguration(clientCertificateFor: [try BundleID("com.example.scores")])
            untrusted.trustRoots = try gateway.pki.clientTLSConfiguration().trustRoots
            await #expect(throws: (any Error).self) {
                try await gateway.withHTTPClient(tls: untrusted, connectTimeout: .seconds(2)) { client in
                    _ = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/health"), timeout: .seconds(30))
                }
            }
        }
    }
}
