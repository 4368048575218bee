import Foundation
import Hummingbird
import NIOCore
import ReloadGateAPI
import ReloadGateCore
import ReloadGateStore

extension APIError {
    /// The error with a Hummingbird status, for the routes' own refusals (`409`, `503`, ...).
    init(status: HTTPResponse.Status, code: String, message: String) {
        self.init(status: status.code, code: code, message: message)
    }

    /// `{"code": "...", "message": "..."}` with the error's status.
    var response: Response {
        let body = #"{"code":\#(JSONText.quoted(code)),"message":\#(JSONText.quoted(message))}"#
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}

/// Renders an ``APIError`` thrown by a route (or by the parsing it calls) as its JSON answer, so that
/// every route refuses the same way and the metrics middleware outside it counts the real status. The
/// router's own refusals (Hummingbird's `HTTPError`s) get the same body (the OpenAPI document's `Error`);
/// a path routed for other methods is answered `405` with `allow` (Hummingbird answers 404 for both).
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Whether this is the admin router (the document's `admin` operations) or the API listener's.
    var admin = false

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.response
        } catch let error as HTTPError {
            if error.status == .notFound {
                let allowed = OpenAPIDocument.allowedMethods(for: request.uri.path, admin: admin)
                if !allowed.isEmpty, !allowed.contains(request.method.rawValue) {
                    var response = APIError(
                        status: .methodNotAllowed, code: "method-not-allowed",
                        message: "\(request.uri.path) takes \(allowed.joined(separator: ", ")) (the API is described at /openapi.json)"
                    ).response
                    response.headers[.allow] = allowed.joined(separator: ", ")
                    return response
                }
            }
            return APIError(error).response
        }
    }
}

extension APIError {
    /// A refusal of the router or the HTTP layer (`HTTPError`) as an API error.
    init(_ error: HTTPError) {
        let status = error.status
        let code =
            switch status.code {
            case 404: "not-found"
            case 405: "method-not-allowed"
            case 413: "too-large"
            case 400: "bad-request"
            default: status.reasonPhrase.lowercased().replacingOccurrences(of: " ", with: "-")
            }
        let message =
            switch status.code {
            case 404: "no such route (the API is described at /openapi.json)"
            case 405: "this route does not take that method (the API is described at /openapi.json)"
            default: error.body ?? status.reasonPhrase
            }
        self.init(status: status, code: code, message: message)
    }
}

extension APIError {
    /// The answer to a request refused for the gateway's state rather than for what it asked: stopping,
    /// the store away, too many requests waiting (`503`, nothing accepted, retry); `nil` for other errors.
    static func refusal(_ error: any Error) -> APIError? {
        switch error {
        case is SchedulerUnavailable:
            APIError(status: .serviceUnavailable, code: "shutting-down", message: "the gateway is shutting down; retry")
        case StoreError.outcomeUnknown(let reason):
            APIError(
                status: .serviceUnavailable, code: "store-outcome-unknown",
                message: "the store may or may not have committed the request (\(reason)); retry with the same idempotency-key"
            )
        case let error as StoreError where error.isTransient:
            APIError(status: .serviceUnavailable, code: "store-unavailable", message: "\(error); nothing was accepted, retry")
        case let error as RegistryNotApplied:
            APIError(status: .serviceUnavailable, code: "registry-not-applied", message: "\(error); send the same request again")
        case is SchedulerOverloaded:
            APIError(status: .serviceUnavailable, code: "overloaded", message: "too many requests wait to be decided; nothing was accepted, retry")
        default:
            nil
        }
    }
}
