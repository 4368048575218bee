import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// A gateway's start on a database that is slow for a moment: a store step of the start (here the first
/// heartbeat) that gets no answer within the store deadline is tried again a second later, and the gateway
/// comes up instead of ending its start with the step's unknown outcome.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct StartingOnASlowDatabaseTests {
    @Test func aFirstHeartbeatWithoutAnAnswerIsTriedAgain() async throws {
        let (proxy, proxied) = try await TCPProxy.inFront(of: try await TestPostgres.newDatabase())
        defer { Task { await proxy.stop() } }
        let data = try TemporaryDirectory("start-slow")
        defer { data.remove() }
        // The first heartbeat's write gets no answer; once the deadline closed its connection, answers come
        // through again (before the second try, a second later).
        proxy.swallowReplies(onceClientSends: "INSERT INTO gateway (id, address")
        let letThrough = Task {
            let closed = try await eventually(within: .seconds(120), every: .milliseconds(10)) {
                proxy.triggeringConnectionIsOpen == false
            }
            proxy.letRepliesThrough()
            return closed
        }
        defer { letThrough.cancel() }
        try await TestGateway.withRunning(configure: { configuration in
            configuration.usePostgres(proxied, dataDirectory: data.path("data"))
            // Short, so that the swallowed first try ends within the test's minutes, but long enough for
            // the retries: a first heartbeat takes all 1,024 partitions in one transaction, and with the
            // rest of the suite on two cores sharing the database, both retries of a 3 s deadline failed in
            // one CI run (the last without an answer in 4 s).
            configuration.store.deadline = 10_000
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let ready = try await client.execute(HTTPClientRequest(url: gateway.baseURL + "/ready"), timeout: .seconds(30))
                #expect(ready.status == .ok)
            }
        }
        #expect(try await letThrough.value, "the first heartbeat's connection was never closed at its deadline")
    }
}
