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
        return Response(
            status: HTTPResponse.Status(code: status),
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body))
        )
    }
}

/// Renders an ``APIError`` thrown by a route (or by the parsing it calls) as its JSON answer, so that
/// every route refuses the same way and the metrics middleware outside it counts the real status.
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.response
        }
    }
}

extension APIError {
    /// The answer to a request refused for the gateway's state rather than for what it asked: stopping,
    /// the store away, too many requests waiting (`503`, nothing accepted, retry); `nil` for other errors.
    static func refusal(_ error: any Error) -> APIError? {
        switch error {
        case is SchedulerUnavailable:
            APIError(status: .serviceUnavailable, code: "shutting-down", message: "the gateway is shutting down; retry")
        case let error as StoreError where error.isTransient:
            APIError(status: .serviceUnavailable, code: "store-unavailable", message: "\(error); nothing was accepted, retry")
        case is SchedulerOverloaded:
            APIError(status: .serviceUnavailable, code: "overloaded", message: "too many requests wait to be decided; nothing was accepted, retry")
        default:
            nil
        }
    }
}
