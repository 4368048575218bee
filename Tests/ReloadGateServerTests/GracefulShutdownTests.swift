import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOHTTP1
import ReloadGateServer
import ReloadGateTesting
import Testing

/// SIGTERM's path in process: the service group's graceful shutdown.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct GracefulShutdownTests {
    @Test(arguments: [HTTPClient.Configuration.HTTPVersion.automatic, .http1Only])
    func aRequestInFlightWhenShutdownStartsCompletesAndNewOnesAreTurnedAway(
        _ version: HTTPClient.Configuration.HTTPVersion
    ) async throws {
        let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
        let (release, releaseContinuation) = AsyncStream<Void>.makeStream()
        let directory = try TemporaryDirectory("shutdown")
        defer { directory.remove() }
        let dataDirectory = try await TestGateway.withRunning(in: directory, customizeRouter: { router in
            // A request that stays in flight until the test releases it.
            router.get("/test/slow") { _, _ -> String in
                enteredContinuation.yield()
                for await _ in release { break }
                return "finished"
            }
            router.get("/test/quick") { _, _ in "quick" }
        }) { gateway in
            try await gateway.withHTTPClient(version) { client in
                async let response = client.execute(HTTPClientRequest(url: gateway.baseURL + "/test/slow"), timeout: .seconds(30))
                for await _ in entered { break }

                await gateway.shutDown()
                // Draining: not ready, new requests refused with 503 shutting-down, health still alive.
                try await waitUntil { try await status(client, gateway.baseURL + "/ready") == .serviceUnavailable }
                let refused = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/test/quick"), timeout: .seconds(30))
                #expect(refused.status == .serviceUnavailable)
                #expect(
                    String(buffer: try await refused.body.collect(upTo: 1024))
                        == #"{"code":"shutting-down","message":"the gateway is shutting down; retry elsewhere"}"#
                )
                #expect(try await status(client, gateway.baseURL + "/health") == .ok)

                releaseContinuation.yield()
                let finished = try await response
                #expect(finished.status == .ok)
                #expect(String(buffer: try await finished.body.collect(upTo: 1024)) == "finished")
            }
            return gateway.configuration.dataDirectory
        }
        // withRunning returned without error: the group stopped cleanly and the store was closed,
        // which checkpoints and removes the write-ahead log.
        #expect(FileManager.default.fileExists(atPath: dataDirectory + "/reloadgate.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: dataDirectory + "/reloadgate.sqlite-wal"))
    }

    @Test func theGracePeriodBoundsTheWaitForARequestThatNeverEnds() async throws {
        let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
        let started = ContinuousClock.now
        let stopped = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                // The gateway may end with an error (its handler was cancelled); it must end.
                _ = try? await TestGateway.withRunning(configure: { $0.listen.shutdownGracePeriod = 1 }, customizeRouter: { router in
                    router.get("/test/forever") { _, _ -> String in
                        enteredContinuation.yield()
                        try await Task.sleep(for: .seconds(3600))
                        return "never"
                    }
                }) { gateway in
                    try await gateway.withHTTPClient { client in
                        async let response = client.execute(HTTPClientRequest(url: gateway.baseURL + "/test/forever"), timeout: .seconds(120))
                        for await _ in entered { break }
                        await gateway.shutDown()
                        _ = try? await response
                    }
                }
                return true
            }
            group.addTask {
                try await Task.sleep(for: .seconds(90))
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(stopped, "the gateway did not stop within 90 s of a shutdown with a 1 s grace period")
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test func drainWaitsForEveryRequestAndRefusesNewOnes() async {
        let drain = RequestDrain()
        #expect(drain.begin())
        #expect(drain.begin())
        let drained = Task { await drain.drain() }
        while !drain.isDraining { await Task.yield() }
        #expect(!drain.begin())
        #expect(drain.inFlight == 2)
        drain.end()
        drain.end()
        await drained.value
        #expect(drain.inFlight == 0)
    }

    @Test func readinessListsWhatIsNotReady() {
        let readiness = Readiness()
        #expect(readiness.waitingFor == [.ingress, .listener, .scheduler, .store])
        readiness.markReady(.ingress)
        readiness.markReady(.store)
        readiness.markReady(.scheduler)
        readiness.markReady(.listener)
        #expect(readiness.waitingFor.isEmpty)
        readiness.markNotReady(.listener)
        #expect(readiness.waitingFor == [.listener])
    }
}

private func status(_ client: HTTPClient, _ url: String) async throws -> HTTPResponseStatus {
    try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30)).status
}

private func waitUntil(_ condition: () async throws -> Bool) async throws {
    for _ in 0..<200 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(25))
    }
    Issue.record("condition never became true")
}
