import Hummingbird
import NIOCore

/// `/health`, `/ready` and `/metrics` (docs/DESIGN.md, Interfaces 5).
struct OperationsRoutes {
    let readiness: Readiness
    let metrics: GatewayMetrics

    func register(on router: some RouterMethods) {
        // Alive: the process answers. Says nothing about the store, on purpose (a liveness probe that
        // fails on a slow disk would restart a healthy process).
        router.get("/health") { _, _ in
            Self.json(.ok, #"{"status":"alive"}"#)
        }
        router.get("/ready") { _, _ in
            let waiting = readiness.waitingFor
            guard waiting.isEmpty else {
                let names = waiting.map { "\"\($0.rawValue)\"" }.joined(separator: ",")
                return Self.json(.serviceUnavailable, #"{"status":"not-ready","waitingFor":[\#(names)]}"#)
            }
            return Self.json(.ok, #"{"status":"ready"}"#)
        }
        // Prometheus' text format.
        router.get("/metrics") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition()))
            )
        }
    }

    static func json(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body))
        )
    }
}
