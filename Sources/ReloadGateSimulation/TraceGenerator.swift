public import ReloadGateCore

/// Synthetic traces for trying policies without traffic of one's own.
///
/// `sports-evening`: a day of N devices with W widgets each (kinds in turn: `scores`, `news`, `weather`).
/// Every device follows one of M matches, kicked off between 18:00 and 20:00 UTC and lasting 110 minutes;
/// each match's score changes K times at random moments. The sender pushes to the followers' `scores`
/// widgets (priority 10) on every change, or, with ``Strategy/everyMinutes(_:)``, every N minutes while
/// the match runs. Besides, each device gets P `news` pushes (priority 5) spread
/// over the day, most in the evening. `weather` widgets have a timeline that reloads within the first
/// hour; `news` widgets one that reloads at a random time of the day; `scores` widgets none (they depend
/// on pushes).
public struct TraceGenerator: Sendable {
    public enum Strategy: Sendable, Hashable {
        /// A push on every score change.
        case everyChange
        /// A push every this many minutes from kickoff to the final whistle (live updates of the match
        /// clock and score, whether the score changed or not).
        case everyMinutes(Int)
    }

    public struct Options: Sendable, Hashable {
        public var devices = 10_000
        public var widgetsPerDevice = 2
        public var matches = 50
        public var changesPerMatch = 6
        public var newsPerDevice = 2
        public var strategy = Strategy.everyChange
        public var seed: UInt64 = 1
        /// Midnight UTC of the day the trace covers.
        public var day = Timestamp(seconds: 1_795_651_200)

        public init() {}

        /// The limits a command line accepts (handles are 32-bit; a day of requests must fit in memory).
        public static let deviceRange = 1...10_000_000
        public static let widgetRange = 1...8
        public static let matchRange = 1...100_000
        public static let changeRange = 0...1_000
        public static let newsRange = 0...1_000
    }

    public static let kinds = ["scores", "news", "weather"]

    /// A match's length, in milliseconds (110 minutes: two halves, the break and stoppage time).
    static let matchLength: Int64 = 6_600_000

    public let options: Options
    /// Every request as (time of day in ms << 35 | kind << 32 | device), in time order.
    let requests: [UInt64]

    public init(_ options: Options) {
        self.options = options
        var random = SplitMix64(seed: options.seed)
        var packed: [UInt64] = []
        let devices = options.devices
        let matches = max(1, min(options.matches, devices))
        let hasScores = options.widgetsPerDevice >= 1
        let hasNews = options.widgetsPerDevice >= 2
        // Score pushes: per match, the moments its score changed, then one push per follower.
        if hasScores {
            let followersPerMatch = devices / matches + 1
            packed.reserveCapacity(followersPerMatch * matches * options.changesPerMatch + devices * options.newsPerDevice)
            for match in 0..<matches {
                let kickoff = Int64(18 * 3_600_000) + Int64.random(in: 0..<7_200_000, using: &random)
                var changes = (0..<options.changesPerMatch).map { _ in kickoff + Int64.random(in: 0..<Self.matchLength, using: &random) }
                changes.sort()
                var moments: [Int64] = []
                switch options.strategy {
                case .everyChange:
                    moments = changes
                case .everyMinutes(let minutes):
                    let period = Int64(max(1, minutes)) * 60_000
                    var moment = kickoff + period
                    while moment <= kickoff + Self.matchLength {
                        moments.append(moment)
                        moment += period
                    }
                }
                for moment in moments where moment < 86_400_000 {
                    var device = match
                    while device < devices {
                        packed.append(UInt64(moment) << 35 | UInt64(device))
                        device += matches
                    }
                }
            }
        }
        // News pushes over the day: a third in the evening peak (18:00-23:00), the rest at any time.
        if hasNews {
            for device in 0..<devices {
                for _ in 0..<options.newsPerDevice {
                    let time =
                        Int.random(in: 0..<3, using: &random) == 0
                        ? Int64.random(in: 18 * 3_600_000..<23 * 3_600_000, using: &random)
                        : Int64.random(in: 0..<86_400_000, using: &random)
                    packed.append(UInt64(time) << 35 | 1 << 32 | UInt64(device))
                }
            }
        }
        packed.sort()
        requests = packed
    }

    /// Requests the trace holds.
    public var requestCount: Int { requests.count }
    /// Widget instances the trace registers.
    public var instanceCount: Int { options.devices * options.widgetsPerDevice }

    /// The events in time order: registrations and timelines at midnight, then the requests.
    public var events: Events { Events(generator: self) }

    /// The instance of widget `index` of `device`.
    func instance(device: Int, widget: Int) -> InstanceHandle {
        InstanceHandle(Int32(device * options.widgetsPerDevice + widget))
    }

    /// The names a written trace uses: devices `device-N`, widgets `w0`, `w1`, ...
    public func names() -> TraceNames {
        var names = TraceNames()
        for device in 0..<options.devices {
            let handle = names.device("device-\(device)")
            for widget in 0..<options.widgetsPerDevice { _ = names.instance(device: handle, widget: "w\(widget)") }
        }
        return names
    }

    public struct Events: Sequence, Sendable {
        let generator: TraceGenerator

        public func makeIterator() -> Iterator { Iterator(generator: generator) }

        public struct Iterator: IteratorProtocol, Sendable {
            let generator: TraceGenerator
            var phase = 0
            var position = 0
            var random: SplitMix64

            init(generator: TraceGenerator) {
                self.generator = generator
                self.random = SplitMix64(seed: generator.options.seed ^ 0x5EED)
            }

            public mutating func next() -> TraceEvent? {
                let options = generator.options
                let day = options.day
                let widgets = options.widgetsPerDevice
                switch phase {
                case 0:
                    // Registrations.
                    guard position < options.devices else {
                        phase = 1
                        position = 0
                        return next()
                    }
                    let device = position
                    position += 1
                    return .registration(
                        at: day,
                        device: DeviceHandle(Int32(device)),
                        widgets: (0..<widgets).map {
                            TraceWidget(instance: generator.instance(device: device, widget: $0), kind: TraceGenerator.kinds[$0 % 3])
                        }
                    )
                case 1:
                    // Timelines of the news and weather widgets.
                    while position < options.devices * widgets {
                        let device = position / widgets
                        let widget = position % widgets
                        position += 1
                        switch widget % 3 {
                        case 1:
                            let planned = day.adding(milliseconds: Int64.random(in: 0..<86_400_000, using: &random))
                            return .timeline(at: day, instance: generator.instance(device: device, widget: widget), plannedReload: planned)
                        case 2:
                            let planned = day.adding(milliseconds: Int64.random(in: 0..<3_600_000, using: &random))
                            return .timeline(at: day, instance: generator.instance(device: device, widget: widget), plannedReload: planned)
                        default:
                            continue
                        }
                    }
                    phase = 2
                    position = 0
                    return next()
                default:
                    guard position < generator.requests.count else { return nil }
                    let packed = generator.requests[position]
                    position += 1
                    let news = (packed >> 32) & 1 == 1
                    let device = Int(packed & 0xFFFF_FFFF)
                    return .request(
                        TraceRequest(
                            at: day.adding(milliseconds: Int64(packed >> 35)),
                            source: .push,
                            targets: .instances([generator.instance(device: device, widget: news ? 1 : 0)]),
                            priority: news ? .low : .high
                        )
                    )
                }
            }
        }
    }
}
