import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Security)
import Security
#endif

/// Where the gateway is and how the app speaks to it: its address, the app's bundle id and registration key
/// (the key that may ship inside an app: it may only register), which certificates to trust, and how long
/// a report may take (a widget extension lives for seconds).
public struct GatewayConfiguration: Sendable {
    public enum Trust: Sendable {
        /// The system's trust store (a gateway behind a public certificate).
        case system
        /// Only this certificate authority (PEM file), as `reloadgate certs dev` makes one. On Linux it is
        /// given to libcurl for the whole process (`URLSessionCertificateAuthorityInfoFile`).
        case certificateAuthority(URL)
    }

    public var baseURL: URL
    public var bundle: String
    public var registrationKey: String
    public var trust: Trust
    /// The longest a call may take, retries included.
    public var deadline: Duration
    /// Attempts at most for one call (network errors, 429, 5xx are tried again).
    public var attempts: Int

    public init(baseURL: URL, bundle: String, registrationKey: String, trust: Trust = .system, deadline: Duration = .seconds(20), attempts: Int = 4) {
        self.baseURL = baseURL
        self.bundle = bundle
        self.registrationKey = registrationKey
        self.trust = trust
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

/// The registry API with the app's registration key: devices (with their widgets), controls and
/// timelines put and deleted, each call retried within its deadline.
public final class ReloadGateClient: Sendable {
    public let configuration: GatewayConfiguration
    private let session: URLSession
    private let delegate: TrustDelegate?

    public init(_ configuration: GatewayConfiguration) {
        self.configuration = configuration
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = Double(configuration.deadline.components.seconds) + 1
        switch configuration.trust {
        case .system:
            delegate = nil
        case .certificateAuthority(let file):
            #if canImport(Security)
            delegate = TrustDelegate(authority: file)
            #else
            setenv("URLSessionCertificateAuthorityInfoFile", file.path, 1)
            delegate = nil
            #endif
        }
        session = URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: nil)
    }

    // MARK: The calls

    /// The path of a registry call of this app.
    func path(_ tail: String) -> String { "/v1/apps/\(configuration.bundle)/\(tail)" }

    public func call(registering device: DeviceRegistration, token: String) throws -> RegistryCall {
        RegistryCall(method: "PUT", path: path("devices/\(token)"), body: try Self.encoder.encode(device))
    }

    public func call(registering control: ControlRegistration, token: String) throws -> RegistryCall {
        RegistryCall(method: "PUT", path: path("controls/\(token)"), body: try Self.encoder.encode(control))
    }

    public func call(reporting timeline: TimelineReport, token: String, widget: String) throws -> RegistryCall {
        let widgetPath = widget.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? widget
        return RegistryCall(method: "PUT", path: path("devices/\(token)/widgets/\(widgetPath)/timeline"), body: try Self.encoder.encode(timeline))
    }

    public func call(deletingDevice token: String) -> RegistryCall {
        RegistryCall(method: "DELETE", path: path("devices/\(token)"), body: nil)
    }

    public func call(deletingControl token: String) -> RegistryCall {
        RegistryCall(method: "DELETE", path: path("controls/\(token)"), body: nil)
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    // MARK: Sending

    /// Sends `call`, trying again after network errors, 429 (after its `retry-after`) and 5xx, with a
    /// doubling pause, until ``GatewayConfiguration/attempts`` or the deadline; returns the answer's body.
    @discardableResult
    public func send(_ call: RegistryCall) async throws(ReloadGateError) -> Data {
        let clock = ContinuousClock()
        let end = clock.now + configuration.deadline
        var pause = Duration.milliseconds(250)
        var last = ReloadGateError.unreachable("not sent")
        for attempt in 1...configuration.attempts {
            var wait = pause
            do {
                let (data, response) = try await session.data(for: request(call))
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                if (200..<300).contains(status) { return data }
                last = Self.refusal(status: status, body: data)
                guard last.isTemporary, status != 401 else { throw last }
                if let retryAfter = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "retry-after").flatMap(Int.init) {
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

    private func request(_ call: RegistryCall) -> URLRequest {
        var request = URLRequest(url: configuration.baseURL.appendingPathComponent(String(call.path.dropFirst())))
        request.httpMethod = call.method
        request.httpBody = call.body
        request.setValue("bearer \(configuration.registrationKey)", forHTTPHeaderField: "authorization")
        if call.body != nil { request.setValue("application/json", forHTTPHeaderField: "content-type") }
        return request
    }

    static func refusal(status: Int, body: Data) -> ReloadGateError {
        struct Answer: Decodable { var code: String; var message: String }
        let answer = try? JSONDecoder().decode(Answer.self, from: body)
        return .refused(status: status, code: answer?.code ?? "http-\(status)", message: answer?.message ?? String(decoding: body, as: UTF8.self))
    }
}

#if canImport(Security)
/// Trusts only the given certificate authority's certificates (Apple platforms).
final class TrustDelegate: NSObject, URLSessionDelegate, Sendable {
    private let anchors: [SecCertificate]

    init(authority file: URL) {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        anchors = text.components(separatedBy: "-----BEGIN CERTIFICATE-----").dropFirst().compactMap { block in
            let base64 = block.components(separatedBy: "-----END CERTIFICATE-----")[0].filter { !$0.isWhitespace }
            return Data(base64Encoded: base64).flatMap { SecCertificateCreateWithData(nil, $0 as CFData) }
        }
    }

    func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge) async -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
            let trust = challenge.protectionSpace.serverTrust
        else { return (.performDefaultHandling, nil) }
        SecTrustSetAnchorCertificates(trust, anchors as CFArray)
        SecTrustSetAnchorCertificatesOnly(trust, true)
        return SecTrustEvaluateWithError(trust, nil) ? (.useCredential, URLCredential(trust: trust)) : (.cancelAuthenticationChallenge, nil)
    }
}
#else
/// No delegate is needed off Apple platforms (libcurl is told the authority).
final class TrustDelegate: NSObject, URLSessionDelegate, Sendable {}
#endif
