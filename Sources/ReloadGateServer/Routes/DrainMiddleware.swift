import Hummingbird

/// Tracks every request in the ``RequestDrain``; once draining, answers `503` with the APNs reason
/// `Shutdown` (APNS.md: "draining for shutdown") so senders retry elsewhere.
struct DrainMiddleware<Context: RequestContext>: RouterMiddleware {
    let drain: RequestDrain

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard drain.begin() else {
            return OperationsRoutes.json(.serviceUnavailable, #"{"reason":"Shutdown"}"#)
        }
        defer { drain.end() }
        return try await next(request, context)
    }
}
