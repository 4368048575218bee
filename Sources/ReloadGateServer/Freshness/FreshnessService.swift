import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ServiceLifecycle
import Synchronization

/// Applies the freshness facts once a ``interval`` (``FreshnessWatch/apply()``) and looks at the
/// objectives once a ``lookInterval`` (``FreshnessWatch/look()``), in ``PeriodicTurns``: a turn that
/// waits for the store past ``deadline`` (naming instances) is abandoned, and its facts are tried again
/// at the next turn.
struct FreshnessService: Service {
    let watch: FreshnessWatch
    let logger: Logger
    var interval: Duration = .seconds(1)
    var lookInterval: Duration = .seconds(60)
    var deadline: Duration = .seconds(10)

    func run() async throws {
        let lastLook = Mutex<ContinuousClock.Instant?>(nil)
        let turns = PeriodicTurns(interval: interval, deadline: deadline, logger: logger, failure: "freshness could not name the instances of its facts")
        await turns.run { [watch, lookInterval] in
            defer {
                let due = lastLook.withLock { last in
                    guard last.map({ $0.duration(to: .now) >= lookInterval }) ?? true else { return false }
                    last = .now
                    return true
                }
                if due { watch.look() }
            }
            try await watch.apply()
        }
    }
}

/// The freshness accounting's turns: facts applied to the book, the metrics, the breach warnings (once per
/// app and kind per hour while the last hour's share is below the objective).
final class FreshnessWatch: Sendable {
    let monitor: FreshnessMonitor
    let store: any GatewayStoreReading
    let metrics: GatewayMetrics
    let logger: Logger
    let now: @Sendable () -> Date
    /// When each app and kind's breach was last logged.
    private let warned = Mutex<[FreshnessBook.Key: Int64]>([:])

    init(monitor: FreshnessMonitor, store: any GatewayStoreReading, metrics: GatewayMetrics, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.monitor = monitor
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    /// Applies the queued facts (their waits and misses are counted as they are recorded), unless the
    /// admin API is applying them now.
    func apply() async throws {
        try await monitor.apply { try await self.store.instanceDescriptions($0) }
        metrics.freshnessFactsLost(monitor.takeLost())
    }

    /// Sweeps idle instances, sets the gauges, and warns of each app and kind below its objective over the
    /// last hour (once an hour each). Returns the keys it warned of now.
    @discardableResult
    func look() -> [FreshnessBook.Key] {
        let time = Timestamp(now())
        monitor.sweep(now: time)
        var warnedNow: [FreshnessBook.Key] = []
        for report in monitor.reports(now: time) {
            let below = report.hour.meets(report.objective) == false
            metrics.setFreshness(report.key, hour: report.hour.share, day: report.day.share, breached: below)
            guard below else { continue }
            let due = warned.withLock { warned in
                guard time.milliseconds - (warned[report.key] ?? .min / 2) >= 3_600_000 else { return false }
                warned[report.key] = time.milliseconds
                return true
            }
            guard due else { continue }
            warnedNow.append(report.key)
            let causes = report.hour.misses.sorted { ($1.value, $0.key.rawValue) < ($0.value, $1.key.rawValue) }
            logger.warning(
                "freshness objective missed over the last hour",
                metadata: [
                    "bundle": "\(report.key.bundle)", "kind": "\(report.key.kind)",
                    "within": "\(report.hour.within) of \(report.hour.requests)",
                    "objective": "\(report.objective.text)",
                    "causes": "\(causes.prefix(3).map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: ","))",
                ]
            )
        }
        return warnedNow
    }
}

extension SchedulerConfiguration {
    /// Every objective configured: each push type's default and each kind's.
    var objectives: [FreshnessObjective] {
        PushType.allCases.flatMap { type in [self[type].defaultPolicy.freshness] + self[type].byKind.values.map(\.freshness) }
    }
}
