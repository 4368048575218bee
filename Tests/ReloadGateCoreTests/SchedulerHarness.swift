import ReloadGateCore

/// A scheduler with a fake clock and a log of everything it released, for the rule tests.
struct SchedulerHarness {
    var scheduler: ReloadScheduler
    var nextID: RequestID = 1
    var deliveries: [Delivery] = []
    var timelineReloads: [TimelineReload] = []
    /// The last state each tick returned for the write-through, by instance (`nil`: removed).
    var written: [Int32: InstanceSnapshot?] = [:]
    var expired: [ExpiredReload] = []
    /// Every instance's releases in the order they came, each with the tick that released it (ticks
    /// count up from 1; a request decided after tick n is released in a later one).
    var releases: [Int32: [(tick: Int, requests: Set<RequestID>)]] = [:]
    private(set) var ticks = 0

    /// 2026-09-23T14:00:00Z: a round time so explanations read well.
    static let start = Timestamp(seconds: 1_790_172_000)

    init(configuration: SchedulerConfiguration = SchedulerConfiguration()) {
        scheduler = ReloadScheduler(configuration: configuration)
    }

    static func at(minutes: Double) -> Timestamp {
        start.adding(milliseconds: Int64(minutes * 60_000))
    }

    mutating func register(_ instance: Int32, device: Int32, kind: String = "scores", pushType: PushType = .widgets, frequentUpdates: Bool = false) {
        scheduler.register(InstanceHandle(instance), device: DeviceHandle(device), kind: kind, pushType: pushType, frequentUpdates: frequentUpdates)
    }

    /// Sends a request at `minutes` after the start, after ticking up to then.
    @discardableResult
    mutating func push(
        _ targets: [Int32],
        atMinutes minutes: Double,
        priority: Priority = .high,
        expiration: Timestamp? = nil,
        collapseID: String? = nil,
        exempt: Bool = false,
        activity: ActivityContent? = nil
    ) -> [Decision] {
        let now = Self.at(minutes: minutes)
        tick(to: now)
        defer { nextID += 1 }
        return scheduler.receive(
            ReloadRequest(
                id: nextID,
                targets: targets.map(InstanceHandle.init),
                priority: priority,
                expiration: expiration,
                collapseID: collapseID,
                team: collapseID == nil ? nil : "TEAM",
                exempt: exempt,
                received: now,
                activity: activity
            )
        )
    }

    /// Ticks at every event up to `time`, as the scheduler service does.
    mutating func tick(to time: Timestamp) {
        while let next = scheduler.nextWakeUp, next <= time {
            record(scheduler.tick(now: next))
        }
        record(scheduler.tick(now: time))
    }

    mutating func tick(toMinutes minutes: Double) { tick(to: Self.at(minutes: minutes)) }

    private mutating func record(_ output: TickOutput) {
        ticks += 1
        deliveries += output.deliveries
        timelineReloads += output.timelineReloads
        expired += output.expired
        for write in output.instanceStates { written[write.instance.rawValue] = write.snapshot }
        for delivery in output.deliveries {
            for reloaded in delivery.reloaded {
                releases[reloaded.instance.rawValue, default: []].append((ticks, Set(delivery.requests)))
            }
        }
        for reload in output.timelineReloads {
            releases[reload.instance.rawValue, default: []].append((ticks, Set(reload.servedRequests)))
        }
        for expiry in output.expired {
            releases[expiry.instance.rawValue, default: []].append((ticks, Set(expiry.requests)))
        }
    }

    /// Minutes after the start of each delivery.
    var deliveryMinutes: [Double] {
        deliveries.map { Double($0.at.milliseconds - Self.start.milliseconds) / 60_000 }
    }
}
