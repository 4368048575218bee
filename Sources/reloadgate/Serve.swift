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
            With no options it runs the embedded default: a TLS listener on 127.0.0.1:8443 (HTTP/2 and \
            HTTP/1.1) with a development certificate created under certs/ on first run, and the SQLite store \
            under data/. A YAML file (--config) and RELOADGATE_* environment variables override the defaults \
            key by key; see README.md, "Configuration". SIGTERM or SIGINT stops it gracefully.
            """
    )

    @Option(name: .long, help: ArgumentHelp("YAML configuration file.", valueName: "file"))
    var config: String?

    func run() async throws {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(file: config, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw CommandFailure.exit(error.description, status: 2)
        }
        LoggingSystem.bootstrap { label in configuration.log.makeHandler(label: label) }
        let logger = Logger(label: "reloadgate")

        let gateway: Gateway
        do {
            gateway = try await buildGateway(
                configuration: configuration,
                logger: logger,
                onListening: { listener in printLine(listener.startupLine) }
            )
        } catch let error as ConfigurationError {
            throw CommandFailure.exit(error.description, status: 2)
        } catch {
            throw CommandFailure.exit(String(describing: error), status: 1)
        }
        do {
            try await gateway.runService()
        } catch let error as ListenerAddressInUse {
            throw CommandFailure.exit(error.description, status: 1)
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            let listen = configuration.listen
            throw CommandFailure.exit(
                "cannot listen on \(listen.host):\(listen.port): the address is in use (another gateway?); "
                    + "set listen.port or RELOADGATE_LISTEN_PORT",
                status: 1
            )
        } catch {
            throw CommandFailure.exit("the gateway stopped: \(error)", status: 1)
        }
        logger.info("stopped")
    }
}
