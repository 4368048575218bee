import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where the gateway is and how the app speaks to it: its address, the app's bundle id and registration key
/// (the key that may ship inside an app: it may only register), and how long a report may take (a widget
/// extension lives for seconds).
public struct GatewayConfiguration: Sendable {
    public var baseURL: URL
    public var bundle: String
    public var registrationKey: String
    /// The longest a call may take, retries included.
    public var deadline: Duration
    /// Attempts at most for one call (network errors, 408, 429, 5xx are tried again).
    public var attempts: Int

    public init(baseURL: URL, bundle: String, registrationKey: String, deadline: Duration = .seconds(20), attempts: Int = 4) {
        self.baseURL = baseURL
        self.bundle = bundle
        self.registrationKey = registrationKey
        self.deadline = deadline
        self.attempts = max(1, attempts)
    }
}

/// What the gateway refused, or why the call did not get through.
public enum ReloadGateError: Error, Sendable, Equatable {
    /// The gateway answered with an error: its status, code and message (`{"code", "message"}`).
    case refused(status: Int, code: String, message: String)
    /// No answer within the deadline, after every attempt (the last failure's description).
    case unreachable(String)

    /// Whether the same call may succeed later unchanged: the gateway away or busy, or a key that an
    /// update of the app will replace (401).
    public var isTemporary: Bool {
        switch self {
        case .unreachable: true
        case .refused(let status, _, _): status == 401 || status == 408 || status == 429 || status >= 500
        }
    }
}

/// One registry call, as it is sent and as the offline queue keeps it.
public struct RegistryCall: Sendable, Hashable, Codable {
    public var method: String
    /// The path below the base URL, `/v1/apps/<bundle>/...`.
    public var path: String
    public var body: Data?

    public init(method: String, path: String, body: Data?) {
        self.method = method
        self.path = path
        self.body = body
    }
}

/// How a request reaches the gateway: ``URLSessionTransport`` by default; another (an HTTP client that
/// trusts a private certificate authority on Linux, a stand-in in tests) where needed.
public protocol RegistryTransport: Sendable {
    /// Sends `request` once and returns the answer, whatever its status; throws when there is none.
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
}

/// The registry API with the app's registration key: devices (with their widgets), controls and
/// timelines put and deleted, each call retried within its deadline.
public final class ReloadGateClient: Sendable {
    public let configuration: GatewayConfiguration
    private let transport: any RegistryTransport

    public init(_ configuration: GatewayConfiguration, transport: any RegistryTransport = URLSessionTransport()) {
        self.configuration = configuration
        self.transport = transport
    }

    // MARK: The calls

    /// The path of a registry call of this app.
    func path(_ tail: String) -> String { "/v1/apps/\(Self.segment(configuration.bundle))/\(tail)" }

    public func call(registering device: DeviceRegistration, token: String) throws -> RegistryCall {
        RegistryCall(method: "PUT", path: path("devices/\(Self.segment(token))"), body: try Self.encoder.encode(device))
    }

    public func call(registering control: ControlRegistration, token: String) throws -> RegistryCall {
        RegistryCall(method: "PUT", path: path("controls/\(Self.segment(token))"), body: try Self.encoder.encode(control))
    }

    public func call(reporting timeline: TimelineReport, token: String, widget: String) throws -> RegistryCall {
        RegistryCall(
            method: "PUT", path: path("devices/\(Self.segment(token))/widgets/\(Self.segment(widget))/timeline"),
            body: try Self.encoder.encode(timeline)
        )
    }

    public func call(deletingDevice token: String) -> RegistryCall {
        RegistryCall(method: "DELETE", path: path("devices/\(Self.segment(token))"), body: nil)
    }

    public func call(deletingControl token: String) -> RegistryCall {
        RegistryCall(method: "DELETE", path: path("controls/\(Self.segment(token))"), body: nil)
    }

    /// One path segment, percent-encoded (a `/` in a widget id stays inside its segment).
    static func segment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? text
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    // MARK: Sending

    /// The request of `call`: the base URL and the call's path, the registration key as a bearer token,
    /// the body as JSON.
    public func request(_ call: RegistryCall) -> URLRequest {
        var base = configuration.baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var request = URLRequest(url: URL(string: base + call.path)!)
        request.httpMethod = call.method
        request.httpBody = call.body
        request.timeoutInterval = Double(configuration.deadline.components.seconds) + 1
        request.setValue("bearer \(configuration.registrationKey)", forHTTPHeaderField: "authorization")
        if call.body != nil { request.setValue("application/json", forHTTPHeaderField: "content-type") }
        return request
    }

    /// Sends `call`, trying again after network errors, 408, 429 (after its `retry-after`) and 5xx, with a
    /// doubling pause from 250 ms, until ``GatewayConfiguration/attempts`` or the deadline; returns the
    /// answer's body. A 401 is not tried again (the key was rotated: an update of the app brings the new one).
    @discardableResult
    public func send(_ call: RegistryCall) async throws(ReloadGateError) -> Data {
        let clock = ContinuousClock()
        let end = clock.now + configuration.deadline
        var pause = Duration.milliseconds(250)
        var last = ReloadGateError.unreachable("not sent")
        for attempt in 1...configuration.attempts {
            var wait = pause
            do {
                let (data, response) = try await transport.send(request(call))
                if (200..<300).contains(response.statusCode) { return data }
                last = Self.refusal(status: response.statusCode, body: data)
                guard last.isTemporary, response.statusCode != 401 else { throw last }
                if let retryAfter = response.value(forHTTPHeaderField: "retry-after").flatMap(Int.init) {
                    wait = max(wait, .seconds(min(max(retryAfter, 0), 3600)))
                }
            } catch let error as ReloadGateError {
                throw error
            } catch {
                last = .unreachable(String(describing: error))
            }
            guard attempt < configuration.attempts, clock.now + wait < end else { break }
            try? await Task.sleep(for: wait)
            pause *= 2
        }
        throw last
    }

    static func refusal(status: Int, body: Data) -> ReloadGateError {
        struct Answer: Decodable { var code: String; var message: String }
        let answer = try? JSONDecoder().decode(Answer.self, from: body)
        return .refused(status: status, code: answer?.code ?? "http-\(status)", message: answer?.message ?? String(decoding: body, as: UTF8.self))
    }
}

/// Requests through a `URLSession` (an ephemeral one by default), with the system's trust. On Apple
/// platforms a session whose delegate trusts a private certificate authority can be given
/// (``PrivateAuthorityDelegate``); on Linux URLSession takes only the system's trust store.
public struct URLSessionTransport: RegistryTransport {
    public let session: URLSession

    public init(session: URLSession = URLSession(configuration: .ephemeral)) {
        self.session = session
    }

    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await session.data(for: request)
        guard let response = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return (data, response)
    }
}
