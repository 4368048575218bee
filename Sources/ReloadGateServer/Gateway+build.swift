public import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
public import Logging
import NIOCore
import NIOSSL
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import ServiceLifecycle

/// Where a listener ended up, reported once it accepts connections.
public struct ListenerInfo: Sendable {
    /// Which listener.
    public enum Kind: Sendable {
        /// The registry API, the webhook, health and readiness.
        case api
        /// The APNs provider API (`POST /3/device/<token>`).
        case apns
        /// The admin API on its Unix socket (`host` is the socket's path).
        case admin
        /// The admin API on its TLS listener (`trustedCAPath` here is the token file).
        case adminTLS
    }

    public let kind: Kind
    /// The configured host.
    public let host: String
    /// The bound port (the real one when the configuration said 0).
    public let port: Int
    /// The CA certificate clients must trust, when the gateway knows it (development certificate).
    public let trustedCAPath: String?

    /// `https://host:port`, with brackets around an IPv6 host.
    public var url: String {
        host.contains(":") ? "https://[\(host)]:\(port)" : "https://\(host):\(port)"
    }

    /// The listeners a gateway of `configuration` opens, in the order `reloadgate serve` reports them.
    public static func kinds(of configuration: GatewayConfiguration) -> [Kind] {
        [.api, .apns, .admin] + (configuration.admin.tls ? [.adminTLS] : [])
    }

    /// The one start-up line `reloadgate serve` prints per listener.
    public var startupLine: String {
        if kind == .admin {
            return "reloadgate: admin API on \(host) (reloadgate pending, explain, budget, cancel, flush, stats)"
        }
        if kind == .adminTLS {
            return "reloadgate: admin API on \(url) (TLS; authorization: bearer <the token in \(trustedCAPath ?? "admin.token")>)"
        }
        if kind == .apns {
            return "reloadgate: APNs pushes to \(url)/3/device/<token> (TLS, ALPN h2 and http/1.1)"
        }
        var line = "reloadgate: listening on \(url) (TLS, ALPN h2 and http/1.1)"
        if let trustedCAPath {
            line += "; clients trust the CA \(trustedCAPath)"
        }
        return line
    }
}

/// Builds the gateway: checks the listeners' addresses and the TLS material (creating the development
/// certificate on first run) and the upstream's configuration. Nothing is opened and nothing listens
/// until the gateway runs: then ``Gateway/run()`` opens the store, loads the scheduler's state from it,
/// sets up the door and the routes, and starts the services.
///
/// `reloadgate serve` calls this and then ``Gateway/runService(gracefulShutdownSignals:)``; tests call
/// it too (through `TestGateway`) and run the gateway in their own service group on port 0.
/// - Parameters:
///   - configuration: the loaded configuration.
///   - logger: the gateway's logger.
///   - now: the wall clock (certificate validity, store creation time).
///   - onListening: called once the listener is bound.
///   - customizeRouter: adds routes, for embedding and tests. They are drained on shutdown like the
///     gateway's own routes.
/// - Throws: ``ListenerAddressUnavailable`` when a listener's address is taken or not this host's,
///   ``ConfigurationError`` for unusable TLS material or upstream settings. (``StoreError``, when the store
///   cannot open, comes from running the gateway.)
public func buildGateway(
    configuration: GatewayConfiguration,
    logger: Logger,
    now: @escaping @Sendable () -> Date = { Date() },
    onListening: @escaping @Sendable (ListenerInfo) async -> Void = { _ in },
    customizeRouter: @escaping @Sendable (PathRouter<GatewayRequestContext>) -> Void = { _ in }
) async throws -> Gateway {
    try AdminSocket.checkLength(of: configuration.adminSocketPath)
    _ = try GatewayStoreOpener.location(of: configuration)
    try await ListenerAddresses.check(configuration)
    // A stale admin socket is removed; one a running gateway answers on is an error, before anything opens.
    try AdminSocket.removeStale(at: configuration.adminSocketPath)
    let tls = try ListenerTLS.load(configuration.tls, now: now(), logger: logger)

    let timeouts = ConnectionTimeouts(configuration.listen, keepsIdle: false)
    let server: HTTPServerBuilder
    // The API listener serves HTTP/2 frame by frame in front of the router (docs/DECISIONS.md, "The API
    // listener serves HTTP/2 frame by frame"), with the idle deadline its handler keeps; the router's
    // responder is set once the routes are complete.
    let responders = RouterResponderBox()
    do {
        server = try .frameLevelHTTP2(tls: tls, listen: configuration.listen, responders: responders, logger: logger)
    } catch {
        throw ConfigurationError.inconsistent(key: "tls", reason: "the TLS configuration is not usable: \(error)")
    }

    // The APNs upstream's settings are checked now (a missing key file is a configuration error of
    // `serve`); it connects only when the first delivery goes. The outbox is a file in the data
    // directory, opened when the gateway runs (after the store has made the directory).
    let apns: APNsUpstream? =
        configuration.upstream.kind == .apns
        ? try APNsUpstream(configuration: configuration.upstream, environment: configuration.environment, now: now, logger: logger)
        : nil
    let readiness = Readiness()
    return Gateway(configuration: configuration, readiness: readiness, logger: logger) {
        do {
            return try await assembleServices(
                configuration: configuration, logger: logger, now: now, readiness: readiness, apns: apns, tls: tls,
                timeouts: timeouts, server: server, responders: responders, onListening: onListening,
                customizeRouter: customizeRouter
            )
        } catch {
            await apns?.close()
            throw error
        }
    }
}

/// One step of the start that reads or writes the store (the scheduler's load, the first heartbeat), tried
/// again when the store could not answer within its deadline (`unavailable`, or an unknown outcome: both
/// steps may be repeated, a load rebuilds the scheduler and a heartbeat renews what it took). A database
/// slow for a moment (a cold cluster, a loaded machine) does not end the start; one that stays away does,
/// after ``startAttempts`` tries, with its error.
private func startStep(_ name: String, logger: Logger, _ step: () async throws -> Void) async throws {
    for attempt in 1... {
        do {
            return try await step()
        } catch let error as StoreError {
            switch error {
            case .unavailable, .outcomeUnknown:
                guard attempt < startAttempts else { throw error }
                logger.warning("the store did not answer at the start; trying again", metadata: [
                    "step": "\(name)", "attempt": "\(attempt)", "error": "\(error)",
                ])
                try await Task.sleep(for: .seconds(1))
            default:
                throw error
            }
        }
    }
}

/// How often a start step is tried (``startStep(_:logger:_:)``).
private let startAttempts = 3

/// What ``Gateway/run()`` does first: opens the store, loads the scheduler's state (before anything
/// listens: no request is decided on a partial state), and builds the door, the routes and the
/// listeners' services.
private func assembleServices(
    configuration: GatewayConfiguration,
    logger: Logger,
    now: @escaping @Sendable () -> Date,
    readiness: Readiness,
    apns: APNsUpstream?,
    tls: ListenerTLS,
    timeouts: ConnectionTimeouts,
    server: HTTPServerBuilder,
    responders: RouterResponderBox,
    onListening: @escaping @Sendable (ListenerInfo) async -> Void,
    customizeRouter: @Sendable (PathRouter<GatewayRequestContext>) -> Void
) async throws -> [any Service] {
    let store = try await GatewayStoreOpener.open(configuration, now: now(), logger: logger)
    logger.info("store open", metadata: ["path": "\(store.path)", "environment": "\(store.environment)"])

    let metrics = GatewayMetrics()
    // On PostgreSQL the gateway is one of several: it schedules the partitions it holds leases on.
    let partitioning = store.cluster.map {
        GatewayCluster(gateway: ClusterMembership.newGatewayID(), store: $0)
    }
    let door = GatewayDoor(
        store: store, scheduling: configuration.scheduling.resolved, now: now, logger: logger, metrics: metrics,
        partitioning: partitioning, keptAnswerCapacity: configuration.ingress.apnsIdsInMemory,
        onDegraded: { readiness.markNotReady(.scheduler) }
    )
    let membership = partitioning.map {
        ClusterMembership(
            gateway: $0.gateway, address: "\(configuration.listen.host):\(configuration.listen.port)", store: $0.store,
            engine: door.engine, logger: logger, deliveryStatesWritten: { try await door.recordDurably([]) },
            metrics: metrics
        )
    }
    let upstream: any DeliveryUpstream
    do {
        try await startStep("loading the scheduler", logger: logger) { try await door.load() }
        if let membership {
            // The first heartbeat before anything listens: the gateway starts with its share.
            try await startStep("the first heartbeat", logger: logger) { try await membership.beat() }
            logger.info("cluster joined", metadata: ["gateway": "\(membership.gateway)", "partitions": "\(membership.leases.count)"])
        }
        upstream = try apns ?? OutboxUpstream(
            dataDirectory: configuration.dataDirectory,
            rotation: OutboxUpstream.Rotation(
                maxBytes: configuration.upstream.outboxMaxMegabytes << 20, keptFiles: configuration.upstream.outboxKeptFiles
            ),
            logger: logger
        )
    } catch {
        try? store.close()
        throw error
    }

    let drain = RequestDrain()
    let router = GatewayRouters.api(door: door, readiness: readiness, metrics: metrics, drain: drain, registration: configuration.registration)
    let verifier = ProviderTokenVerifier(
        keys: door.keys,
        environment: configuration.environment,
        clockSkew: Int64(configuration.ingress.clockSkew),
        cacheEnabled: configuration.ingress.tokenCache
    )
    let ingress = PushIngress(
        door: door,
        verifier: verifier,
        configuration: configuration.ingress,
        now: now,
        logger: logger,
        metrics: metrics
    )
    var ingressTLS = tls.configuration
    ingressTLS.applicationProtocols = ["h2", "http/1.1"]
    let ingressContext: NIOSSLContext
    do {
        ingressContext = try NIOSSLContext(configuration: ingressTLS)
    } catch {
        try? store.close()
        throw ConfigurationError.inconsistent(key: "tls", reason: "the TLS configuration is not usable: \(error)")
    }
    customizeRouter(router)
    responders.set(router.buildResponder())

    // The admin API: its own router and HTTP/1.1 server on a Unix socket (mode 0600), never on the
    // public listener.
    let adminPath = configuration.adminSocketPath
    let adminRouter = GatewayRouters.admin(door: door, logger: logger, forecast: configuration.forecast)
    let admin = Application(
        router: adminRouter,
        server: .http1(
            configuration: .init(
                additionalChannelHandlers: [RequestTimeoutHandler<HTTPTypesParts>(timeouts: timeouts, logger: logger)],
                idleTimeout: .seconds(Int64(configuration.listen.idleTimeout))
            )
        ),
        configuration: .init(address: .unixDomainSocket(path: adminPath), serverName: nil),
        onServerRunning: { _ in
            AdminSocket.restrict(adminPath)
            await onListening(ListenerInfo(kind: .admin, host: adminPath, port: 0, trustedCAPath: nil))
        },
        logger: logger
    )

    // Optionally the admin API on its own TLS listener too, behind the bearer token.
    var adminTLS: Application<PathResponder<GatewayRequestContext>>?
    if configuration.admin.tls {
        let tokenPath = configuration.adminTokenPath
        let token: String
        let adminServer: HTTPServerBuilder
        do {
            token = try AdminToken.loadOrCreate(at: tokenPath)
        } catch {
            try? store.close()
            throw ConfigurationError.inconsistent(key: "admin.tokenFile", reason: "\(error)")
        }
        // The same frame-level HTTP/2 connection as the API listener's, in front of the admin router.
        let adminResponders = RouterResponderBox()
        do {
            adminServer = try .frameLevelHTTP2(tls: tls, listen: configuration.listen, responders: adminResponders, logger: logger)
        } catch {
            try? store.close()
            throw ConfigurationError.inconsistent(key: "tls", reason: "the TLS configuration is not usable: \(error)")
        }
        let router = GatewayRouters.admin(door: door, logger: logger, token: token, forecast: configuration.forecast)
        adminResponders.set(router.buildResponder())
        let adminHost = configuration.admin.host
        adminTLS = Application(
            router: router,
            server: adminServer,
            configuration: .init(address: .hostname(adminHost, port: configuration.admin.port), serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.admin.port
                await onListening(ListenerInfo(kind: .adminTLS, host: adminHost, port: port, trustedCAPath: tokenPath))
            },
            logger: logger
        )
    }

    let host = configuration.listen.host
    let application = Application(
        router: router,
        server: server,
        configuration: .init(address: .hostname(host, port: configuration.listen.port)),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.listen.port
            await onListening(ListenerInfo(kind: .api, host: host, port: port, trustedCAPath: tls.trustedCAPath))
        },
        logger: logger
    )
    let adminServices: [any Service] = adminTLS.map { [$0] } ?? []
    // The cluster service starts before the door and stops after it: leases are released after the
    // door's last commit.
    var clusterServices: [any Service] = []
    if let membership, let partitioning {
        clusterServices = [ClusterService(membership: membership, listener: partitioning.store, door: door)]
    }
    var worker = DeliveryWorker(
        store: door.reader,
        upstream: upstream,
        states: door,
        now: now,
        logger: logger,
        concurrency: configuration.upstream.kind == .apns ? configuration.upstream.maxConcurrentRequests : DeliveryWorker.outboxGroup,
        maximumAttempts: configuration.upstream.maxAttempts,
        firstBackoff: .milliseconds(configuration.upstream.retryDelay),
        rateLimiter: configuration.upstream.kind == .apns && configuration.upstream.requestsPerSecond > 0
            ? RateLimiter.pacer(perSecond: configuration.upstream.requestsPerSecond) : nil,
        metrics: metrics
    )
    worker.leases = membership
    // The outbox takes a group of lines with one write and one sync: one group at a time, in release order.
    if configuration.upstream.kind != .apns { worker.groupSize = DeliveryWorker.outboxGroup }
    let heapTrims = HeapTrims(logger: logger)
    worker.burstEnded = { heapTrims.lookSoon() }
    let retention = LedgerRetentionService(
        store: store, retention: Int64(configuration.ledger.retention) * 1000, now: now, metrics: metrics, logger: logger
    )
    let herdWatch = HerdWatchService(
        watch: HerdWatch(
            forecaster: HerdForecaster(store: door.reader, thresholds: configuration.forecast, now: now), metrics: metrics, logger: logger
        ),
        logger: logger
    )
    let freshness = FreshnessService(
        watch: FreshnessWatch(monitor: door.engine.freshness, store: door.reader, metrics: metrics, logger: logger, now: now),
        logger: logger
    )
    return [StoreService(store: store, readiness: readiness, logger: logger), retention, herdWatch, freshness, MemoryUpkeep(trims: heapTrims, logger: logger)]
        + clusterServices + [
        DoorService(
            door: door,
            worker: worker,
            readiness: readiness,
            logger: logger
        ),
        application,
        admin,
    ] + adminServices + [
        IngressService(
            configuration: configuration.ingress,
            timeouts: ConnectionTimeouts(configuration.listen, keepsIdle: true),
            gracePeriod: .seconds(configuration.listen.shutdownGracePeriod),
            tls: ingressContext,
            ingress: ingress,
            keys: door.keys,
            readiness: readiness,
            logger: logger,
            onListening: { port in
                await onListening(ListenerInfo(kind: .apns, host: configuration.ingress.host, port: port, trustedCAPath: tls.trustedCAPath))
            }
        ),
        DrainService(
            drain: drain,
            readiness: readiness,
            gracePeriod: .seconds(configuration.listen.shutdownGracePeriod),
            logger: logger
        ),
    ]
}


/// The gateway's routers, built around its door and served by the listeners: the API router (registry,
/// webhook, health, readiness, metrics) on the TLS listener, the admin router on the admin socket (and,
/// behind the bearer token, on the admin TLS listener). Router-tier tests call them without a listener.
enum GatewayRouters {
    static func api(
        door: GatewayDoor, readiness: Readiness, metrics: GatewayMetrics, drain: RequestDrain,
        registration: GatewayConfiguration.Registration = .init()
    ) -> PathRouter<GatewayRequestContext> {
        let router = PathRouter(context: GatewayRequestContext.self)
        // Every answer is counted; health and readiness answer while draining (readiness says so);
        // everything else is drained.
        router.add(middleware: HTTPMetricsMiddleware(metrics: metrics))
        OperationsRoutes(readiness: readiness, metrics: metrics).register(on: router)
        OpenAPIDocument.register(on: router)
        router.add(middleware: DrainMiddleware(drain: drain))
        router.add(middleware: APIErrorMiddleware())
        RegistryRoutes(door: door, limits: RegistryLimits(), registrationGuard: RegistrationGuard(registration)).register(on: router)
        WebhookRoutes(door: door).register(on: router)
        return router
    }

    /// The admin router; with `token`, every call must carry `authorization: bearer <token>`.
    static func admin(
        door: GatewayDoor, logger: Logger, token: String? = nil, forecast: GatewayConfiguration.Forecast = .init()
    ) -> PathRouter<GatewayRequestContext> {
        let router = PathRouter(context: GatewayRequestContext.self)
        if let token { router.add(middleware: AdminTokenMiddleware(token: token)) }
        router.add(middleware: APIErrorMiddleware(admin: true))
        OpenAPIDocument.register(on: router)
        let forecaster = HerdForecaster(store: door.reader, thresholds: forecast, now: door.now)
        AdminRoutes(door: door, logger: logger, forecaster: forecaster).register(on: router)
        DashboardRoutes(door: door).register(on: router)
        return router
    }
}
