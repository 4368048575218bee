import Foundation
import Hummingbird
import NIOCore

/// An error of the JSON APIs (registry, webhook): a status and `{"code": "...", "message": "..."}`.
/// The code is stable for programs; the message is for people.
struct APIError: HTTPResponseError {
    let status: HTTPResponse.Status
    let code: String
    let message: String

    static func unauthorized(_ message: String) -> APIError { .init(status: .unauthorized, code: "unauthorized", message: message) }
    static func forbidden(_ message: String) -> APIError { .init(status: .forbidden, code: "forbidden", message: message) }
    static func notFound(_ message: String) -> APIError { .init(status: .notFound, code: "not-found", message: message) }
    static func invalidJSON(_ message: String) -> APIError { .init(status: .badRequest, code: "invalid-json", message: message) }
    static func invalidField(_ message: String) -> APIError {
        .init(status: .unprocessableContent, code: "invalid-field", message: message)
    }
    static func tooLarge(_ limit: Int) -> APIError {
        .init(status: .contentTooLarge, code: "too-large", message: "the body is larger than \(limit) bytes")
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let object = ["code": code, "message": message]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}
