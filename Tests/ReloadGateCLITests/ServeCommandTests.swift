import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateTesting
import Testing

/// The real binary: `reloadgate serve` on the embedded default (port moved to 0), its start-up line,
/// both protocols, SIGTERM and SIGINT, and configuration errors.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct ServeCommandTests {
    /// The embedded default, except the port: 0, so tests never collide with a running gateway.
    static let testEnvironment = ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"]

    @Test(arguments: [SIGTERM, SIGINT])
    func servesTheEmbeddedDefaultAndStopsGracefullyOnSignal(_ signal: Int32) async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        let process = try ReloadGateProcess(["serve"], in: directory.url, environment: Self.testEnvironment)
        let line = try await process.waitForOutputLine(containing: "listening on")

        // reloadgate: listening on https://127.0.0.1:PORT (...); clients trust the CA /path/certs/ca.pem
        let portMatch = try #require(line.firstMatch(of: /127\.0\.0\.1:(\d+)/))
        let port = try #require(Int(portMatch.1))
        let caPath = try #require(line.firstMatch(of: /clients trust the CA (\S+)$/)).1
        #expect(caPath == directory.url.appendingPathComponent("certs/ca.pem").standardizedFileURL.path)
        #expect(FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite")))

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(String(caPath)))
        for (version, negotiated) in [(HTTPClient.Configuration.HTTPVersion.automatic, HTTPVersion.http2), (.http1Only, .http1_1)] {
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
            configuration.httpVersion = version
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            do {
                for path in ["/health", "/ready"] {
                    let response = try await client.execute(HTTPClientRequest(url: "https://localhost:\(port)\(path)"), timeout: .seconds(30))
                    #expect(response.status == .ok, "\(path)")
                    #expect(response.version == negotiated)
                }
            } catch {
                Issue.record("request failed: \(error)")
            }
            try await client.shutdown()
        }

        process.send(signal)
        #expect(try await process.waitForExit() == 0)
        #expect(process.standardError.contains("store closed"))
        #expect(!FileManager.default.fileExists(atPath: directory.path("data/reloadgate.sqlite-wal")))
    }

    @Test func aSecondRunReusesTheDevelopmentCertificates() async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        for run in 1...2 {
            let process = try ReloadGateProcess(["serve"], in: directory.url, environment: Self.testEnvironment)
            _ = try await process.waitForOutputLine(containing: "listening on")
            let created = process.standardError.contains("created a development CA")
            #expect(created == (run == 1), "run \(run)")
            process.send(SIGTERM)
            #expect(try await process.waitForExit() == 0)
        }
    }

    /// Another `secrets.key` than the one the store's secrets were sealed with (a key made anew, another
    /// gateway's data directory) would fail every webhook call: the start stops with one line naming
    /// `secrets.key` and what to do, status 1.
    @Test func anotherSecretsKeyStopsTheStart() async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", "com.example.scores"], in: directory.url, environment: Self.testEnvironment)
        #expect(added.status == 0, "\(added.stderr)")
        let key = directory.url.appendingPathComponent("data/secrets.key")
        try FileManager.default.removeItem(at: key)
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: key)
        let serve = try await ReloadGateProcess.run(["serve"], in: directory.url, environment: Self.testEnvironment)
        #expect(serve.status == 1)
        let errors = serve.stderr.split(separator: "\n").filter { $0.hasPrefix("reloadgate: error:") }
        #expect(errors.count == 1, "\(serve.stderr)")
        #expect(errors.first?.contains("secrets.key is not the key this store's secrets were sealed with") == true, "\(serve.stderr)")
    }

    /// The store opens when the gateway runs (not when it is built): a data directory of the other
    /// environment is still one error line and status 1, with nothing on standard output.
    @Test func aDataDirectoryOfTheOtherEnvironmentIsAClearErrorWithStatus1() async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", "com.example.scores"], in: directory.url, environment: Self.testEnvironment)
        #expect(added.status == 0, "\(added.stderr)")
        var production = Self.testEnvironment
        production["RELOADGATE_ENVIRONMENT"] = "production"
        let serve = try await ReloadGateProcess.run(["serve"], in: directory.url, environment: production)
        #expect(serve.status == 1)
        #expect(serve.stdout.isEmpty, "\(serve.stdout)")
        let errors = serve.stderr.split(separator: "\n").filter { $0.hasPrefix("reloadgate: error:") }
        #expect(errors.count == 1, "\(serve.stderr)")
        #expect(errors.first?.hasPrefix("reloadgate: error: the store ") == true, "\(serve.stderr)")
        #expect(errors.first?.contains("holds sandbox devices but this gateway runs in production") == true, "\(serve.stderr)")
    }

    @Test func aTakenPortIsAClearErrorWithStatus1() async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        let first = try ReloadGateProcess(["serve"], in: directory.url, environment: Self.testEnvironment)
        let line = try await first.waitForOutputLine(containing: "listening on")
        let portMatch = try #require(line.firstMatch(of: /127\.0\.0\.1:(\d+)/))
        let second = try await ReloadGateProcess.run(
            ["serve"],
            in: directory.url,
            environment: [
                "RELOADGATE_LISTEN_PORT": String(portMatch.1), "RELOADGATE_INGRESS_PORT": "0",
                "RELOADGATE_ADMIN_SOCKET": directory.path("second.sock"),
            ]
        )
        #expect(second.status == 1)
        #expect(second.stderr.contains("reloadgate: error: cannot listen on 127.0.0.1:\(portMatch.1): the address is in use"))
        #expect(second.stdout.isEmpty, "no listener line before a bind failure: \(second.stdout)")
        // The APNs listener's port taken (the second listener to bind): still no line on standard output
        // and the error as the only line of standard error.
        let apnsLine = try await first.waitForOutputLine(containing: "APNs pushes to")
        let apnsPort = try #require(apnsLine.firstMatch(of: /127\.0\.0\.1:(\d+)/)).1
        let fourth = try await ReloadGateProcess.run(
            ["serve"],
            in: directory.url,
            environment: [
                "RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": String(apnsPort),
                "RELOADGATE_ADMIN_SOCKET": directory.path("fourth.sock"),
            ]
        )
        #expect(fourth.status == 1)
        #expect(fourth.stdout.isEmpty, "\(fourth.stdout)")
        #expect(
            fourth.stderr == "reloadgate: error: cannot listen on 127.0.0.1:\(apnsPort): the address is in use (another gateway?); "
                + "set ingress.port or RELOADGATE_INGRESS_PORT\n",
            "\(fourth.stderr)"
        )
        // The admin socket of a running gateway is not taken over either.
        let third = try await ReloadGateProcess.run(
            ["serve"], in: directory.url, environment: ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"]
        )
        #expect(third.status == 1)
        #expect(third.stderr.contains("reloadgate: error: another gateway answers on the admin socket data/admin.sock"))
        first.send(SIGTERM)
        #expect(try await first.waitForExit() == 0)
    }

    /// Every error of the command line, an unknown subcommand included, in one style: `reloadgate: error:
    /// <what>`, the help to read, status 2.
    @Test(arguments: [["bogus"], ["keys", "bogus"], ["serve", "--port"], ["apps", "add"]])
    func usageErrorsShareOneStyle(_ arguments: [String]) async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        let result = try await ReloadGateProcess.run(arguments, in: directory.url)
        #expect(result.status == 2)
        let first = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(first.hasPrefix("reloadgate: error: ") && first.contains("--help"), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    /// `serve --help` names every listener it opens.
    @Test func serveHelpNamesEveryListener() async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        let help = try await ReloadGateProcess.run(["serve", "--help"], in: directory.url)
        #expect(help.status == 0)
        for text in ["listen.port", "ingress.port", "admin.socket", "admin.port"] {
            #expect(help.stdout.contains(text), "\(text) in \(help.stdout)")
        }
    }

    struct Failure: Sendable, CustomTestStringConvertible {
        let name: String
        let arguments: [String]
        let environment: [String: String]
        let file: String?
        let message: String
        var testDescription: String { name }
    }

    static let longSocketPath = "/tmp/" + String(repeating: "a", count: 120) + ".sock"

    static let failures: [Failure] = [
        Failure(
            name: "unknown key",
            arguments: ["serve", "--config", "reloadgate.yaml"],
            environment: [:],
            file: "listen:\n  prot: 8443\n",
            message: "reloadgate: error: reloadgate.yaml:2: unknown key 'listen.prot'; did you mean 'listen.port'?"
        ),
        Failure(
            name: "wrong type",
            arguments: ["serve", "--config", "reloadgate.yaml"],
            environment: [:],
            file: "listen:\n  idleTimeout: soon\n",
            message: "reloadgate: error: reloadgate.yaml:2: listen.idleTimeout must be an integer from 1 to 86400, not 'soon'"
        ),
        Failure(
            name: "missing certificate file",
            arguments: ["serve"],
            // Any free port: the certificate is read after the listeners' addresses are checked, and a gateway
            // running on the default ports beside the tests must not change the answer.
            environment: [
                "RELOADGATE_TLS_CERTIFICATE": "/missing/server.pem", "RELOADGATE_TLS_KEY": "/missing/key.pem",
                "RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0",
            ],
            file: nil,
            message: "reloadgate: error: tls.certificate: cannot use /missing/server.pem: no such file"
        ),
        Failure(
            name: "missing configuration file",
            arguments: ["serve", "--config", "absent.yaml"],
            environment: [:],
            file: nil,
            message: "reloadgate: error: cannot read the configuration file absent.yaml: No such file or directory"
        ),
        Failure(
            name: "an admin socket path longer than Unix sockets allow",
            arguments: ["serve"],
            environment: ["RELOADGATE_ADMIN_SOCKET": longSocketPath],
            file: nil,
            message: "reloadgate: error: admin.socket: the admin socket path \(longSocketPath) is 130 bytes long; a Unix "
                + "socket path holds at most 107: set admin.socket (RELOADGATE_ADMIN_SOCKET) to a shorter path"
        ),
        Failure(
            name: "unknown option",
            arguments: ["serve", "--colour", "blue"],
            environment: [:],
            file: nil,
            message: "reloadgate: error: unknown option '--colour' (see 'reloadgate serve --help')"
        ),
    ]

    @Test(arguments: failures)
    func badConfigurationExitsWithStatus2AndStartsNothing(_ failure: Failure) async throws {
        let directory = try TemporaryDirectory("serve")
        defer { directory.remove() }
        if let file = failure.file {
            try file.write(toFile: directory.path("reloadgate.yaml"), atomically: true, encoding: .utf8)
        }
        let result = try await ReloadGateProcess.run(failure.arguments, in: directory.url, environment: failure.environment)
        #expect(result.status == 2)
        #expect(result.stderr.split(separator: "\n").first.map(String.init) == failure.message)
        #expect(result.stdout.isEmpty)
        // Nothing started: no store, no certificates.
        #expect(!FileManager.default.fileExists(atPath: directory.path("data")))
        #expect(!FileManager.default.fileExists(atPath: directory.path("certs")))
    }
}
