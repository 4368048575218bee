import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The herd forecast as the gateway serves it: read from the store (a read connection: no commit waits
/// for it), laid out by ``HerdForecast``, with each app's threshold (`forecast.threshold`,
/// `forecast.appThresholds`). `reloadgate forecast`, the dashboard and the warning in the log read it here.
struct HerdForecaster: Sendable {
    let store: any GatewayStoreReading
    let thresholds: GatewayConfiguration.Forecast
    let now: @Sendable () -> Date

    /// The `hours` from the current minute, of one app or kind (`nil`: all).
    func forecast(hours: Int, bundle: String? = nil, kind: String? = nil) async throws -> HerdForecast {
        let start = HerdForecast.minuteStart(of: Timestamp(now()))
        let minutes = hours * 60
        let counts = try await store.herdForecastCounts(start: start, minutes: minutes, bundle: bundle, kind: kind)
        return HerdForecast(start: start, minutes: minutes, counts: counts)
    }

    /// The breaches of `forecast` by each app's threshold.
    func breaches(_ forecast: HerdForecast) -> [HerdForecast.Breach] {
        forecast.breaches { thresholds.threshold(of: $0) }
    }

    /// The admin API's answer.
    func answer(_ forecast: HerdForecast) -> AdminAPI.Forecast {
        func minute(_ minute: HerdForecast.Minute) -> AdminAPI.ForecastMinute {
            AdminAPI.ForecastMinute(minute: minute.start.rfc3339, count: minute.count)
        }
        return AdminAPI.Forecast(
            start: forecast.start.rfc3339, minutes: forecast.minutes, total: forecast.total, peak: forecast.peak.map(minute),
            busiest: forecast.busiest(10).map(minute), perMinute: forecast.perMinute,
            series: forecast.series.map { series in
                let peak = HerdForecast.busiest(series.perMinute, 1).first
                    .map { HerdForecast.Minute(start: forecast.minute($0).start, count: series.perMinute[$0]) }
                return AdminAPI.ForecastSeries(
                    bundle: series.bundle, kind: series.kind, total: series.total,
                    perHour: HerdForecast.grouped(series.perMinute, by: 60),
                    peak: peak.map(minute)
                )
            },
            breaches: breaches(forecast).map {
                AdminAPI.ForecastBreach(bundle: $0.bundle, minute: $0.minute.start.rfc3339, count: $0.minute.count, threshold: $0.threshold)
            }
        )
    }
}

/// Watches the next hour's forecast once a minute: sets `reloadgate_forecast_next_hour_peak` per app and
/// logs each app's minute above its threshold once (a warning an operator sees before the herd comes).
final class HerdWatch: Sendable {
    let forecaster: HerdForecaster
    let metrics: GatewayMetrics
    let logger: Logger
    /// Minutes already warned of, per app (a minute leaves it once past).
    private let warned = Mutex<[String: Set<Int64>]>([:])

    init(forecaster: HerdForecaster, metrics: GatewayMetrics, logger: Logger) {
        self.forecaster = forecaster
        self.metrics = metrics
        self.logger = logger
    }

    /// One look: the gauges set, new breaches logged; returns the breaches logged now.
    @discardableResult
    func check() async throws -> [HerdForecast.Breach] {
        let forecast = try await forecaster.forecast(hours: 1)
        metrics.setForecastPeaks(forecast.perApp.mapValues { $0.max() ?? 0 })
        let breaches = forecaster.breaches(forecast)
        let fresh = warned.withLock { warned -> [HerdForecast.Breach] in
            for bundle in warned.keys { warned[bundle] = warned[bundle]!.filter { $0 >= forecast.start.milliseconds } }
            return breaches.filter { warned[$0.bundle, default: []].insert($0.minute.start.milliseconds).inserted }
        }
        for breach in fresh {
            logger.warning(
                "reload herd ahead: \(breach.minute.count) reloads of \(breach.bundle) in the minute from \(breach.minute.start), above its threshold of \(breach.threshold) (reloadgate forecast)",
                metadata: ["bundle": "\(breach.bundle)", "minute": "\(breach.minute.start)", "count": "\(breach.minute.count)", "threshold": "\(breach.threshold)"]
            )
        }
        return fresh
    }
}
