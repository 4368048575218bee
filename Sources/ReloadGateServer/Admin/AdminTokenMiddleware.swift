import Crypto
import Foundation
import Hummingbird
import ReloadGateAPI
import ReloadGateCore

/// Lets through only requests with `authorization: bearer <admin token>` (compared in constant time).
struct AdminTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let tokenHash: SHA256.Digest

    init(token: String) {
        tokenHash = SHA256.hash(data: Data(token.utf8))
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if KeyScope.presentsRegistrationKey(request) {
            return KeyScope.refusal(needs: "the admin API needs the token in admin.tokenFile").response
        }
        guard let credential = HeaderValue.bearerCredential(request.headers[.authorization]), SHA256.hash(data: Data(credential.utf8)) == tokenHash
        else {
            return APIError.unauthorized("the admin API needs authorization: bearer <the token in admin.tokenFile>").response
        }
        return try await next(request, context)
    }
}
