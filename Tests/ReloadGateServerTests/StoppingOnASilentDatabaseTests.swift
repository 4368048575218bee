import Foundation
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// A gateway stops within bounded time while PostgreSQL has stopped answering: work it started beside
/// the commit loop (a partition load, a degraded engine's reload) reads with a deadline of minutes, and
/// the stop cancels it instead of waiting it out.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct StoppingOnASilentDatabaseTests {
    @Test func aGatewayWhosePartitionLoadWaitsOnASilentDatabaseStops() async throws {
        let (proxy, proxied) = try await TCPProxy.inFront(of: try await TestPostgres.newDatabase())
        defer { Task { await proxy.stop() } }
        let data = try TemporaryDirectory("stop-silent")
        defer { data.remove() }
        // The first heartbeat takes the partitions and loads their scheduling state beside the commit loop;
        // from that read on, nothing the server says comes back.
        proxy.swallowReplies(onceClientSends: "LEFT JOIN pending_list l ON l.instanceId = s.instanceId")
        let bodyEnded = Mutex<ContinuousClock.Instant?>(nil)
        let stop = Task {
            try await TestGateway.withRunning(configure: { configuration in
                configuration.usePostgres(proxied, dataDirectory: data.path("data"))
                // Writes in flight at the stop (a heartbeat, the leases' release) end within seconds.
                configuration.store.deadline = 2000
            }) { _ in
                let began = ContinuousClock.now
                while !proxy.isSwallowing, began.duration(to: .now) < .seconds(60) {
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(proxy.isSwallowing, "the partition load's read was not seen within 60 s")
                try await Task.sleep(for: .seconds(1))
                bodyEnded.withLock { $0 = .now }
            }
        }
        // Before: the stop waited for the load's read up to its backstop, over ten minutes. The wait is
        // abandoned past three minutes so that the test fails rather than hangs.
        try await abandoning(after: .seconds(180), timedOut: { TestGatewayError.unanswered(seconds: 180) }) {
            try await stop.value
        }
        let limit: Duration = .seconds(120)
        let ended = try #require(bodyEnded.withLock { $0 })
        let took = ended.duration(to: .now)
        print("StoppingOnASilentDatabaseTests: the gateway stopped \(took) after the test ended")
        #expect(took < limit, "the gateway took \(took) to stop")
    }
}
