import ArgumentParser
import Foundation
import Logging
import ReloadGateServer

/// `reloadgate dashboard`: the dashboard on a loopback port, behind a random token.
struct Dashboard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the dashboard (and the admin API) on a loopback port behind a random token.",
        discussion: """
            Like `kubectl proxy`: listens on 127.0.0.1 only and forwards to the gateway's admin socket. It prints \
            one address with a random token in its fragment: open it in a browser on this machine (the page keeps \
            the token in its tab and sends it with each call; never as a cookie, which every other page on \
            127.0.0.1 would carry too). Scripts send `authorization: bearer <token>`. Requests without the token, \
            changes from another origin, or requests naming another host, are refused. Ctrl-C (SIGINT) or SIGTERM \
            stops it.
            """
    )

    @Option(name: .long, help: ArgumentHelp("The loopback port (default: a free one).", valueName: "port"))
    var port: Int = 0

    @Option(name: .long, help: ArgumentHelp("The admin socket (default: admin.socket of the configuration, or data/admin.sock).", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("YAML configuration file (for admin.socket and data.directory).", valueName: "file"))
    var config: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") }
    }

    func run() async throws {
        let admin = try AdminOptions.parse(socket.map { ["--socket", $0] } ?? config.map { ["--config", $0] } ?? [])
        let socketPath = try admin.socketPath()
        guard FileManager.default.fileExists(atPath: socketPath) else {
            throw CommandFailure.exit("no gateway is running here: \(socketPath) does not exist (start one with `reloadgate serve`, or give --socket)", status: 1)
        }
        var logger = Logger(label: "reloadgate-dashboard")
        logger.logLevel = .warning
        let proxy = DashboardProxy(socketPath: socketPath, logger: logger)
        do {
            try await proxy.run(port: port) { bound in
                printLine("reloadgate: dashboard on http://127.0.0.1:\(bound)/dashboard#token=\(proxy.token) (the admin API of \(socketPath); Ctrl-C stops it)")
            }
        } catch {
            throw CommandFailure.exit("cannot serve the dashboard on 127.0.0.1:\(port): \(error)", status: 1)
        }
    }
}

/// `reloadgate openapi`: prints the OpenAPI document of the HTTP APIs.
struct OpenAPI: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "openapi",
        abstract: "Print the OpenAPI 3.1 document of the registry API, the reload webhook and the admin API (JSON).",
        discussion: "The same document a gateway serves at GET /openapi.json. Generate a client from it, or check a gateway against it."
    )

    func run() throws {
        FileHandle.standardOutput.write(OpenAPIDocument.json)
        FileHandle.standardOutput.write(Data("\n".utf8))
    }
}
