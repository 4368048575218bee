import Foundation
import ReloadGateTesting
import Testing

/// `reloadgate health [--ready]`, the container image's health check: 0 and the answer's body while a
/// gateway answers, 1 without one (within --timeout), 2 for bad options.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct HealthCommandTests {
    @Test func asksTheConfigurationsListenerOrAURLAndFailsWithoutAGateway() async throws {
        let directory = try TemporaryDirectory("health")
        defer { directory.remove() }
        let process = try ReloadGateProcess(["serve"], in: directory.url, environment: ServeCommandTests.testEnvironment)
        defer { process.send(SIGKILL) }
        let line = try await process.waitForOutputLine(containing: "listening on")
        let port = try #require(line.firstMatch(of: /127\.0\.0\.1:(\d+)/).map { String($0.1) })

        // The configuration's listener (here its port from the environment, as the image's health check
        // reads it from the image's file), certificate unchecked.
        let alive = try await ReloadGateProcess.run(["health"], in: directory.url, environment: ["RELOADGATE_LISTEN_PORT": port])
        #expect(alive.status == 0, "\(alive.stderr)")
        #expect(alive.stdout == "{\"status\":\"alive\"}\n")
        let ready = try await ReloadGateProcess.run(["health", "--ready"], in: directory.url, environment: ["RELOADGATE_LISTEN_PORT": port])
        #expect(ready.status == 0, "\(ready.stderr)")
        #expect(ready.stdout == "{\"status\":\"ready\"}\n")

        // --url checks the certificate: with the development CA it passes, with the system's trust it fails.
        let url = "https://localhost:\(port)"
        let trusted = try await ReloadGateProcess.run(["health", "--ready", "--url", url, "--cacert", "certs/ca.pem"], in: directory.url)
        #expect(trusted.status == 0, "\(trusted.stderr)")
        let untrusted = try await ReloadGateProcess.run(["health", "--url", url, "--timeout", "2"], in: directory.url)
        #expect(untrusted.status == 1)
        #expect(untrusted.stderr.hasPrefix("reloadgate: error: no answer from \(url)/health within 2 s"), "\(untrusted.stderr)")

        process.send(SIGTERM)
        #expect(try await process.waitForExit() == 0)

        // No gateway: exit 1 within the timeout.
        let started = ContinuousClock.now
        let none = try await ReloadGateProcess.run(["health", "--ready", "--timeout", "1"], in: directory.url, environment: ["RELOADGATE_LISTEN_PORT": port])
        #expect(none.status == 1)
        #expect(none.stderr.hasPrefix("reloadgate: error: no answer from https://127.0.0.1:\(port)/ready within 1 s"), "\(none.stderr)")
        #expect(started.duration(to: .now) < .seconds(20))

        for (arguments, message) in [
            (["health", "--timeout", "0"], "--timeout must be from 1 to 300 seconds"),
            (["health", "--timeout", "99999999999999999999"], "--timeout"),
            (["health", "--cacert", "certs/ca.pem"], "--cacert needs --url"),
            (["health", "--url", "http://localhost:8443"], "--url must be https://host:port"),
        ] {
            let refused = try await ReloadGateProcess.run(arguments, in: directory.url)
            #expect(refused.status == 2, "\(arguments): \(refused.stderr)")
            #expect(refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }
    }
}
