import Foundation
import ReloadGateCore
import ReloadGateSimulation
import Testing

/// Small traces written by hand, with figures worked out from the scheduling rules (docs/DESIGN.md) in the
/// comments: the simulator must give exactly those.
struct HandTraceTests {
    /// 2026-09-23T14:00:00Z.
    static let start = Timestamp(seconds: 1_790_172_000)

    static func at(seconds: Int64) -> Timestamp { start.adding(seconds: seconds) }

    static func scores(daily: Int = 40, burst: Int = 6, interval: Int64 = 300) -> SchedulerConfiguration {
        var policy = SchedulingPolicy()
        policy.dailyBudget = daily
        policy.burst = burst
        policy.minimumInterval = interval
        return SchedulerConfiguration(policiesByKind: ["scores": policy])
    }

    /// 100 priority-10 pushes to one widget in one hour (one every 36 s, at 0, 36, ..., 3564 s) with daily
    /// 40, burst 6 and a 5-minute minimum interval.
    ///
    /// A token comes back every 86,400 / 40 = 2,160 s; the bucket (GCRA) holds a token at t while
    /// fullAt - t <= 5 x 2,160 = 10,800, and each reload moves fullAt to max(fullAt, t) + 2,160.
    /// - t=0: the first push is scheduled and leaves at once (the first delivery, at 0 s); fullAt 2,160.
    /// - Then the interval rules: the next push (36 s) is deferred to 300 s and those before 300 s merge
    ///   into it (72-288 s: 7). Likewise deliveries at 600 (push at 324 deferred, 360-576 merged: 7),
    ///   900 (612 deferred, 648-864 merged: 7), 1,200 (the push at exactly 900 s comes after the delivery
    ///   due then: deferred, 936-1,188 merged: 8), 1,500 (1,224 deferred, 1,260-1,476 merged: 7); fullAt
    ///   is now 12,960 after six reloads.
    /// - At 1,800 s the bucket is empty (12,960 - 1,800 > 10,800): the push at 1,512 is deferred to the
    ///   next token, 12,960 - 10,800 = 2,160 s, and 1,548-2,124 merge into it (17); fullAt 15,120.
    /// - The push at 2,160 s comes after that delivery: deferred to the next token at 4,320 s (1 h 12 min),
    ///   and the 39 pushes after it (2,196-3,564) merge into it.
    /// So: 1 scheduled, 7 deferred, 92 merged; 8 deliveries (7 in the first hour), none throttled; all 100
    /// served. Staleness (delivery minus push): median 300 s (the push at 900 s), p90 1,800 s (2,520 s
    /// served at 4,320 s), max 2,160 s (the push at 2,160 s).
    @Test func aHundredPushesInAnHourToOneWidget() {
        var simulation = Simulation(configuration: Self.scores())
        simulation.keepsDeliveryTimes = true
        let device = DeviceHandle(0)
        let widget = InstanceHandle(0)
        simulation.apply(.registration(at: Self.start, device: device, widgets: [TraceWidget(instance: widget, kind: "scores")]))
        for k in 0..<100 {
            simulation.apply(.request(TraceRequest(at: Self.at(seconds: Int64(36 * k)), targets: .instances([widget]))))
        }
        simulation.finish(at: Self.at(seconds: 7200))
        let report = simulation.report()
        let scores = try! #require(report.kinds.first)
        #expect(scores.requests == 100)
        #expect(scores.scheduled == 1)
        #expect(scores.deferred == 7)
        #expect(scores.merged == 92)
        #expect(scores.deliveries == 8)
        #expect(scores.throttled == 0)
        #expect(simulation.deliveryTimes.map { ($0.milliseconds - Self.start.milliseconds) / 1000 } == [0, 300, 600, 900, 1200, 1500, 2160, 4320])
        #expect(scores.reloadsByHour == [7, 1])
        #expect(scores.served == 100)
        #expect(scores.staleness == .init(median: 300, p90: 1800, max: 2160))
        #expect(scores.reloadsPerInstancePerDay == .init(median: 8, p90: 8, max: 8))
        #expect(report.devicePushes == 8)
        #expect(report.stillWaiting == 0)
    }

    /// A timeline reload absorbs a push close to it and serves it (rule 3).
    ///
    /// The widget's timeline reloads at 60 min. A push at 30 min is scheduled and leaves at once
    /// (staleness 0). A push at 56 min finds the planned reload within the 5-minute absorb window:
    /// absorbed, served by the timeline reload at 60 min (staleness 240 s). A push at 60.5 min must wait
    /// for the interval after the timeline reload: deferred to 65 min (staleness 270 s).
    @Test func aTimelineReloadAbsorbsAPushAndServesIt() {
        var simulation = Simulation(configuration: Self.scores())
        let widget = InstanceHandle(0)
        simulation.apply(.registration(at: Self.start, device: DeviceHandle(0), widgets: [TraceWidget(instance: widget, kind: "scores")]))
        simulation.apply(.timeline(at: Self.start, instance: widget, plannedReload: Self.at(seconds: 3600)))
        for seconds: Int64 in [1800, 3360, 3630] {
            simulation.apply(.request(TraceRequest(at: Self.at(seconds: seconds), targets: .instances([widget]))))
        }
        simulation.finish(at: Self.at(seconds: 7200))
        let scores = try! #require(simulation.report().kinds.first)
        #expect((scores.scheduled, scores.absorbed, scores.deferred, scores.merged) == (1, 1, 1, 0))
        #expect((scores.deliveries, scores.timelineReloads) == (2, 1))
        #expect(scores.staleness == .init(median: 240, p90: 270, max: 270))
    }

    /// The herd a trace makes: ten widgets whose timelines all end at 15:00:20 reload in that minute, three
    /// more at 15:30:00 and 15:30:59, one pushed at 14:10 (scheduled, at once). The busiest minutes: 15:00
    /// with 10, 15:30 with 3, 14:10 with 1; the report's text names the first.
    @Test func theBusiestMinutesOfATraceAreItsHerd() {
        var simulation = Simulation(configuration: Self.scores())
        let widgets = (0..<14).map { InstanceHandle(Int32($0)) }
        for (index, widget) in widgets.enumerated() {
            simulation.apply(.registration(at: Self.start, device: DeviceHandle(Int32(index)), widgets: [TraceWidget(instance: widget, kind: "scores")]))
            let planned = index < 10 ? Self.at(seconds: 3620) : Self.at(seconds: index == 10 ? 5400 : 5459)
            if index < 13 { simulation.apply(.timeline(at: Self.start, instance: widget, plannedReload: planned)) }
        }
        simulation.apply(.request(TraceRequest(at: Self.at(seconds: 600), targets: .instances([widgets[13]]))))
        simulation.finish(at: Self.at(seconds: 7200))
        let report = simulation.report()
        #expect(report.busiestMinutes.map(\.count) == [10, 3, 1])
        #expect(report.busiestMinutes.map(\.start) == [Self.at(seconds: 3600), Self.at(seconds: 5400), Self.at(seconds: 600)])
        #expect(report.text().contains("reload herd: the busiest minute 2026-09-23T15:00:00.000Z with 10 reloads"), "\(report.text())")
        #expect(report.json().contains(#""busiestMinutes":[{"minute":"2026-09-23T15:00:00.000Z","count":10}"#))
    }

    /// Pushes to a device reach its widgets of the push's kind; a webhook call to a kind reaches every
    /// widget of the kind; a registration without a widget drops its pending reload (cancelled).
    @Test func targetsByDeviceAndKindAndARemovedWidget() throws {
        let text = """
            {"at":"2026-09-23T14:00:00Z","event":"registration","device":"d1","widgets":[{"widget":"a","kind":"scores"},{"widget":"b","kind":"news"}]}
            {"at":"2026-09-23T14:00:00Z","event":"registration","device":"d2","widgets":[{"widget":"a","kind":"scores"}]}
            {"at":"2026-09-23T14:01:00Z","event":"push","device":"d1","kind":"scores"}
            {"at":"2026-09-23T14:02:00Z","event":"webhook","kind":"scores","priority":"10"}
            {"at":"2026-09-23T14:03:00Z","event":"registration","device":"d1","widgets":[{"widget":"b","kind":"news"}]}
            {"at":"2026-09-23T14:04:00Z","event":"push","device":"d9"}
            """
        var names = TraceNames()
        let events = try TraceFile.read(Data(text.utf8), names: &names)
        var simulation = Simulation(configuration: Self.scores())
        simulation.replay(events)
        simulation.finish(at: Self.at(seconds: 3600))
        let report = simulation.report()
        let scores = try #require(report.kinds.first { $0.name == "scores" })
        // 14:01 d1/a scheduled (leaves at once); 14:02 the webhook: d1/a deferred to 14:06 (interval),
        // d2/a scheduled; 14:03 d1/a removed with its pending reload; 14:04 an unknown device: no match.
        #expect((scores.requests, scores.scheduled, scores.deferred, scores.cancelled) == (3, 2, 1, 1))
        #expect(scores.deliveries == 2)
        #expect(report.unmatchedRequests == 1)
        #expect(report.kinds.first { $0.name == "news" }?.requests == 0)
    }

    /// Recorded decisions (an exported trace's `decided`) are compared with the replay's.
    @Test func decisionsDifferentFromTheRecordedOnesAreCounted() throws {
        let text = """
            {"at":"2026-09-23T14:00:00Z","event":"registration","device":"d1","widgets":[{"widget":"a","kind":"scores"}]}
            {"at":"2026-09-23T14:01:00Z","event":"push","targets":[["d1","a"]],"decided":["scheduled"]}
            {"at":"2026-09-23T14:02:00Z","event":"push","targets":[["d1","a"]],"decided":["merged"]}
            {"at":"2026-09-23T14:03:00Z","event":"push","targets":[],"decided":["no-match"]}
            """
        var names = TraceNames()
        var simulation = Simulation(configuration: Self.scores())
        simulation.replay(try TraceFile.read(Data(text.utf8), names: &names))
        let report = simulation.report()
        // The second push is deferred (the first left at 14:01), not merged as recorded.
        #expect(report.compared == 3)
        #expect(report.mismatchCount == 1)
        #expect(report.mismatches.first?.recorded == .merged)
        #expect(report.mismatches.first?.simulated == .deferred)
    }

    /// Hostile lines are refused with the line and the field, never a trap.
    @Test(arguments: [
        (#"{"at":1e300,"event":"push","device":"d"}"#, "at must be a time"),
        (#"{"at":"2026-09-23T14:00:00Z","event":"push","device":"d","priority":9223372036854775807}"#, "priority"),
        (#"{"at":"2026-09-23T14:00:00Z","event":"push","device":"d","priority":"-9223372036854775808"}"#, "priority must be 10, 5 or 1"),
        (#"{"at":-9223372036854775808,"event":"push","device":"d"}"#, "at must be a time"),
        (#"{"at":"2026-09-23T14:00:00Z","event":"push","device":"d","expiration":12345678901234567890}"#, "expiration"),
        (#"{"at":"2026-09-23T14:00:00Z","event":"launch"}"#, "event must be"),
        (#"{"at":"2026-09-23T14:00:00Z","event":"push"}"#, "needs targets"),
        (#"[1,2]"#, "JSON object"),
    ])
    func hostileLinesAreRefused(line: String, expected: String) {
        var names = TraceNames()
        let data = Data(("{\"at\":\"2026-09-23T14:00:00Z\",\"event\":\"push\",\"device\":\"ok\"}\n" + line + "\n").utf8)
        #expect {
            _ = try TraceFile.read(data, names: &names)
        } throws: { error in
            guard let error = error as? TraceError else { return false }
            return error.line == 2 && error.message.contains(expected)
        }
    }

    /// A trace written back reads the same.
    @Test func aTraceWrittenBackReadsTheSame() throws {
        let text = """
            {"at":"2026-09-23T14:00:00.000Z","event":"registration","device":"d1","widgets":[{"widget":"a","kind":"scores"}]}
            {"at":"2026-09-23T14:00:00.000Z","event":"timeline","device":"d1","widget":"a","plannedReload":"2026-09-23T15:00:00.000Z"}
            {"at":"2026-09-23T14:01:00.250Z","event":"push","targets":[["d1","a"]],"priority":5,"expiration":"2026-09-23T16:00:00.000Z","collapseId":"c","team":"T","exempt":true,"decided":["deferred"]}
            {"at":"2026-09-23T14:02:00.000Z","event":"webhook","kind":"scores","priority":1}
            """
        var names = TraceNames()
        let events = try TraceFile.read(Data(text.utf8), names: &names)
        let written = events.map { TraceFile.line($0, names: names) }.joined(separator: "\n")
        #expect(written == text)
    }

    /// A Live Activity replayed (issue 45) with the Live Activities' default policy (5 s between deliveries):
    /// an update at 0 s leaves at once (timestamp 100); one at 1 s (timestamp 102) waits for 5 s and one at
    /// 2 s (timestamp 101) merges into it: the delivery at 5 s carries timestamp 102. An update at 10 s with
    /// timestamp 101 is older than what the activity shows: outdated, not delivered. So 1 scheduled, 1
    /// deferred, 1 merged, 2 deliveries, 4 requests.
    @Test func aLiveActivitysUpdatesMergeToTheNewestAndAnOlderOneIsDropped() throws {
        var simulation = Simulation(configuration: SchedulerConfiguration())
        simulation.keepsDeliveryTimes = true
        let activity = InstanceHandle(0)
        simulation.apply(.registration(
            at: Self.start, device: DeviceHandle(0), widgets: [TraceWidget(instance: activity, kind: "ScoreAttributes", pushType: .liveactivity, family: "activity")]
        ))
        for (seconds, timestamp) in [(0, 100), (1, 102), (2, 101), (10, 101)] as [(Int64, Int64)] {
            simulation.apply(.request(TraceRequest(
                at: Self.at(seconds: seconds), targets: .instances([activity]),
                activity: ActivityContent(event: .update, timestamp: timestamp, hasAlert: false)
            )))
        }
        simulation.finish(at: Self.at(seconds: 60))
        let kind = try #require(simulation.report().kinds.first)
        #expect(kind.name == "activity:ScoreAttributes")
        #expect(kind.policy == SchedulingPolicy.liveActivityDefault)
        #expect(kind.requests == 4)
        #expect(kind.scheduled == 1)
        #expect(kind.deferred == 1)
        #expect(kind.merged == 1)
        #expect(simulation.deliveryTimes.map { ($0.milliseconds - Self.start.milliseconds) / 1000 } == [0, 5])
    }

    /// An activity's family and an update's content are written and read back.
    @Test func aLiveActivityTraceWrittenBackReadsTheSame() throws {
        let text = """
            {"at":"2026-09-23T14:00:00.000Z","event":"registration","device":"d1","pushType":"liveactivity","widgets":[{"widget":"activity","kind":"ScoreAttributes","family":"activity-frequent"}]}
            {"at":"2026-09-23T14:01:00.000Z","event":"push","targets":[["d1","activity"]],"priority":10,"activity":{"event":"end","timestamp":1790172060,"alert":true}}
            """
        var names = TraceNames()
        let events = try TraceFile.read(Data(text.utf8), names: &names)
        #expect(events.map { TraceFile.line($0, names: names) }.joined(separator: "\n") == text)
        guard case .registration(_, _, let widgets) = events[0] else { Issue.record("not a registration"); return }
        #expect(widgets.first?.scheduling == SchedulingKind(pushType: .liveactivity, kind: "ScoreAttributes", frequentUpdates: true))
    }
}
