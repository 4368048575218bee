import Foundation
public import ReloadGateCore
import Synchronization

/// A widget push's answer as a test reads it.
public struct PushAnswer: Sendable {
    /// The answer itself (status, headers, body).
    public var answer: RawHTTP2Client.Answer
    /// The push's apns-id (lowercased, as the gateway stores it).
    public var apnsID: String
    /// Seconds from sending to the answer.
    public var seconds: Double

    public var status: Int { answer.status }
    public var body: String { answer.body }
    /// `reloadgate-decision`.
    public var decision: String? { answer.header("reloadgate-decision") }
}

extension TestGateway {
    /// Sends a widget push (or, with `pushType`, another type's; `body`: `{"aps":{"content-changed":true}}` unless given) through
    /// the APNs listener on a connection of its own, signed by `sender`, with `apnsID` (a new one by default;
    /// `nil`: none, the gateway picks one).
    /// - Throws: ``TestGatewayError/unanswered(seconds:)`` when no answer came within `timeout`: a request
    ///   that enters the gateway is answered, always (a store that fails included).
    public func push(
        _ token: String,
        bundle: String,
        sender: ProviderTokenFactory,
        priority: Int = 10,
        pushType: PushType = .widgets,
        apnsID: String? = UUID().uuidString.lowercased(),
        body: [UInt8] = Array(#"{"aps":{"content-changed":true}}"#.utf8),
        timeout: Duration = .seconds(30)
    ) async throws -> PushAnswer {
        let started = ContinuousClock.now
        let port = ingressPort
        let tls = try pki.clientTLSConfiguration()
        // The send runs in a task of its own, not a child: a child that does not end on cancellation (a
        // client awaiting an answer that never comes) would hold the waiting test forever, and a hang
        // tells less than a failure.
        let outcome = Mutex<Result<RawHTTP2Client.Answer, any Error>?>(nil)
        let sending = Task {
            let result: Result<RawHTTP2Client.Answer, any Error>
            do {
                let client = try await RawHTTP2Client.connect(port: port, tls: tls)
                defer { Task { await client.close() } }
                result = .success(
                    try await client.send(
                        RawHTTP2Client.push(token: token, [
                            ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(bundle)\(pushType.topicSuffix)"),
                            ("apns-push-type", pushType.rawValue), ("apns-priority", "\(priority)"),
                        ] + (apnsID.map { [("apns-id", $0)] } ?? [])),
                        body: body
                    )
                )
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
        }
        let deadline = ContinuousClock.now + timeout
        var answer: RawHTTP2Client.Answer?
        while ContinuousClock.now < deadline {
            if let result = outcome.withLock({ $0 }) {
                answer = try result.get()
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        if answer == nil { sending.cancel() }
        guard let answer else { throw TestGatewayError.unanswered(seconds: Int(timeout.components.seconds)) }
        let took = started.duration(to: .now)
        return PushAnswer(
            answer: answer, apnsID: (apnsID ?? answer.header("apns-id") ?? "").lowercased(), seconds: Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
        )
    }
}
