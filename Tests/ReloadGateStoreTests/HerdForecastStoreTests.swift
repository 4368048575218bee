import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The herd forecast's counts, the same on both stores: 10,000 timelines planned for one minute and
/// 10,000 spread over an hour give that minute's peak with its count; pending reloads count where they
/// fall due (an overdue one in the first minute); an unregistered device's widgets and times outside
/// the window do not count; the filters keep one app or kind.
@Suite(.offThePool)
struct HerdForecastStoreTests {
    static let now = Date(timeIntervalSince1970: 1_790_006_400)  // 10:40:00 UTC

    @Test(arguments: StoreImplementation.all) func theForecastFindsTheMinuteTenThousandTimelinesShare(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with("forecast", implementation, now: Self.now) { fixture in
            let start = HerdForecast.minuteStart(of: Timestamp(Self.now))
            let herdMinute = 30  // 11:10
            // 20,000 widgets on 313 devices of 64 (the first device is the fixture's own two widgets),
            // registered as the registry's group commit writes them: 40 devices a transaction, so the test
            // waits for 8 commits' syncs, not 313, on a machine whose other suites keep its disk busy.
            var widgets: [Int64] = []
            var firstDevice: Int64 = 0
            for first in stride(from: 0, to: 313, by: 40) {
                let writes = try (first..<min(first + 40, 313)).map { device in
                    RegistryWrite.putDevice(
                        app: fixture.app, token: try DeviceToken(String(format: "%064x", device + 1)),
                        widgets: (0..<64).map { WidgetRegistration(id: "w\($0)", kind: $0 % 2 == 0 ? "scores" : "news", family: .systemSmall, configuration: WidgetConfiguration()) },
                        previousToken: nil
                    )
                }
                for result in try await fixture.store.writeRegistry(writes, now: Self.now) {
                    guard case .device(let registration) = try result.get() else { Issue.record("\(result)"); return }
                    widgets += registration.instances.map(\.id)
                    if firstDevice == 0 { firstDevice = registration.device }
                }
            }
            let herd = Array(widgets[0..<10_000])
            let spread = Array(widgets[10_000..<20_000])
            var batch = LedgerBatch()
            func planned(_ minute: Int, second: Int64 = 0) -> InstanceSnapshot {
                InstanceSnapshot(
                    bucketFullAt: nil, lastReload: nil,
                    plannedReload: Timestamp(milliseconds: start.milliseconds + Int64(minute) * 60_000 + second * 1000), pending: nil
                )
            }
            // The herd: `.after` 11:10, at any second of that minute.
            batch.instanceStates = herd.enumerated().map { ($1, planned(herdMinute, second: Int64($0 % 60))) }
            // Spread over the hour from 10:40: minutes 0 to 59, about 167 each (none in the herd's minute).
            batch.instanceStates += spread.enumerated().map { ($1, planned([Int](0..<60).filter { $0 != herdMinute }[$0 % 59])) }
            // Not in the window: a day and more ahead, and a minute before it.
            batch.instanceStates += [(fixture.instances[0], planned(24 * 60)), (fixture.instances[1], planned(-1))]
            // Committed 2,000 states at a time: each commit stays far inside the test store's deadline on a
            // machine the other suites keep busy, where one of 20,002 states on PostgreSQL can take longer.
            for first in stride(from: 0, to: batch.instanceStates.count, by: 2_000) {
                var step = LedgerBatch()
                step.instanceStates = Array(batch.instanceStates[first..<min(first + 2_000, batch.instanceStates.count)])
                try await fixture.store.commit(step)
            }

            let counts = try await fixture.store.herdForecastCounts(start: start, minutes: 24 * 60, bundle: nil, kind: nil)
            let forecast = HerdForecast(start: start, minutes: 24 * 60, counts: counts)
            #expect(forecast.total == 20_000)
            #expect(forecast.peak == HerdForecast.Minute(start: Timestamp(milliseconds: start.milliseconds + 30 * 60_000), count: 10_000))
            #expect(forecast.perMinute[0] == 10_000 / 59 + (0 < 10_000 % 59 ? 1 : 0))
            #expect(forecast.series.map(\.kind) == ["news", "scores"])
            #expect(forecast.series.map { $0.perMinute[herdMinute] } == [5_000, 5_000])
            // The threshold: 5,000 a minute for the app, crossed in the herd's minute only.
            let breaches = forecast.breaches { $0 == "com.example.scores" ? 5_000 : nil }
            #expect(breaches.map(\.minute.count) == [10_000])

            // One kind, one app; an unknown app has nothing.
            let scores = try await fixture.store.herdForecastCounts(start: start, minutes: 60, bundle: "com.example.scores", kind: "scores")
            #expect(HerdForecast(start: start, minutes: 60, counts: scores).total == 10_000)
            #expect(try await fixture.store.herdForecastCounts(start: start, minutes: 60, bundle: "com.example.other", kind: nil).isEmpty)

            // A pending reload overdue by an hour counts in the first minute, one due in 90 minutes there;
            // an unregistered device's widgets count no more.
            var pending = LedgerBatch()
            func due(_ milliseconds: Int64) -> InstanceSnapshot {
                InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: nil, pending: PendingSnapshot(
                    due: Timestamp(milliseconds: milliseconds), priority: .high, expiration: nil, requests: [1], collapseID: nil, team: nil, exempt: false
                ))
            }
            pending.requests = [StoreFixture.request(1, app: fixture.app)]
            pending.instanceStates = [(fixture.instances[0], due(start.milliseconds - 3_600_000)), (fixture.instances[1], due(start.milliseconds + 5_400_000))]
            try await fixture.store.commit(pending)
            _ = try await fixture.store.markDeviceInvalid(device: firstDevice, since: Self.now)
            let after = HerdForecast(start: start, minutes: 120, counts: try await fixture.store.herdForecastCounts(start: start, minutes: 120, bundle: nil, kind: nil))
            // The unregistered device's 64 widgets were all in the herd.
            #expect(after.perMinute[0] == forecast.perMinute[0] + 1)
            #expect(after.perMinute[herdMinute] == 10_000 - 64)
            #expect(after.perMinute[90] == 1)
            #expect(after.total == 20_000 - 64 + 2)
        }
    }
}
