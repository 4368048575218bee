import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The `apns` upstream (docs/DESIGN.md, "Delivery"): one HTTP/2 request per delivery to Apple's push service
/// (or any URL: the mock in tests, a proxy), with the gateway's own provider token, over the
/// frame-level client of ``APNsConnectionPool`` (docs/DECISIONS.md).
///
/// Answers: 200 sent; 410 `Unregistered` (with Apple's timestamp) and 400 `BadDeviceToken`: the device
/// is invalid; 403 `ExpiredProviderToken`: a new token and one more try; 429 and 5xx: retry (honouring
/// `retry-after`); any other 4xx: failed, not retried. A request Apple certainly did not process (no
/// connection, GOAWAY below its stream, REFUSED_STREAM) is `retry`; one without an answer (reset stream,
/// lost connection, timeout) is `unknown`.
final class APNsUpstream: DeliveryUpstream {
    private let pool: APNsConnectionPool
    private let token: UpstreamToken
    private let now: @Sendable () -> Date
    private let logger: Logger
    /// Refusals for the gateway's own setup, logged as errors at most once a minute each.
    private let alerts = UpstreamAlerts()
    private let timeout: TimeAmount = .seconds(30)
    private static let body = ByteBuffer(string: #"{"aps":{"content-changed":true}}"#)

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
        let url = configuration.url ?? (environment == .production ? "https://api.push.apple.com" : "https://api.sandbox.push.apple.com")
        guard let parsed = URLComponents(string: url), parsed.scheme == "https", let host = parsed.host, !host.isEmpty,
            parsed.path.isEmpty || parsed.path == "/"
        else {
            throw ConfigurationError.inconsistent(key: "upstream.url", reason: "\(url) is not https://host or https://host:port")
        }
        do {
            pool = try APNsConnectionPool(
                host: host,
                port: parsed.port ?? 443,
                tls: tls,
                connections: configuration.connections,
                group: MultiThreadedEventLoopGroup.singleton,
                logger: logger
            )
        } catch {
            throw ConfigurationError.inconsistent(key: "upstream", reason: "the TLS client configuration is not usable: \(error)")
        }
        self.now = now
        self.logger = logger
    }

    func close() async {
        await pool.shutdown()
    }

    func ready() async {
        await pool.ready()
    }

    func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
        let first = try await attempt(push)
        guard Self.asksForNewToken(first) else { return first }
        // Apple says the token is too old: a new one (at most once in 20 minutes) and one more try.
        token.refresh(now: Timestamp(now()).milliseconds / 1000)
        return try await attempt(push)
    }

    /// Apple said `ExpiredProviderToken` (``UpstreamAction/newToken``).
    private static func asksForNewToken(_ outcome: DeliveryOutcome) -> Bool {
        guard case .retry(let reason, _) = outcome else { return false }
        return UpstreamRefusal.known[reason]?.action == .newToken
    }

    /// Sends the pushes on one connection, written in one event-loop turn. Pushes Apple refuses with
    /// `ExpiredProviderToken` get a new token and one more try each, as in ``send(_:)``.
    func send(batch pushes: [OutgoingPush]) async -> [Result<DeliveryOutcome, any Error>] {
        let authorization = "bearer \(token.token(now: Timestamp(now()).milliseconds / 1000))"
        let requests = pushes.map {
            APNsRequest(path: Self.path(of: $0), headers: Self.headers(of: $0, authorization: authorization), body: $0.payload.map(ByteBuffer.init(bytes:)))
        }
        let answers = await pool.send(batch: requests, body: Self.body, timeout: timeout)
        var outcomes: [Result<DeliveryOutcome, any Error>] = []
        outcomes.reserveCapacity(pushes.count)
        for (push, answer) in zip(pushes, answers) {
            let outcome = outcome(of: answer)
            if case .success(let delivered) = outcome, Self.asksForNewToken(delivered) {
                token.refresh(now: Timestamp(now()).milliseconds / 1000)
                do { outcomes.append(.success(try await attempt(push))) } catch { outcomes.append(.failure(error)) }
            } else {
                outcomes.append(outcome)
            }
        }
        return outcomes
    }

    private func attempt(_ push: OutgoingPush) async throws -> DeliveryOutcome {
        let authorization = "bearer \(token.token(now: Timestamp(now()).milliseconds / 1000))"
        let answer: Result<APNsAnswer, any Error>
        do {
            let body = push.payload.map(ByteBuffer.init(bytes:)) ?? Self.body
            answer = .success(try await pool.send(path: Self.path(of: push), headers: Self.headers(of: push, authorization: authorization), body: body, timeout: timeout))
        } catch {
            answer = .failure(error)
        }
        return try outcome(of: answer).get()
    }

    private static func path(of push: OutgoingPush) -> String {
        "/3/device/\(push.deviceToken.hex)"
    }

    private static func headers(of push: OutgoingPush, authorization: String) -> [(String, String)] {
        var headers: [(String, String)] = [
            ("authorization", authorization),
            ("apns-topic", push.topic),
            ("apns-push-type", push.pushType.rawValue),
            ("apns-id", push.apnsID),
            ("apns-priority", String(push.priority.rawValue)),
            ("content-type", "application/json"),
        ]
        if push.expiration?.isNowOrNever == true {
            // Now or never: what a sender's 0 asked, or what the push type requires (the worker set it).
            headers.append(("apns-expiration", "0"))
        } else if let expiration = push.expiration {
            headers.append(("apns-expiration", String(max(0, expiration.milliseconds / 1000))))
        }
        return headers
    }

    /// `retry-after` in seconds, at most an hour (a longer wait is the backoff's ceiling's job, and a
    /// huge value must not overflow); an HTTP date or anything else is ignored.
    static func retryAfter(_ text: String) -> Int64? {
        Int64(text).map { min(max($0, 0), 3600) }
    }

    /// What an answer (or the transport's error) means for the delivery (``UpstreamRefusal``: one action per
    /// reason of Apple's); errors other than ``APNsTransportError`` stay errors (the worker counts them as
    /// `unknown`). A refusal for the gateway's own setup is logged as an error (``alerts``).
    private func outcome(of result: Result<APNsAnswer, any Error>) -> Result<DeliveryOutcome, any Error> {
        if case .success(let answer) = result, answer.status != 200 {
            let refusal = Self.refusal(of: answer)
            if refusal.action == .alert { alerts.report(refusal, logger: logger) }
        }
        return Self.outcome(of: result)
    }

    /// Apple's refusal in `answer` (its status and the reason of its JSON body).
    static func refusal(of answer: APNsAnswer) -> UpstreamRefusal {
        UpstreamRefusal(status: answer.status, reason: AppleAnswer(body: answer.body).reason)
    }

    static func outcome(of result: Result<APNsAnswer, any Error>) -> Result<DeliveryOutcome, any Error> {
        let answer: APNsAnswer
        switch result {
        case .success(let received):
            answer = received
        case .failure(let error as APNsTransportError):
            return .success(error.wasNotSent ? .retry(reason: error.description, retryAfter: nil) : .unknown(reason: error.description))
        case .failure(let error):
            return .failure(error)
        }
        if answer.status == 200 { return .success(.sent) }
        let body = AppleAnswer(body: answer.body)
        let refusal = UpstreamRefusal(status: answer.status, reason: body.reason)
        switch refusal.action {
        case .retireToken:
            // Apple's milliseconds (with a 410); anything that is no time from 1970 to 9999 is taken as "now".
            let timestamp = answer.status == 410 ? body.timestamp.flatMap { Timestamp(unixSeconds: $0 / 1000) } : nil
            return .success(.deviceInvalid(reason: refusal.reason, since: timestamp))
        case .newToken:
            return .success(.retry(reason: refusal.reason, retryAfter: nil))
        case .retry, .newConnection:
            // (The connection that said so takes no new request: APNsClientHandler.)
            return .success(.retry(reason: refusal.reason, retryAfter: answer.headers.first(name: "retry-after").flatMap(Self.retryAfter)))
        case .drop, .alert:
            return .success(.failed(reason: refusal.reason))
        }
    }
}

/// Apple's JSON answer to a refused push (`{"reason":"BadDeviceToken"}`, with `timestamp` for a `410`), read
/// by ``JSONParser``: the body comes from outside the gateway, and Foundation's `JSONDecoder` traps on some
/// texts where the parser refuses (a text that ends on its 513th opening bracket, decision 0102). A body
/// that is not a JSON object, or a field of another type, reads as absent.
struct AppleAnswer {
    var reason: String?
    var timestamp: Double?

    init(body: ByteBuffer) {
        guard case .object(let fields)? = try? JSONParser.parse(body.readableBytesView) else { return }
        if case .string(let text)? = fields["reason"] { reason = text }
        timestamp = fields["timestamp"]?.finiteNumber
    }
}

/// Logs Apple's refusals for the gateway's own setup (``UpstreamAction/alert``: the key, the team, the
/// environment, a topic), each reason at most once a minute: every delivery like the refused one will be
/// refused the same way until the operator changes the setup.
final class UpstreamAlerts: Sendable {
    private let last = Mutex<[String: ContinuousClock.Instant]>([:])

    func report(_ refusal: UpstreamRefusal, logger: Logger) {
        let now = ContinuousClock.now
        let due = last.withLock { last in
            if let previous = last[refusal.reason], previous.duration(to: now) < .seconds(60) { return false }
            last[refusal.reason] = now
            return true
        }
        guard due else { return }
        logger.error(
            "Apple refuses the gateway's deliveries for its own setup; they fail until it is changed (upstream.keyFile, keyID, teamID, url and environment, the apps' bundle ids)",
            metadata: ["status": "\(refusal.status)", "reason": "\(refusal.reason)"]
        )
    }
}
