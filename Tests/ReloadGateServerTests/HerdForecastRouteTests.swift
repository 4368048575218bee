import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import ReloadGateCore
import ReloadGateStore
import Testing

@testable import ReloadGateServer

/// The herd forecast through the admin API and the watch that warns: timelines registered through the
/// registry API come out in the minute they plan, with the app's threshold crossed; the watch logs each
/// minute above the threshold once and sets the metric.
struct HerdForecastRouteTests {
    static let devicePath = "/v1/apps/\(RouterTier.bundle)/devices/"

    @Test func timelinesPlannedForOneMinuteAreItsPeakAndCrossTheThreshold() async throws {
        try await RouterTier.with { tier in
            // Four devices of two widgets: every `scores` widget `.after` the same time 20 minutes ahead
            // (second 30 of its minute), every `news` widget in a minute of its own after it.
            let herd = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.down) * 60 + 20 * 60 + 30)
            try await tier.api { client in
                for device in 1...4 {
                    let path = Self.devicePath + String(format: "%064x", device)
                    let put = try await client.registry(path, .put, apiKey: tier.credentials.apiKey, body: #"""
                        {"widgets":[{"id":"w1","kind":"scores","family":"systemSmall"},{"id":"w2","kind":"news","family":"systemSmall"}]}
                        """#)
                    #expect(put.status == .ok, "\(put.text)")
                    for (widget, date) in [("w1", herd), ("w2", herd.addingTimeInterval(Double(device) * 60))] {
                        let timeline = try await client.registry(
                            path + "/widgets/\(widget)/timeline", .put, apiKey: tier.credentials.apiKey,
                            body: #"{"entries":[],"policy":{"after":\#(date.timeIntervalSince1970)}}"#
                        )
                        #expect(timeline.status == .ok, "\(timeline.text)")
                    }
                }
            }
            let herdMinute = Timestamp(milliseconds: Int64(herd.timeIntervalSince1970 - 30) * 1000).rfc3339
            try await tier.admin { client in
                let answer = try await client.call("/v1/forecast?hours=1", .get)
                #expect(answer.status == .ok, "\(answer.text)")
                let forecast = try JSONDecoder().decode(AdminAPI.Forecast.self, from: Data(answer.text.utf8))
                #expect(forecast.minutes == 60)
                #expect(forecast.total == 8)
                #expect(forecast.peak == AdminAPI.ForecastMinute(minute: herdMinute, count: 4))
                #expect(forecast.busiest.map(\.count) == [4, 1, 1, 1, 1])
                #expect(forecast.series.map { "\($0.kind) \($0.total) \($0.peak?.count ?? 0)" } == ["news 4 1", "scores 4 4"])
                #expect(forecast.series.map(\.perHour) == [[4], [4]])
                #expect(forecast.breaches.isEmpty, "no threshold configured")
                let scores = try JSONDecoder().decode(AdminAPI.Forecast.self, from: Data(try await client.call("/v1/forecast?kind=scores&hours=2", .get).text.utf8))
                #expect(scores.total == 4)
                #expect(scores.minutes == 120)
                for refused in ["/v1/forecast?hours=0", "/v1/forecast?hours=49", "/v1/forecast?hours=x", "/v1/forecast?bundle=a..b"] {
                    #expect(try await client.call(refused, .get).status == .unprocessableContent, "\(refused)")
                }
            }

            // The watch with a threshold of 3 a minute for the app: the herd's minute is above it, logged
            // once however often the watch looks; the gauge says 4.
            var thresholds = GatewayConfiguration.Forecast()
            thresholds.appThresholds = [RouterTier.bundle: 3]
            let metrics = GatewayMetrics()
            let watch = HerdWatch(
                forecaster: HerdForecaster(store: tier.door.reader, thresholds: thresholds, now: { Date() }), metrics: metrics, logger: Logger(label: "test")
            )
            let first = try await watch.check()
            #expect(first.map { "\($0.bundle) \($0.minute.start.rfc3339) \($0.minute.count) > \($0.threshold)" } == ["\(RouterTier.bundle) \(herdMinute) 4 > 3"])
            #expect(try await watch.check().isEmpty, "a minute is warned of once")
            let exposition = String(decoding: metrics.exposition(), as: UTF8.self)
            #expect(exposition.contains(#"reloadgate_forecast_next_hour_peak{bundle="com.example.scores"} 4"#), "\(exposition)")
        }
    }
}
