import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateAPNs
import ReloadGateCore

/// The `apns` upstream (DESIGN.md, "Delivery"): one HTTP/2 request per delivery to Apple's push service
/// (or any URL: the mock in tests, a proxy), with the gateway's own provider token.
///
/// Answers: 200 sent; 410 `Unregistered` (with Apple's timestamp) and 400 `BadDeviceToken`: the device
/// is invalid; 403 `ExpiredProviderToken`: a new token and one more try; 429 and 5xx: retry (honouring
/// `retry-after`); any other 4xx: failed, not retried. Connection errors are retried.
final class APNsUpstream: DeliveryUpstream {
    private let client: HTTPClient
    private let baseURL: String
    private let token: UpstreamToken
    private let now: @Sendable () -> Date
    private let logger: Logger

    init(configuration: GatewayConfiguration.Upstream, environment: DeploymentEnvironment, now: @escaping @Sendable () -> Date, logger: Logger) throws {
        guard let keyFile = configuration.keyFile, let keyID = configuration.keyID, let teamID = configuration.teamID else {
            throw ConfigurationError.inconsistent(key: "upstream.kind", reason: "apns needs upstream.keyFile, upstream.keyID and upstream.teamID")
        }
        do {
            token = try UpstreamToken(p8File: keyFile, keyID: keyID, teamID: teamID)
        } catch {
            throw ConfigurationError.unusableFile(key: "upstream.keyFile", path: keyFile, reason: "not a P-256 private key in PEM (.p8)")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let caFile = configuration.caFile {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
            } catch {
                throw ConfigurationError.unusableFile(key: "upstream.caFile", path: caFile, reason: "not PEM certificates")
            }
        }
        var client = HTTPClient.Configuration(tlsConfiguration: tls)
        client.httpVersion = .automatic
        client.timeout = .init(connect: .seconds(10), read: .seconds(30))
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: client)
        self.baseURL = configuration.url ?? (environment == .production ? "https://api.push.apple.com" : "https://api.sandbox.push.apple.com")
        self.now = now
        self.logger = logger
    }

    func close() async {
        try? await client.shutdown()
    }

    func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
        let first = try await attempt(push)
        guard case .retry(let reason, _) = first, reason == "ExpiredProviderToken" else { return first }
        // Apple says the token is too old: a new one (at most once in 20 minutes) and one more try.
        token.refresh(now: Int64(now().timeIntervalSince1970))
        return try await attempt(push)
    }

    private func attempt(_ push: OutgoingPush) async throws -> DeliveryOutcome {
        var request = HTTPClientRequest(url: "\(baseURL)/3/device/\(push.deviceToken.hex)")
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer \(token.token(now: Int64(now().timeIntervalSince1970)))")
        request.headers.add(name: "apns-topic", value: push.topic)
        request.headers.add(name: "apns-push-type", value: "widgets")
        request.headers.add(name: "apns-id", value: push.apnsID)
        request.headers.add(name: "apns-priority", value: String(push.priority.rawValue))
        if let expiration = push.expiration {
            request.headers.add(name: "apns-expiration", value: String(max(0, expiration.milliseconds / 1000)))
        }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: #"{"aps":{"content-changed":true}}"#))
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 64 * 1024)
        let status = Int(response.status.code)
        if status == 200 { return .sent }
        let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
        let reason = object?["reason"] as? String ?? "HTTP \(status)"
        switch status {
        case 410:
            let timestamp = (object?["timestamp"] as? NSNumber).map { Timestamp(milliseconds: $0.int64Value) }
            return .deviceInvalid(reason: reason, since: timestamp)
        case 400 where reason == "BadDeviceToken":
            return .deviceInvalid(reason: reason, since: nil)
        case 403 where reason == "ExpiredProviderToken":
            return .retry(reason: reason, retryAfter: nil)
        case 429, 500...599:
            return .retry(reason: reason, retryAfter: response.headers.first(name: "retry-after").flatMap { Int64($0) })
        default:
            return .failed(reason: reason)
        }
    }
}
