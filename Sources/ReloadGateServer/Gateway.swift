import Logging
public import ServiceLifecycle
public import UnixSignals

/// The whole gateway as one service: the store, the Hummingbird application (listener and routes) and
/// the drain that makes shutdown graceful. Made by ``buildGateway(configuration:logger:now:onListening:customizeRouter:)``.
///
/// Its services stop in reverse order on graceful shutdown (SIGTERM or SIGINT with ``runService(gracefulShutdownSignals:)``):
/// first the drain (not ready, new requests get `503 Shutdown`, in-flight requests finish), then the
/// listener (connections close), then the store (closed, WAL checkpointed).
public struct Gateway: Service {
    /// The configuration the gateway was built from.
    public let configuration: GatewayConfiguration
    /// What `/ready` reports.
    public let readiness: Readiness
    private let services: [any Service]
    private let logger: Logger

    init(configuration: GatewayConfiguration, readiness: Readiness, logger: Logger, services: [any Service]) {
        self.configuration = configuration
        self.readiness = readiness
        self.services = services
        self.logger = logger
    }

    /// Runs until graceful shutdown of the enclosing service group, then stops in order.
    public func run() async throws {
        try await ServiceGroup(configuration: groupConfiguration(signals: [])).run()
    }

    /// Runs until one of `gracefulShutdownSignals` arrives, then stops gracefully.
    public func runService(gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint]) async throws {
        try await ServiceGroup(configuration: groupConfiguration(signals: gracefulShutdownSignals)).run()
    }

    private func groupConfiguration(signals: [UnixSignal]) -> ServiceGroupConfiguration {
        var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: signals, logger: logger)
        // The drain and the HTTP/2 close may each take the grace period; past both (and a margin), a request
        // handler that still has not finished is cancelled so that shutdown always ends.
        group.maximumGracefulShutdownDuration = .seconds(2 * configuration.listen.shutdownGracePeriod + 5)
        return group
    }
}
