import ArgumentParser
import Crypto
import Foundation
import NIOSSL
import ReloadGateMockAPNs

/// `reloadgate mock-apns`: the mock APNs server the tests use, on its own, for demos and benchmarks.
struct MockAPNs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-apns",
        abstract: "Run a mock of Apple's push service (HTTP/2, TLS) that checks provider tokens and answers as told.",
        discussion: """
            Point a gateway at it with upstream.kind apns, upstream.url https://localhost:PORT and \
            upstream.caFile certs/ca.pem. It checks each request's provider token against --public-key \
            (the public half of the gateway's .p8), the widgets topic and push type and the body, then \
            answers 200, or fails --fail-percent of the requests with 500, 503, 429 or a reset stream. \
            Runs until interrupted; prints a line per 1,000 requests.
            """
    )

    @Option(name: .long, help: "TCP port on 127.0.0.1.")
    var port: Int = 2443

    @Option(name: .long, help: ArgumentHelp("Server certificate (PEM).", valueName: "file"))
    var certificate: String = "certs/server.pem"

    @Option(name: .long, help: ArgumentHelp("Server key (PEM).", valueName: "file"))
    var key: String = "certs/server-key.pem"

    @Option(name: .customLong("public-key"), help: ArgumentHelp("The gateway's provider key, public half (PEM).", valueName: "file"))
    var publicKey: String

    @Option(name: .long, help: "The key id the gateway's tokens carry.")
    var kid: String

    @Option(name: .long, help: "The team id the gateway's tokens carry.")
    var team: String

    @Option(name: .customLong("fail-percent"), help: "Percentage of requests answered with a failure.")
    var failPercent: Int = 0

    func run() async throws {
        guard (0...100).contains(failPercent) else { throw CommandFailure.exit("--fail-percent must be 0 to 100", status: 2) }
        let tls: TLSConfiguration
        let verifying: P256.Signing.PublicKey
        do {
            tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            )
            verifying = try P256.Signing.PublicKey(pemRepresentation: try String(contentsOfFile: publicKey, encoding: .utf8))
        } catch {
            throw CommandFailure.exit("cannot read the certificate, key or public key: \(error)", status: 2)
        }
        let server = try await MockAPNsServer.start(port: port, tls: tls, key: .init(publicKey: verifying, keyID: kid, teamID: team))
        let failPercent = UInt64(failPercent)
        server.answer { request in
            var generator = SystemRandomNumberGenerator()
            let roll = generator.next() % 100
            guard roll < failPercent else { return .status(200) }
            switch roll % 4 {
            case 0: return .status(500, reason: "InternalServerError")
            case 1: return .status(503, reason: "ServiceUnavailable")
            case 2: return .status(429, reason: "TooManyRequests", retryAfter: 1)
            default: return .reset
            }
        }
        printLine("reloadgate: mock APNs on https://localhost:\(server.port) (token key \(kid), team \(team), failing \(failPercent)%)")
        var reported = 0
        while !Task.isCancelled {
            try await Task.sleep(for: .seconds(1))
            let count = server.received.count
            if count / 1000 > reported / 1000 {
                printLine("reloadgate: mock APNs received \(count) requests")
                reported = count
            }
        }
        await server.stop()
    }
}
