import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// The freshness accounting of the running gateway, fed by hand: facts applied in order with the
/// instances named from the registry, the breach warned of once an hour, idle instances forgotten, a
/// full queue counted as lost; and the objectives' configuration.
struct FreshnessWatchTests {
    static let start = Timestamp(seconds: 1_790_172_000)  // the start of a ten-minute slot
    static func at(_ seconds: Int64) -> Timestamp { start.adding(seconds: seconds) }

    static func scheduling(_ lines: String = "") throws -> SchedulerConfiguration {
        var configuration = GatewayConfiguration()
        if !lines.isEmpty {
            let directory = try TemporaryDirectory("freshness-config")
            defer { directory.remove() }
            try lines.write(toFile: directory.path("c.yaml"), atomically: true, encoding: .utf8)
            configuration = try GatewayConfiguration.load(file: directory.path("c.yaml"), environment: [:])
        }
        return configuration.scheduling.resolved
    }

    static func describe(_ ids: [Int64]) -> [InstanceDescription] {
        ids.filter { $0 < 100 }.map { id in
            InstanceDescription(
                instance: id, bundle: "com.example.app", token: "", widgetID: "w\(id)", kind: id == 7 ? "garage" : "scores",
                pushType: id == 7 ? "controls" : "widgets"
            )
        }
    }

    static func request(_ id: RequestID, at seconds: Int64) -> RecordedRequest {
        RecordedRequest(id: id, app: 1, source: .push, received: at(seconds), priority: .high, expiration: nil, collapseID: nil, exempt: false, summary: "")
    }

    /// scores wants 90% within a minute. Request 1 (instance 5) is delivered 2 minutes after it came: a
    /// miss of `upstream` (it waited for nothing). Request 2 (instance 6) is deferred by the interval and
    /// served 30 s after it came: within. Request 3 to the control (instance 7) is served at once. Request
    /// 4 targets instance 500, no longer registered: left out. The hour: scores 1 of 2 within (50% < 90%),
    /// breached, warned of once however often the watch looks, again an hour later.
    @Test func factsAreAppliedInOrderAndABreachIsWarnedOfOnceAnHour() async throws {
        let scheduling = try Self.scheduling("scheduling:\n  kinds:\n    scores:\n      freshness: {quantile: 0.9, within: 1m}\n")
        let metrics = GatewayMetrics()
        let monitor = FreshnessMonitor(scheduling: scheduling, metrics: metrics)
        monitor.committed(
            requests: [Self.request(1, at: 0), Self.request(2, at: 10), Self.request(3, at: 20)],
            forwarded: [(4, Self.at(25))],
            decisions: [
                Decision(request: 1, instance: InstanceHandle(5), kind: .scheduled, due: Self.at(0), reason: .dueNow),
                Decision(request: 2, instance: InstanceHandle(6), kind: .deferred, due: Self.at(40), reason: .waitingForInterval(until: Self.at(40), lastReload: Self.at(-260), minimumInterval: 300)),
                Decision(request: 3, instance: InstanceHandle(7), kind: .scheduled, due: Self.at(20), reason: .dueNow),
                Decision(request: 4, instance: InstanceHandle(500), kind: .scheduled, due: Self.at(25), reason: .dueNow),
            ],
            timelineReloads: [], at: Self.at(25)
        )
        monitor.delivered(instances: [7], at: Self.at(20))
        monitor.delivered(instances: [6], at: Self.at(40))
        monitor.delivered(instances: [5, 500], at: Self.at(120))
        let asked = Mutex<[[Int64]]>([])
        let entries = try #require(try await monitor.apply { ids in
            asked.withLock { $0.append(ids) }
            return Self.describe(ids)
        })
        #expect(asked.withLock { $0 } == [[5, 6, 7, 500]], "the unknown instances, named in one read")
        #expect(entries.map { "\($0.key.kind) \($0.wait ?? -1) \($0.miss?.rawValue ?? "-")" } == ["control:garage 0 -", "scores 30000 -", "scores 120000 upstream"])

        let clock = Mutex(Self.at(121))
        let directory = try TemporaryDirectory("freshness-watch")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let watch = FreshnessWatch(monitor: monitor, store: store, metrics: metrics, logger: Logger(label: "test"), now: { clock.withLock { Date(timeIntervalSince1970: Double($0.milliseconds) / 1000) } })
        let key = FreshnessBook.Key(bundle: "com.example.app", kind: "scores")
        #expect(watch.look() == [key])
        #expect(watch.look() == [], "warned of once")
        clock.withLock { $0 = Self.at(121 + 1800) }
        #expect(watch.look() == [], "half an hour later: still once")
        let exposition = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(exposition.contains(#"reloadgate_freshness_breached{bundle="com.example.app",kind="scores"} 1"#), "\(exposition)")
        #expect(exposition.contains(#"reloadgate_freshness_breached{bundle="com.example.app",kind="control:garage"} 0"#), "\(exposition)")
        #expect(exposition.contains(#"reloadgate_freshness_within_ratio{bundle="com.example.app",kind="scores",window="1h"} 0.5"#), "\(exposition)")
        #expect(exposition.contains(#"reloadgate_freshness_misses_total{bundle="com.example.app",kind="scores",cause="upstream"} 1"#), "\(exposition)")
        // The objective's minute is a bucket of its own.
        #expect(exposition.contains(#"reloadgate_freshness_wait_seconds_bucket{bundle="com.example.app",kind="scores",le="60.0"} 1"#), "\(exposition)")
        // An hour after the first warning the hour holds nothing any more: no breach, no warning.
        clock.withLock { $0 = Self.at(121 + 3600 + 600) }
        #expect(watch.look() == [])
        let later = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(later.contains(#"reloadgate_freshness_breached{bundle="com.example.app",kind="scores"} 0"#), "\(later)")

        // The report: the day still holds both.
        let report = try #require(monitor.reports(bundle: "com.example.app", kind: "scores", now: Self.at(121)).first)
        #expect(report.objective == FreshnessObjective(quantile: 0.9, within: 60_000))
        #expect(report.day.requests == 2 && report.day.within == 1)
        #expect(report.hours.count == 24 && report.hours.last?.requests == 2)
        #expect(monitor.counts.waiting == 0)
        #expect(monitor.counts.known == 0, "the sweeps forgot the idle instances")
    }

    /// A request the gateway forwarded to a partition it was taking, then decided as that partition's owner
    /// in the same batch (``SchedulerEngine/catchUp(_:)``): its `forwarded` decision comes first and the
    /// owner's after another request's. The owner's counts: instance 5 waits 30 s for the interval,
    /// within the minute (without it, the request would count as decided `forwarded`, which waits for
    /// nothing, and the delivery would be of nobody's request).
    @Test func aRequestForwardedAndDecidedInOneBatchCountsTheOwnersDecision() async throws {
        let scheduling = try Self.scheduling("scheduling:\n  kinds:\n    scores:\n      freshness: {quantile: 0.9, within: 1m}\n")
        let monitor = FreshnessMonitor(scheduling: scheduling, metrics: GatewayMetrics())
        monitor.committed(
            requests: [Self.request(1, at: 0), Self.request(2, at: 5)],
            forwarded: [(1, Self.at(0))],
            decisions: [
                Decision(request: 1, instance: InstanceHandle(5), kind: .forwarded, due: nil, reason: .forwardedToOwner(partition: 5)),
                Decision(request: 2, instance: InstanceHandle(6), kind: .scheduled, due: Self.at(5), reason: .dueNow),
                Decision(request: 1, instance: InstanceHandle(5), kind: .deferred, due: Self.at(30), reason: .waitingForInterval(until: Self.at(30), lastReload: Self.at(-270), minimumInterval: 300)),
            ],
            timelineReloads: [], at: Self.at(5)
        )
        monitor.delivered(instances: [6], at: Self.at(5))
        monitor.delivered(instances: [5], at: Self.at(30))
        let entries = try #require(try await monitor.apply { Self.describe($0) })
        #expect(entries.map { "\($0.key.kind) \($0.wait ?? -1) \($0.miss?.rawValue ?? "-")" }.sorted() == ["scores 0 -", "scores 30000 -"])
        #expect(monitor.counts.waiting == 0)
    }

    /// A request still waiting after a day (its outcome was somewhere the gateway cannot see: another
    /// gateway took its partition over) is forgotten, not counted; an app and kind with nothing in its day
    /// is forgotten too.
    @Test func aRequestWaitingADayIsForgottenNotCounted() async throws {
        let monitor = FreshnessMonitor(scheduling: try Self.scheduling())
        monitor.committed(
            requests: [Self.request(1, at: 0), Self.request(2, at: 1)], forwarded: [],
            decisions: [
                Decision(request: 1, instance: InstanceHandle(5), kind: .deferred, due: Self.at(300), reason: .waitingForInterval(until: Self.at(300), lastReload: Self.at(0), minimumInterval: 300)),
                Decision(request: 2, instance: InstanceHandle(6), kind: .expired, due: nil, reason: .expired(earliest: Self.at(300), expiration: Self.at(1))),
            ],
            timelineReloads: [], at: Self.at(1)
        )
        _ = try await monitor.apply { Self.describe($0) }
        let day = try #require(monitor.reports(now: Self.at(3600)).first?.day)
        #expect(day.requests == 1 && day.misses == [.expired: 1], "the expired one; the one waiting is not counted yet")
        monitor.sweep(now: Self.at(3600))
        #expect(monitor.counts.waiting == 1)
        monitor.sweep(now: Self.at(86_401))
        #expect(monitor.counts == (waiting: 0, known: 0, queued: 0), "forgotten after a day")
        // Nothing was recorded for it: the book's day (slot 0 has left it) holds nothing, and the app and
        // kind is forgotten.
        #expect(monitor.reports(now: Self.at(86_401)).isEmpty)
    }

    /// When the registry does not answer, the facts go back to the queue, in order, and the next apply
    /// counts them as if nothing had happened.
    @Test func factsWaitForARegistryThatDoesNotAnswer() async throws {
        let monitor = FreshnessMonitor(scheduling: try Self.scheduling())
        monitor.committed(
            requests: [Self.request(1, at: 0)], forwarded: [],
            decisions: [Decision(request: 1, instance: InstanceHandle(5), kind: .scheduled, due: Self.at(0), reason: .dueNow)],
            timelineReloads: [], at: Self.at(0)
        )
        struct Away: Error {}
        await #expect(throws: Away.self) { try await monitor.apply { _ in throw Away() } }
        monitor.delivered(instances: [5], at: Self.at(2))
        #expect(monitor.counts.queued == 2, "the decision back in front of the delivery")
        let entries = try #require(try await monitor.apply { Self.describe($0) })
        #expect(entries.map(\.wait) == [2000])
    }

    /// An answer that applies what is queued first (`GET /v1/freshness`) waits for a registry that hangs at
    /// most its deadline; the facts stay queued, and go once the registry answers.
    @Test func applyingNowWaitsForAHungRegistryOnlyItsDeadline() async throws {
        let monitor = FreshnessMonitor(scheduling: try Self.scheduling())
        monitor.committed(
            requests: [Self.request(1, at: 0)], forwarded: [],
            decisions: [Decision(request: 1, instance: InstanceHandle(5), kind: .scheduled, due: Self.at(0), reason: .dueNow)],
            timelineReloads: [], at: Self.at(0)
        )
        let clock = ContinuousClock()
        let started = clock.now
        await monitor.applyNow(within: .milliseconds(300)) { _ in
            try await Task.sleep(for: .seconds(300))
            return []
        }
        // Well under the registry's hang: the deadline (0.3 s) ended the wait, even on a machine so loaded
        // at the start of a parallel run that a task waits long for a thread (34.6 s was seen in CI).
        #expect(started.duration(to: clock.now) < .seconds(120))
        _ = try await eventually(within: .seconds(10)) { monitor.counts.queued == 1 }
        await monitor.applyNow { Self.describe($0) }
        #expect(monitor.counts == (waiting: 1, known: 1, queued: 0))
    }

    /// Past the queue's limit, facts are counted as lost, not held; a fact heavier than the limit alone (a
    /// fan-out over a million instances) is taken into an empty queue.
    @Test func aFullQueueCountsWhatItLoses() async throws {
        let monitor = FreshnessMonitor(scheduling: try Self.scheduling())
        let many = [Int64](repeating: 5, count: FreshnessMonitor.queueLimit - 1)
        monitor.delivered(instances: CompactList(many), at: Self.at(0))
        monitor.delivered(instances: [5], at: Self.at(1))
        monitor.delivered(instances: [5], at: Self.at(2))
        #expect(monitor.takeLost() == 2)
        #expect(monitor.takeLost() == 0)
        #expect(monitor.counts.queued == 1)
        _ = try await monitor.apply { Self.describe($0) }
        #expect(monitor.counts.queued == 0)
        monitor.delivered(instances: [5], at: Self.at(3))
        #expect(monitor.takeLost() == 0, "room again once applied")
        _ = try await monitor.apply { Self.describe($0) }

        // A fan-out's fact over more instances than the limit, into the empty queue: taken, and applied.
        let fanOut = (0..<Int32(FreshnessMonitor.queueLimit + 10)).map { instance in
            Decision(request: 9, instance: InstanceHandle(instance % 50), kind: .scheduled, due: Self.at(4), reason: .dueNow)
        }
        monitor.committed(requests: [Self.request(9, at: 4)], forwarded: [], decisions: fanOut, timelineReloads: [], at: Self.at(4))
        monitor.delivered(instances: [5], at: Self.at(5))
        #expect(monitor.takeLost() == 1, "nothing more while it waits")
        #expect(monitor.counts.queued == 1)
        _ = try await monitor.apply { Self.describe($0) }
        #expect(monitor.counts.known == 50, "its instances named")
        #expect(monitor.counts.waiting == 50 * FreshnessTracker.listed, "each lists what it can, the rest counted")
    }

    /// A turn whose registry fails part way keeps the instances it named: the next turn names only the
    /// rest (a fan-out's million instances take more than one turn's deadline to name).
    @Test func aTurnCutShortKeepsWhatItNamed() async throws {
        let monitor = FreshnessMonitor(scheduling: try Self.scheduling())
        let decisions = (0..<Int32(1200)).map { instance in
            Decision(request: 1, instance: InstanceHandle(instance), kind: .scheduled, due: Self.at(0), reason: .dueNow)
        }
        monitor.committed(requests: [Self.request(1, at: 0)], forwarded: [], decisions: decisions, timelineReloads: [], at: Self.at(0))
        let asked = Mutex<[[Int64]]>([])
        func everyone(_ ids: [Int64]) -> [InstanceDescription] {
            ids.map { InstanceDescription(instance: $0, bundle: "com.example.app", token: "", widgetID: "w", kind: "scores", pushType: "widgets") }
        }
        struct Away: Error {}
        await #expect(throws: Away.self) {
            try await monitor.apply { ids in
                let calls = asked.withLock { asked in
                    asked.append(ids)
                    return asked.count
                }
                if calls > 1 { throw Away() }
                return everyone(ids)
            }
        }
        #expect(monitor.counts == (waiting: 0, known: 500, queued: 1), "the first part named, the fact queued again")
        asked.withLock { $0 = [] }
        let entries = try #require(try await monitor.apply { ids in
            asked.withLock { $0.append(ids) }
            return everyone(ids)
        })
        #expect(entries.isEmpty)
        #expect(asked.withLock { $0.flatMap { $0 } } == Array(500..<1200), "only the rest asked for")
        #expect(monitor.counts == (waiting: 1200, known: 1200, queued: 0))
    }

    /// An instance is named by its app and kind, a control's kind with its push type's prefix, with the
    /// kind's objective; the tracker holds each name once however many instances it names, and forgets it
    /// with its last instance.
    @Test func instancesOfOneAppAndKindShareOneName() throws {
        let scheduling = try Self.scheduling("scheduling:\n  kinds:\n    scores:\n      freshness: {quantile: 0.9, within: 1m}\n")
        let monitor = FreshnessMonitor(scheduling: scheduling)
        let descriptions = [
            ("com.example.a", "scores", "widgets"), ("com.example.a", "scores", "widgets"), ("com.example.b", "scores", "widgets"),
            ("com.example.a", "scores", "widgets"), ("com.example.a", "garage", "controls"),
        ].enumerated().map { index, item in
            InstanceDescription(instance: Int64(index), bundle: item.0, token: "", widgetID: "w", kind: item.1, pushType: item.2)
        }
        var tracker = FreshnessTracker()
        for description in descriptions {
            tracker.register(InstanceHandle(Int32(description.instance)), name: monitor.name(description))
        }
        for description in descriptions {
            let pushType = PushType(rawValue: description.pushType)!
            let name = try #require(tracker.name(of: InstanceHandle(Int32(description.instance))))
            #expect(name.key == FreshnessMonitor.key(bundle: description.bundle, kind: description.kind, pushType: pushType))
            #expect(name.objective == monitor.objective(kind: description.kind, pushType: pushType))
        }
        #expect(tracker.name(of: InstanceHandle(0))?.objective == FreshnessObjective(quantile: 0.9, within: 60_000))
        #expect(tracker.name(of: InstanceHandle(4))?.key.kind == "control:garage")
        #expect(tracker.nameCount == 3, "app a's scores, app b's scores, app a's garage control")
        tracker.remove(InstanceHandle(2), at: Self.at(0))
        tracker.decided([Decision(request: 1, instance: InstanceHandle(0), kind: .scheduled, due: Self.at(0), reason: .dueNow)], received: Self.at(0))
        tracker.sweep(now: Self.at(1))
        #expect(tracker.knownCount == 1 && tracker.nameCount == 1, "the idle instances and their names forgotten")
        #expect(tracker.name(of: InstanceHandle(0))?.key == FreshnessBook.Key(bundle: "com.example.a", kind: "scores"))
    }

    /// The objectives: defaults per push type, a kind's own (as a group or dotted), the environment, and
    /// values refused with the key named.
    @Test func objectivesAreConfiguredPerPushTypeAndKind() throws {
        let defaults = try Self.scheduling()
        #expect(defaults[.widgets].defaultPolicy.freshness == FreshnessObjective(quantile: 0.9, within: 600_000))
        #expect(defaults[.controls].defaultPolicy.freshness == FreshnessObjective(quantile: 0.9, within: 120_000))
        #expect(defaults[.liveactivity].defaultPolicy.freshness == FreshnessObjective(quantile: 0.9, within: 30_000))

        let set = try Self.scheduling("""
            scheduling:
              freshness: {quantile: 0.95, within: 15m}
              kinds:
                scores:
                  freshness: {within: 90s}
              controls:
                freshness:
                  within: 1h
                kinds:
                  garage: {freshness: {quantile: 0.5}}
            """)
        #expect(set[.widgets].defaultPolicy.freshness == FreshnessObjective(quantile: 0.95, within: 900_000))
        #expect(set[.widgets].byKind["scores"]?.freshness == FreshnessObjective(quantile: 0.95, within: 90_000), "unset fields follow the default")
        #expect(set[.controls].defaultPolicy.freshness == FreshnessObjective(quantile: 0.9, within: 3_600_000))
        #expect(set[.controls].byKind["garage"]?.freshness == FreshnessObjective(quantile: 0.5, within: 3_600_000))
        #expect(FreshnessMonitor(scheduling: set).objective(of: FreshnessBook.Key(bundle: "a.b", kind: "control:garage")).quantile == 0.5)

        var configuration = GatewayConfiguration()
        try configuration.apply(environment: ["RELOADGATE_SCHEDULING_LIVEACTIVITY_FRESHNESS_WITHIN": "45", "RELOADGATE_SCHEDULING_FRESHNESS_QUANTILE": "1"])
        #expect(configuration.scheduling[.liveactivity].defaultPolicy.freshness.within == 45_000)
        #expect(configuration.scheduling[.widgets].defaultPolicy.freshness.quantile == 1)
        #expect(configuration.scheduling.set("scores.freshness.within=2m") == nil)
        #expect(configuration.scheduling.resolved[.widgets].byKind["scores"]?.freshness.within == 120_000)
        #expect(configuration.scheduling.set("freshness.quantile=0.8") == nil)
        #expect(configuration.scheduling.resolved[.widgets].defaultPolicy.freshness.quantile == 0.8)

        for (value, key) in [
            ("0", "RELOADGATE_SCHEDULING_FRESHNESS_QUANTILE"), ("1.5", "RELOADGATE_SCHEDULING_FRESHNESS_QUANTILE"),
            ("nan", "RELOADGATE_SCHEDULING_FRESHNESS_QUANTILE"), ("0s", "RELOADGATE_SCHEDULING_FRESHNESS_WITHIN"),
            ("2d", "RELOADGATE_SCHEDULING_FRESHNESS_WITHIN"), ("5 m", "RELOADGATE_SCHEDULING_FRESHNESS_WITHIN"),
            ("99999999999999999999s", "RELOADGATE_SCHEDULING_FRESHNESS_WITHIN"), ("-5", "RELOADGATE_SCHEDULING_FRESHNESS_WITHIN"),
        ] {
            var refused = GatewayConfiguration()
            #expect(throws: ConfigurationError.self, "\(key)=\(value)") { try refused.apply(environment: [key: value]) }
            #expect(refused == GatewayConfiguration(), "a refused value changes nothing")
        }
        #expect(throws: ConfigurationError.self) {
            try Self.scheduling("scheduling:\n  kinds:\n    scores:\n      freshness: {within: 0}\n")
        }
        #expect(throws: ConfigurationError.self) {
            try Self.scheduling("scheduling:\n  kinds:\n    scores:\n      freshness: {wihtin: 5m}\n")
        }
        #expect(SchedulingField.duration("1d") == 86_400_000 && SchedulingField.duration("90") == 90_000 && SchedulingField.duration("") == nil)
    }
}
