import Foundation

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
    /// Sends a widget push (`{"aps":{"content-changed":true}}`) through the APNs listener on a connection of
    /// its own, signed by `sender`.
    /// - Throws: ``TestGatewayError/unanswered(seconds:)`` when no answer came within `timeout`: a request
    ///   that enters the gateway is answered, always (a store that fails included).
    public func push(
        _ token: String,
        bundle: String,
        sender: ProviderTokenFactory,
        priority: Int = 10,
        timeout: Duration = .seconds(30)
    ) async throws -> PushAnswer {
        let apnsID = UUID().uuidString.lowercased()
        let started = ContinuousClock.now
        let port = ingressPort
        let tls = try pki.clientTLSConfiguration()
        let answer = try await withThrowingTaskGroup(of: RawHTTP2Client.Answer?.self) { group in
            group.addTask {
                let client = try await RawHTTP2Client.connect(port: port, tls: tls)
                defer { Task { await client.close() } }
                return try await client.send(
                    RawHTTP2Client.push(token: token, [
                        ("authorization", "bearer \(sender.token())"), ("apns-topic", "\(bundle).push-type.widgets"),
                        ("apns-push-type", "widgets"), ("apns-id", apnsID), ("apns-priority", "\(priority)"),
                    ]),
                    body: Array(#"{"aps":{"content-changed":true}}"#.utf8)
                )
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let answer else { throw TestGatewayError.unanswered(seconds: Int(timeout.components.seconds)) }
        let took = started.duration(to: .now)
        return PushAnswer(
            answer: answer, apnsID: apnsID, seconds: Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
        )
    }
}
