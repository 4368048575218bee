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
    /// Opens the store, loads the scheduler and builds the services (when the gateway runs).
    private let assemble: @Sendable () async throws -> [any Service]
    private let logger: Logger

    init(
        configuration: GatewayConfiguration,
        readiness: Readiness,
        logger: Logger,
        assemble: @escaping @Sendable () async throws -> [any Service]
    ) {
        self.configuration = configuration
        self.readiness = readiness
        self.assemble = assemble
        self.logger = logger
    }

    /// Opens the store and loads the scheduler, then runs until graceful shutdown of the enclosing service
    /// group and stops in order.
    public func run() async throws {
        try await ServiceGroup(configuration: groupConfiguration(services: try await assemble(), signals: [])).run()
    }

    /// Opens the store and loads the scheduler, then runs until one of `gracefulShutdownSignals` arrives and
    /// stops gracefully.
    public func runService(gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint]) async throws {
        let services = try await assemble()
        try await ServiceGroup(configuration: groupConfiguration(services: services, signals: gracefulShutdownSignals)).run()
    }

    private func groupConfiguration(services: [any Service], signals: [UnixSignal]) -> ServiceGroupConfiguration {
        var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: signals, logger: logger)
        // The drain and the HTTP/2 close may each take the grace period; past both (and a margin), a request
        // handler that still has not finished is cancelled so that shutdown always ends.
        group.maximumGracefulShutdownDuration = .seconds(2 * configuration.listen.shutdownGracePeriod + 5)
        return group
    }
}
