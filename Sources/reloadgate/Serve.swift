import ArgumentParser
import Foundation
import Logging
import NIOCore
import ReloadGateServer
import ReloadGateStore

/// `reloadgate serve`: runs the gateway until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the gateway.",
        discussion: """
            With no options it runs the embedded default: the API listener on 127.0.0.1:8443 (listen.host, \
            listen.port: registry API, reload webhook, /health, /ready, /metrics), the APNs listener on \
            127.0.0.1:2197 (ingress.host, ingress.port: push senders, POST /3/device/<token>), both TLS with \
            HTTP/2 and HTTP/1.1 and a development certificate created under certs/ on first run; the admin API \
            on the Unix socket data/admin.sock (admin.socket: reloadgate pending, explain, ...) and, with \
            admin.tls, on a TLS listener too (admin.host, admin.port, a bearer token); the SQLite store under \
            data/; deliveries to data/outbox.jsonl. It prints one line per listener (API, APNs, admin, admin \
            TLS, in that order) once all of them are bound. A YAML file (--config) and RELOADGATE_* \
            environment variables override the defaults key by key; see docs/CONFIGURATION.md. SIGTERM \
            or SIGINT stops it gracefully. Exit status: 0 after a graceful stop, 1 when a listener cannot bind \
            or the store cannot open, 2 for a bad configuration.
            """
    )

    @Option(name: .long, help: ArgumentHelp("YAML configuration file.", valueName: "file"))
    var config: String?

    func run() async throws {
        // Before any thread allocates (docs/OPERATIONS.md, "Memory").
        limitMallocArenas()
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(file: config, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw CommandFailure.exit(error.description, status: 2)
        }
        LoggingSystem.bootstrap { label in configuration.log.makeHandler(label: label) }
        let logger = Logger(label: "reloadgate")

        // The listeners' lines are printed together once every listener is bound: a listener that fails
        // to bind is one error line (below), never after lines saying the others listen.
        let announcer = ListenerAnnouncer(expected: ListenerInfo.kinds(of: configuration))
        let gateway: Gateway
        do {
            gateway = try await buildGateway(
                configuration: configuration,
                logger: logger,
                onListening: { listener in await announcer.bound(listener) }
            )
        } catch let error as ListenerAddressUnavailable {
            throw CommandFailure.exit(error.description, status: 1)
        } catch let error as ConfigurationError {
            throw CommandFailure.exit(error.description, status: 2)
        } catch {
            throw CommandFailure.exit(String(describing: error), status: 1)
        }
        do {
            // The store opens and the scheduler loads here, before anything listens.
            try await gateway.runService()
        } catch let error as ListenerAddressUnavailable {
            throw CommandFailure.exit(error.description, status: 1)
        } catch let error as ConfigurationError {
            throw CommandFailure.exit(error.description, status: 2)
        } catch let error as StoreError {
            throw CommandFailure.exit(String(describing: error), status: 1)
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw CommandFailure.exit(
                ListenerAddressUnavailable(key: "listen.port", host: configuration.listen.host, port: configuration.listen.port, reason: nil).description,
                status: 1
            )
        } catch {
            throw CommandFailure.exit("the gateway stopped: \(error)", status: 1)
        }
        logger.info("stopped")
    }
}

/// Prints the listeners' start-up lines once all of them are bound, in a fixed order.
actor ListenerAnnouncer {
    private let expected: [ListenerInfo.Kind]
    private var bound: [ListenerInfo] = []

    init(expected: [ListenerInfo.Kind]) {
        self.expected = expected
    }

    func bound(_ listener: ListenerInfo) {
        bound.append(listener)
        guard Set(bound.map(\.kind)) == Set(expected) else { return }
        for kind in expected {
            if let info = bound.first(where: { $0.kind == kind }) { printLine(info.startupLine) }
        }
    }
}
