public import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import ReloadGateCore
public import NIOCore
public import NIOSSL
public import ReloadGateServer
import ServiceLifecycle

/// A gateway running in the test process: real TLS and HTTP/2 on 127.0.0.1 with a port the system
/// picks, certificates generated for the test, and a SQLite store in a temporary directory.
public struct TestGateway: Sendable {
    /// The test's own directory (certificates, data).
    public let directory: TemporaryDirectory
    /// The test's certificates.
    public let pki: TestPKI
    /// The configuration the gateway runs with.
    public let configuration: GatewayConfiguration
    /// The port the API listener is bound to.
    public let port: Int
    /// The port the APNs listener is bound to.
    public let ingressPort: Int
    private let serviceGroup: ServiceGroup

    /// `https://localhost:<port>` (the test server certificate is valid for localhost).
    public var baseURL: String { "https://localhost:\(port)" }
    /// `https://localhost:<ingressPort>`: the APNs listener.
    public var ingressURL: String { "https://localhost:\(ingressPort)" }

    /// Starts the graceful shutdown that SIGTERM starts in `reloadgate serve`.
    public func shutDown() async {
        await serviceGroup.triggerGracefulShutdown()
    }

    /// Runs a gateway for the duration of `body`, then shuts it down gracefully and waits for it to stop.
    ///
    /// Errors of the gateway itself (it failed to start, or did not stop cleanly) are rethrown, so a test
    /// fails when the shutdown does.
    /// - Parameters:
    ///   - directory: the directory for certificates and data; by default a temporary one, removed afterwards.
    ///     A directory passed in is left for the caller to inspect (and remove).
    ///   - given: the certificates to use; by default new ones in the directory.
    ///   - configure: changes to the test configuration (port 0, test PKI, temporary data directory).
    ///   - customizeRouter: extra routes for the test.
    ///   - logLevel: the gateway's log level; by default warnings and worse (or less when the configuration asks).
    ///   - body: the test, given the running gateway.
    public static func withRunning<Result: Sendable>(
        in directory: TemporaryDirectory? = nil,
        pki given: TestPKI? = nil,
        configure: (inout GatewayConfiguration) -> Void = { _ in },
        customizeRouter: @escaping @Sendable (PathRouter<GatewayRequestContext>) -> Void = { _ in },
        logLevel: Logger.Level? = nil,
        _ body: @Sendable (TestGateway) async throws -> Result
    ) async throws -> Result {
        HeavyTest.expectTurn("a gateway (TestGateway.withRunning)")
        let owned = directory == nil
        let directory = try directory ?? TemporaryDirectory("gateway")
        defer { if owned { directory.remove() } }
        let pki = try given ?? TestPKI(in: directory)
        var configuration = GatewayConfiguration()
        configuration.listen.port = 0
        configuration.ingress.port = 0
        configuration.tls.certificate = pki.serverCertificatePath
        configuration.tls.key = pki.serverKeyPath
        configuration.tls.clientCA = pki.caCertificatePath
        configuration.dataDirectory = directory.path("data")
        // The store deadline of a gateway beside the whole suite on two cores and a database server shared
        // by every test: a statement slowed past 5 s there is the machine's load, not what the test asks
        // about (tests of the deadline set their own).
        configuration.store.deadline = Int(TestPostgres.storeDeadline.milliseconds)
        configure(&configuration)

        var logger = Logger(label: "reloadgate-test")
        // Warnings and worse, or less when the test's configuration asks for less.
        logger.logLevel = logLevel ?? max(.warning, configuration.log.level)
        let (ports, portContinuation) = AsyncStream<ListenerInfo>.makeStream()
        let gateway = try await buildGateway(
            configuration: configuration,
            logger: logger,
            onListening: { listener in portContinuation.yield(listener) },
            customizeRouter: customizeRouter
        )
        let serviceGroup = ServiceGroup(
            configuration: .init(services: [gateway], gracefulShutdownSignals: [], logger: logger)
        )
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { portContinuation.finish() }
                try await serviceGroup.run()
            }
            var iterator = ports.makeAsyncIterator()
            var port: Int?
            var ingressPort: Int?
            while port == nil || ingressPort == nil {
                guard let listener = await iterator.next() else {
                    try await group.waitForAll()
                    throw TestGatewayError.didNotStart
                }
                switch listener.kind {
                case .api: port = listener.port
                case .apns: ingressPort = listener.port
                case .admin, .adminTLS: break
                }
            }
            guard let port, let ingressPort else { throw TestGatewayError.didNotStart }
            let running = TestGateway(
                directory: directory,
                pki: pki,
                configuration: configuration,
                port: port,
                ingressPort: ingressPort,
                serviceGroup: serviceGroup
            )
            let result: Result
            do {
                result = try await body(running)
            } catch {
                await serviceGroup.triggerGracefulShutdown()
                try? await group.waitForAll()
                throw error
            }
            await serviceGroup.triggerGracefulShutdown()
            try await group.waitForAll()
            return result
        }
    }

    /// Runs `body` with an HTTP client that trusts the test CA, shut down afterwards.
    /// - Parameters:
    ///   - version: `.automatic` negotiates HTTP/2 over ALPN; `.http1Only` offers only HTTP/1.1.
    ///   - tls: client TLS settings; by default the test CA and no client certificate.
    ///   - connectTimeout: how long a connection (and its TLS handshake) may take, and how long a request
    ///     may wait for a connection or stream of the pool (async-http-client's
    ///     `getConnectionFromPoolTimeout`). Generous by default: a loaded 2-core machine running the whole
    ///     suite kept 200 queued requests waiting past 10 s. Tests that expect a refused handshake
    ///     shorten it, since the client retries until then.
    public func withHTTPClient<Result: Sendable>(
        _ version: HTTPClient.Configuration.HTTPVersion = .automatic,
        tls: TLSConfiguration? = nil,
        connectTimeout: TimeAmount = .seconds(60),
        _ body: (HTTPClient) async throws -> Result
    ) async throws -> Result {
        var configuration = HTTPClient.Configuration(tlsConfiguration: try tls ?? pki.clientTLSConfiguration())
        configuration.httpVersion = version
        configuration.timeout = .init(connect: connectTimeout, read: .seconds(30))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            let result = try await body(client)
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }
}

/// Failures of the test harness itself.
public enum TestGatewayError: Error {
    /// The gateway stopped before its listener was bound.
    case didNotStart
    /// A request got no answer within this many seconds.
    case unanswered(seconds: Int)
    /// Two gateways on one database did not share the partitions (each gateway's count).
    case partitionsNotShared([Int])
}
