import Hummingbird

/// Counts the API listener's answers by route pattern (`/v1/apps/{bundle}/reloads`, never the bundle
/// itself; `NotFound` for paths no route matches), method and status, in ``GatewayMetrics``.
struct HTTPMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: GatewayMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            metrics.httpRequest(route: context.endpointPath ?? "NotFound", method: request.method.rawValue, status: response.status.code)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.httpRequest(route: context.endpointPath ?? "NotFound", method: request.method.rawValue, status: status)
            throw error
        }
    }
}
