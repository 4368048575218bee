import Hummingbird
import ReloadGateAPI

/// Tracks every request in the ``RequestDrain``; once draining, answers `503 shutting-down` so that
/// callers retry elsewhere (the APNs listener answers its senders APNs' `Shutdown` itself).
struct DrainMiddleware<Context: RequestContext>: RouterMiddleware {
    let drain: RequestDrain

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard drain.begin() else {
            return APIError(status: .serviceUnavailable, code: "shutting-down", message: "the gateway is shutting down; retry elsewhere")
                .response
        }
        defer { drain.end() }
        return try await next(request, context)
    }
}
