import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// Reads on a database whose answers stop coming. Devices' registrations, read in the commit loop's
/// turn when a gateway resyncs devices (``SharedSchedulingStore/registeredInstances(devices:)``), take
/// the store's deadline, not the minutes a scanning read may take: it must not hold the loop, and with it
/// every answer of the gateway, for five minutes a read. And a read whose caller is cancelled ends then.
@Suite(.enabled(if: TestPostgres.isEnabled))
struct PostgresResyncReadTests {
    @Test func aDevicesRegistrationIsReadWithinTheStoresDeadline() async throws {
        let directory = try TemporaryDirectory("resync-read")
        defer { directory.remove() }
        let (store, proxy) = try await TestPostgres.newStoreThroughProxy(in: directory, deadline: .seconds(2))
        defer { Task { await proxy.stop() } }
        defer { try? store.close() }
        #expect(try await store.registeredInstances(devices: [1]).isEmpty)

        // The server's answers are lost from the read's query on (its connection leased and its
        // transaction, if it has one, begun).
        proxy.swallowReplies(onceClientSends: "widget.deviceId IN ")
        let ended = Mutex<ContinuousClock.Instant?>(nil)
        let started = ContinuousClock.now
        let read = Task {
            _ = try? await store.registeredInstances(devices: [1])
            ended.withLock { $0 = .now }
        }
        defer { read.cancel() }
        // The store's deadline (2 s), a second for the cut-off, and the backstop's margin: well under a
        // minute. A scanning read's deadline would be 300 s.
        while ended.withLock({ $0 }) == nil, ContinuousClock.now - started < .seconds(60) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let took = try #require(ended.withLock { $0 }, "the read had not ended after 60 s") - started
        #expect(took < .seconds(30), "the read ended after \(took)")
    }

    /// A read whose caller is cancelled is abandoned at once: it writes nothing, and a scanning read
    /// (loading partitions, a degraded engine's reload) has a deadline of minutes, which a stopping
    /// gateway waited out on a connection that no longer answered. Its connection is closed then too,
    /// rather than kept leased by the pool until the read's deadline or the server's idle timeout.
    @Test func aScanningReadEndsWhenItsCallerIsCancelled() async throws {
        let directory = try TemporaryDirectory("cancelled-read")
        defer { directory.remove() }
        let (store, proxy) = try await TestPostgres.newStoreThroughProxy(in: directory, deadline: TestPostgres.storeDeadline)
        defer { Task { await proxy.stop() } }
        defer { try? store.close() }
        #expect(try await store.registeredInstances(partitions: [0]).isEmpty)

        // Nothing the server answers comes back once the read's query is sent: the read waits on its
        // connection.
        proxy.swallowReplies(onceClientSends: "device.active AND")
        let ended = Mutex<ContinuousClock.Instant?>(nil)
        let read = Task {
            _ = try? await store.registeredInstances(partitions: [0])
            ended.withLock { $0 = .now }
        }
        // Cancelled once its query has gone (on a loaded machine that can take more than a second).
        let sent = try await eventually(within: .seconds(30), every: .milliseconds(10)) { proxy.triggeringConnectionIsOpen != nil }
        #expect(sent, "the read's query was not seen within 30 s")
        try await Task.sleep(for: .milliseconds(200))
        #expect(ended.withLock { $0 } == nil, "the read ended before it was cancelled: nothing was swallowed")
        #expect(proxy.triggeringConnectionIsOpen == true, "the read's connection closed before the cancel")
        let cancelled = ContinuousClock.now
        read.cancel()
        // Before: the read's scanning deadline (300 s) and its backstop, over ten minutes.
        while ended.withLock({ $0 }) == nil, ContinuousClock.now - cancelled < .seconds(60) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let took = try #require(ended.withLock { $0 }, "the read had not ended 60 s after its caller was cancelled") - cancelled
        #expect(took < .seconds(10), "the read ended \(took) after its caller was cancelled")
        // The read's connection goes too. Left leased, it would stay open for the read's deadline (300 s)
        // or the server's `idle_in_transaction_session_timeout` (61 s with the tests' deadline).
        let closedInTime = try await eventually(within: .seconds(20), every: .milliseconds(50)) {
            proxy.triggeringConnectionIsOpen == false
        }
        let closed = ContinuousClock.now - cancelled
        #expect(closedInTime, "the read's connection was still open \(closed) after its caller was cancelled")
    }
}
