import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateServer

/// `reloadgate health [--ready]`: asks a running gateway's API listener `GET /health` (or `/ready`) and
/// exits 0 on a 200. The container image's health check; also for scripts and systemd.
struct Health: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask a running gateway whether it is alive (GET /health) or ready to commit (GET /ready).",
        discussion: """
            Asks the API listener of the configuration (listen.host and listen.port; a wildcard address is \
            asked on loopback) and prints the answer's body. Exit status 0 when it answers 200; 1 when it \
            answers anything else (/ready: 503 while the gateway cannot commit) or not within --timeout \
            seconds; 2 for a bad configuration. The configuration's own listener on this machine is asked \
            without checking its certificate, as a Kubernetes HTTPS probe does (the question is whether the \
            process answers, not who it is); with --url the certificate is checked (--cacert, or the system's \
            trust).
            """
    )

    @Flag(name: .long, help: "Ask GET /ready (the gateway can commit) instead of GET /health (the process answers).")
    var ready = false

    @Option(name: .long, help: ArgumentHelp("YAML configuration file (for listen.host and listen.port).", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Ask this API listener instead, e.g. https://gateway.internal:8443.", valueName: "url"))
    var url: String?

    @Option(name: .long, help: ArgumentHelp("With --url: CA certificates (PEM) to trust instead of the system's.", valueName: "file"))
    var cacert: String?

    @Option(name: .long, help: "Seconds to wait for the answer, 1 to 300.")
    var timeout = 5

    func validate() throws {
        guard (1...300).contains(timeout) else { throw ValidationError("--timeout must be from 1 to 300 seconds") }
        if cacert != nil, url == nil { throw ValidationError("--cacert needs --url") }
    }

    func run() async throws {
        var tls: TLSConfiguration
        let base: String
        if let url {
            guard let parsed = URL(string: url), parsed.scheme == "https", parsed.host != nil else {
                throw CommandFailure.exit("--url must be https://host:port, not \(url)", status: 2)
            }
            base = url.hasSuffix("/") ? String(url.dropLast()) : url
            tls = try CommandHTTPClient.tls(trusting: cacert)
        } else {
            let configuration: GatewayConfiguration
            do {
                configuration = try GatewayConfiguration.load(file: config, environment: ProcessInfo.processInfo.environment)
            } catch {
                throw CommandFailure.exit(error.description, status: 2)
            }
            guard configuration.listen.port != 0 else {
                throw CommandFailure.exit("listen.port is 0 (any free port): give --url with the port the gateway printed", status: 2)
            }
            base = "https://\(Self.loopbackHost(configuration.listen.host)):\(configuration.listen.port)"
            tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .none
        }
        let path = ready ? "/ready" : "/health"
        let status: HTTPResponseStatus
        let body: String
        do {
            (status, body) = try await CommandHTTPClient.with(tls: tls) { client in
                let response = try await client.execute(HTTPClientRequest(url: base + path), timeout: .seconds(Int64(timeout)))
                let body = try await response.body.collect(upTo: 1 << 16)
                return (response.status, String(decoding: body.readableBytesView, as: UTF8.self))
            }
        } catch {
            throw CommandFailure.exit("no answer from \(base)\(path) within \(timeout) s: \(error)", status: 1)
        }
        guard status == .ok else { throw CommandFailure.exit("\(base)\(path) answered \(status.code): \(body)", status: 1) }
        printLine(body)
    }

    /// The address to ask a listener bound to `host` on: loopback for a wildcard, IPv6 in brackets.
    static func loopbackHost(_ host: String) -> String {
        switch host {
        case "0.0.0.0", "": "127.0.0.1"
        case "::", "[::]": "[::1]"
        default: host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        }
    }
}
