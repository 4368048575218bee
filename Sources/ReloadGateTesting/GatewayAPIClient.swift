public import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
import ReloadGateAPI
import ReloadGateServer

/// The registry API and reload webhook as a backend calls them, for end-to-end tests and benchmarks.
public struct GatewayAPIClient: Sendable {
    /// An answer: status, headers and body text.
    public struct Answer: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: String

        /// The body as a JSON object (empty when it is not one).
        public var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        }

        /// The first value of a header.
        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    public let client: HTTPClient
    /// `https://host:port`.
    public let baseURL: String

    public init(client: HTTPClient, baseURL: String) {
        self.client = client
        self.baseURL = baseURL
    }

    /// `PUT /v1/apps/<bundle>/devices/<token>` with widgets given as JSON objects (and the token it replaces).
    public func putDevice(
        bundle: String, token: String, apiKey: String, widgets: [[String: Any]], previousToken: String? = nil
    ) async throws -> Answer {
        var object: [String: Any] = ["widgets": widgets]
        if let previousToken { object["previousToken"] = previousToken }
        let body = try JSONSerialization.data(withJSONObject: object)
        return try await send(.PUT, "/v1/apps/\(bundle)/devices/\(token)", body: body, headers: ["authorization": "bearer \(apiKey)"])
    }

    /// `PUT /v1/apps/<bundle>/controls/<token>`: a control's kind and configuration (and the token it replaces).
    public func putControl(
        bundle: String,
        token: String,
        apiKey: String,
        kind: String,
        configuration: [String: Any] = [:],
        previousToken: String? = nil
    ) async throws -> Answer {
        var object: [String: Any] = ["kind": kind, "configuration": configuration]
        if let previousToken { object["previousToken"] = previousToken }
        let body = try JSONSerialization.data(withJSONObject: object)
        return try await send(.PUT, "/v1/apps/\(bundle)/controls/\(token)", body: body, headers: ["authorization": "bearer \(apiKey)"])
    }

    /// `PUT /v1/apps/<bundle>/activities/<token>`: a Live Activity's (or push-to-start) token.
    public func putActivity(
        bundle: String,
        token: String,
        apiKey: String,
        attributesType: String,
        attributes: [String: Any] = [:],
        frequentUpdates: Bool = false,
        pushToStart: Bool = false
    ) async throws -> Answer {
        let object: [String: Any] = [
            "attributesType": attributesType, "attributes": attributes, "frequentUpdates": frequentUpdates, "pushToStart": pushToStart,
        ]
        let body = try JSONSerialization.data(withJSONObject: object)
        return try await send(.PUT, "/v1/apps/\(bundle)/activities/\(token)", body: body, headers: ["authorization": "bearer \(apiKey)"])
    }

    /// `PUT .../widgets/<id>/timeline`.
    public func putTimeline(
        bundle: String,
        token: String,
        widget: String,
        apiKey: String,
        entries: [Date],
        policy: Any
    ) async throws -> Answer {
        let object: [String: Any] = [
            "entries": entries.map { ["date": $0.timeIntervalSince1970] },
            "policy": policy,
        ]
        let body = try JSONSerialization.data(withJSONObject: object)
        return try await send(
            .PUT,
            "/v1/apps/\(bundle)/devices/\(token)/widgets/\(widget)/timeline",
            body: body,
            headers: ["authorization": "bearer \(apiKey)"]
        )
    }

    /// `POST /v1/apps/<bundle>/reloads`, signed with `secret` at `timestamp` (default: now) unless a
    /// `signature` header value is given.
    public func reload(
        bundle: String,
        body: String,
        secret: String,
        timestamp: Int64 = Int64(Date().timeIntervalSince1970),
        signature: String? = nil,
        idempotencyKey: String? = nil
    ) async throws -> Answer {
        var headers = [
            "reloadgate-signature": signature ?? WebhookSignature.header(body: Data(body.utf8), timestamp: timestamp, secret: secret),
            "content-type": "application/json",
        ]
        if let idempotencyKey { headers["idempotency-key"] = idempotencyKey }
        return try await send(.POST, "/v1/apps/\(bundle)/reloads", body: Data(body.utf8), headers: headers)
    }

    /// Any request.
    public func send(_ method: HTTPMethod, _ path: String, body: Data? = nil, headers: [String: String] = [:]) async throws -> Answer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let buffer = try await response.body.collect(upTo: 1 << 20)
        return Answer(
            status: Int(response.status.code),
            headers: response.headers.map { ($0.name, $0.value) },
            body: String(buffer: buffer)
        )
    }

    /// Asks `/ready` every 100 ms until it answers `status`; whether it did within `timeout`.
    public func waitForReadiness(_ status: Int, within timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await send(.GET, "/ready").status == status { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
