import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ReloadGateAPI
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import ServiceLifecycle
import Testing

@testable import ReloadGateServer

/// The router tier: the gateway's routers around a real door (a SQLite store in a temporary directory,
/// the scheduler loaded, its commit loop and delivery worker running to a local outbox), called through
/// HummingbirdTesting's `.router` framework: no TLS, no socket. The wire cases stay in the TLS tier.
struct RouterTier: Sendable {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "ab", count: 32)

    let door: GatewayDoor
    let credentials: AppCredentials
    let directory: TemporaryDirectory

    /// A door over a new store with one app (`com.example.scores`), running for the duration of `body`,
    /// scheduling by `scheduling`, its timer loop looking at the clock at least every `timerResolution`
    /// (the door's default when `nil`).
    static func with(
        scheduling: SchedulerConfiguration = SchedulerConfiguration(), timerResolution: Duration? = nil,
        _ body: @Sendable (RouterTier) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory("router-tier")
        defer { directory.remove() }
        var logger = Logger(label: "router-tier")
        logger.logLevel = .warning
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let credentials = try await OfflineDoor(store: store).execute(AddApp(bundle: try BundleID(bundle), team: "TEAM000001", allowsExemptions: false))
        let door = GatewayDoor(store: store, scheduling: scheduling, now: { Date() }, logger: logger)
        try await door.load()
        var service = DoorService(
            door: door,
            worker: DeliveryWorker(
                store: door.reader,
                upstream: try OutboxUpstream(dataDirectory: directory.path("data"), logger: logger),
                states: door,
                now: { Date() },
                logger: logger
            ),
            readiness: Readiness(),
            logger: logger
        )
        if let timerResolution { service.timerResolution = timerResolution }
        let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            do {
                try await body(RouterTier(door: door, credentials: credentials, directory: directory))
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// Runs `test` against the API router (registry, webhook, health).
    func api<Value: Sendable>(_ test: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        let router = GatewayRouters.api(door: door, readiness: Readiness(), metrics: GatewayMetrics(), drain: RequestDrain())
        return try await Application(router: router).test(.router, test)
    }

    /// Runs `test` against the admin router.
    func admin<Value: Sendable>(_ test: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        let router = GatewayRouters.admin(door: door, logger: Logger(label: "router-tier"))
        return try await Application(router: router).test(.router, test)
    }
}

/// One answer: status and the body parsed as a JSON object (empty when it is not one).
struct RouterAnswer: Sendable {
    var status: HTTPResponse.Status
    var text: String
    var headers: HTTPFields

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }
}

extension TestClientProtocol {
    /// Sends a request and returns the answer as a value.
    func call(_ uri: String, _ method: HTTPRequest.Method, headers: HTTPFields = [:], body: String? = nil) async throws -> RouterAnswer {
        try await execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { response in
            RouterAnswer(status: response.status, text: String(buffer: response.body), headers: response.headers)
        }
    }

    /// A registry call with the app's API key.
    func registry(_ uri: String, _ method: HTTPRequest.Method, apiKey: String, body: String? = nil) async throws -> RouterAnswer {
        try await call(uri, method, headers: [.authorization: "bearer \(apiKey)", .contentType: "application/json"], body: body)
    }

    /// A webhook call signed with `secret` now.
    func webhook(_ bundle: String, body: String, secret: String, idempotencyKey: String? = nil) async throws -> RouterAnswer {
        var headers: HTTPFields = [.contentType: "application/json"]
        headers[HTTPField.Name("reloadgate-signature")!] =
            WebhookSignature.header(body: Data(body.utf8), timestamp: Int64(Date().timeIntervalSince1970), secret: secret)
        if let idempotencyKey { headers[HTTPField.Name("idempotency-key")!] = idempotencyKey }
        return try await call("/v1/apps/\(bundle)/reloads", .post, headers: headers, body: body)
    }
}
