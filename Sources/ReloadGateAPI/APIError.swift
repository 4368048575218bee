/// Why a call of the registry API or the webhook is refused: an HTTP status and a stable code for
/// programs, a message for people (`{"code": "...", "message": "..."}`). Nothing of a refused call is
/// stored.
public struct APIError: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    public var code: String
    public var message: String
    /// Seconds after which a refused call may be tried again (`retry-after`; a 429's).
    public var retryAfter: Int?

    public init(status: Int, code: String, message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// `400 invalid-json`: the body is not a JSON object.
    public static func invalidJSON(_ message: String) -> APIError { .init(status: 400, code: "invalid-json", message: message) }
    /// `422 invalid-field`: a field is missing, of the wrong type or out of range; the message names it.
    public static func invalidField(_ message: String) -> APIError { .init(status: 422, code: "invalid-field", message: message) }
    /// `401 unauthorized`: no or unknown credentials.
    public static func unauthorized(_ message: String) -> APIError { .init(status: 401, code: "unauthorized", message: message) }
    /// `403 forbidden`: credentials of another app, or not allowed to do this.
    public static func forbidden(_ message: String) -> APIError { .init(status: 403, code: "forbidden", message: message) }
    /// `429 too-many-requests`, with the seconds after which to try again.
    public static func tooManyRequests(_ message: String, retryAfter: Int) -> APIError {
        .init(status: 429, code: "too-many-requests", message: message, retryAfter: max(1, retryAfter))
    }
    /// `404 not-found`.
    public static func notFound(_ message: String) -> APIError { .init(status: 404, code: "not-found", message: message) }
    /// `413 too-large`.
    public static func tooLarge(_ limit: Int) -> APIError {
        .init(status: 413, code: "too-large", message: "the body is larger than \(limit) bytes")
    }

    public var description: String { "\(status) \(code): \(message)" }
}
