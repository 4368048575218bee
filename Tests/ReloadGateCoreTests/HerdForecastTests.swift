import ReloadGateCore
import Testing

/// The forecast's layout of counts, by hand: minutes, series, the peak, the busiest minutes, an app's
/// breaches of its threshold, the chart's columns.
struct HerdForecastTests {
    static let start = Timestamp(seconds: 1_790_006_400)

    static func count(_ bundle: String, _ kind: String, _ minute: Int, _ count: Int) -> HerdForecast.Count {
        HerdForecast.Count(bundle: bundle, kind: kind, minute: minute, count: count)
    }

    @Test func countsAreLaidOutByMinuteAppAndKind() {
        let forecast = HerdForecast(start: Self.start, minutes: 10, counts: [
            Self.count("b.app", "news", 3, 4), Self.count("a.app", "scores", 3, 2), Self.count("a.app", "scores", 3, 1),
            Self.count("a.app", "scores", 7, 5), Self.count("a.app", "news", 0, 1),
            Self.count("a.app", "news", 10, 99), Self.count("a.app", "news", -1, 99),  // outside the window
        ])
        #expect(forecast.series.map { "\($0.bundle)/\($0.kind)" } == ["a.app/news", "a.app/scores", "b.app/news"])
        #expect(forecast.series[1].perMinute == [0, 0, 0, 3, 0, 0, 0, 5, 0, 0])
        #expect(forecast.perMinute == [1, 0, 0, 7, 0, 0, 0, 5, 0, 0])
        #expect(forecast.total == 13)
        #expect(forecast.peak == HerdForecast.Minute(start: Timestamp(seconds: 1_790_006_400 + 180), count: 7))
        #expect(forecast.busiest(5).map(\.count) == [7, 5, 1])
        #expect(forecast.grouped(by: 4) == [8, 5, 0])
        // a.app has 3 in minute 3 and 5 in minute 7; b.app 4 in minute 3. A threshold of 3 for each:
        let breaches = forecast.breaches { _ in 3 }
        #expect(breaches.map { "\($0.bundle)@\($0.minute.start.milliseconds / 1000 - 1_790_006_400)=\($0.minute.count)" } == ["b.app@180=4", "a.app@420=5"])
        #expect(forecast.breaches { $0 == "a.app" ? 0 : nil }.isEmpty, "0 and nil are no threshold")
    }

    @Test func anEmptyWindowHasNoPeakAndEqualsGoInTimeOrder() {
        #expect(HerdForecast(start: Self.start, minutes: 60, counts: []).peak == nil)
        let tied = HerdForecast(start: Self.start, minutes: 3, counts: [Self.count("a", "k", 2, 2), Self.count("a", "k", 1, 2)])
        #expect(tied.busiest(2).map(\.start) == [Timestamp(seconds: 1_790_006_460), Timestamp(seconds: 1_790_006_520)])
        #expect(HerdForecast.minuteStart(of: Timestamp(milliseconds: 1_790_006_459_999)) == Timestamp(seconds: 1_790_006_400))
        #expect(HerdForecast.minuteStart(of: Timestamp(milliseconds: -1)) == Timestamp(milliseconds: -60_000))
    }
}
