/// The reload herd ahead: how many reloads each minute of a window will make, per app and kind.
///
/// WidgetKit reloads a widget at its timeline's planned reload (`.after(date)`, or the last entry with
/// `.atEnd`) and every reload calls the app's backend; widgets whose timelines end in the same minute
/// reload together. The gateway knows every registered instance's next planned reload and every pending
/// reload's due time, so it can say what arrives each minute: counted by the store
/// (``HerdForecast/Count``), laid out here by minute.
///
/// Only each instance's next planned reload is known (the timeline after it is the app's to report), so
/// a forecast is exact for what is registered now and a lower bound for later hours.
public struct HerdForecast: Hashable, Sendable {
    /// Reloads of one app and kind in one minute of the window.
    public struct Count: Hashable, Sendable {
        public var bundle: String
        public var kind: String
        /// The minute's offset from the window's start (0 to `minutes` - 1).
        public var minute: Int
        public var count: Int

        public init(bundle: String, kind: String, minute: Int, count: Int) {
            self.bundle = bundle
            self.kind = kind
            self.minute = minute
            self.count = count
        }
    }

    /// One app and kind's reloads, minute by minute.
    public struct Series: Hashable, Sendable {
        public var bundle: String
        public var kind: String
        /// Reloads per minute, `minutes` of them.
        public var perMinute: [Int]
        public var total: Int { perMinute.reduce(0, +) }
    }

    /// A minute of the window and the reloads in it.
    public struct Minute: Hashable, Sendable {
        public var start: Timestamp
        public var count: Int

        public init(start: Timestamp, count: Int) {
            self.start = start
            self.count = count
        }
    }

    /// An app's minute with more reloads than its threshold.
    public struct Breach: Hashable, Sendable {
        public var bundle: String
        public var minute: Minute
        public var threshold: Int
    }

    /// The first minute's start (a whole minute).
    public let start: Timestamp
    /// How many minutes the window holds.
    public let minutes: Int
    /// Per app and kind, by bundle then kind.
    public let series: [Series]
    /// All apps and kinds together, per minute.
    public let perMinute: [Int]

    public static let minute: Int64 = 60_000
    /// The longest window: two days of minutes.
    public static let maximumMinutes = 2 * 24 * 60

    /// The start of the minute `time` is in: a forecast's window starts there.
    public static func minuteStart(of time: Timestamp) -> Timestamp {
        let milliseconds = time.milliseconds
        return Timestamp(milliseconds: milliseconds - ((milliseconds % minute) + minute) % minute)
    }

    /// Lays out `counts` (minutes outside the window are left out; the same app, kind and minute may come
    /// more than once, from timelines and from pending reloads, and is added up).
    public init(start: Timestamp, minutes: Int, counts: [Count]) {
        precondition((1...Self.maximumMinutes).contains(minutes), "a forecast covers 1 to \(Self.maximumMinutes) minutes")
        self.start = start
        self.minutes = minutes
        var byKey: [Pair: [Int]] = [:]
        var total = [Int](repeating: 0, count: minutes)
        for count in counts where (0..<minutes).contains(count.minute) && count.count > 0 {
            byKey[Pair(bundle: count.bundle, kind: count.kind), default: [Int](repeating: 0, count: minutes)][count.minute] += count.count
            total[count.minute] += count.count
        }
        series = byKey.sorted { ($0.key.bundle, $0.key.kind) < ($1.key.bundle, $1.key.kind) }
            .map { Series(bundle: $0.key.bundle, kind: $0.key.kind, perMinute: $0.value) }
        perMinute = total
    }

    private struct Pair: Hashable {
        var bundle: String
        var kind: String
    }

    /// Every reload in the window.
    public var total: Int { perMinute.reduce(0, +) }

    /// The minute at offset `index`.
    public func minute(_ index: Int) -> Minute {
        Minute(start: Timestamp(milliseconds: start.milliseconds + Int64(index) * Self.minute), count: perMinute[index])
    }

    /// The busiest minute (the earliest of equals), or `nil` when the window holds no reload.
    public var peak: Minute? { busiest(1).first }

    /// The `limit` busiest minutes with reloads, busiest first (equals in time order).
    public func busiest(_ limit: Int) -> [Minute] {
        Self.busiest(perMinute, limit).map(minute)
    }

    /// The indexes of the `limit` largest counts above 0, largest first (equals by index): the busiest
    /// minutes of any count per minute (a forecast's, a series', a replayed trace's).
    public static func busiest<Count: BinaryInteger>(_ counts: [Count], _ limit: Int) -> [Int] {
        Array(counts.indices.filter { counts[$0] > 0 }.sorted { (counts[$0], -$0) > (counts[$1], -$1) }.prefix(max(0, limit)))
    }

    /// Each app's reloads per minute, all its kinds together.
    public var perApp: [String: [Int]] {
        var perApp: [String: [Int]] = [:]
        for series in series {
            perApp[series.bundle] = zip(perApp[series.bundle] ?? [Int](repeating: 0, count: minutes), series.perMinute).map(+)
        }
        return perApp
    }

    /// Each app's minutes above `threshold(bundle)` reloads (all its kinds together), in time order; a
    /// threshold of `nil` or 0 is none.
    public func breaches(threshold: (String) -> Int?) -> [Breach] {
        var breaches: [Breach] = []
        for (bundle, counts) in perApp.sorted(by: { $0.key < $1.key }) {
            guard let limit = threshold(bundle), limit > 0 else { continue }
            for (index, count) in counts.enumerated() where count > limit {
                breaches.append(Breach(bundle: bundle, minute: Minute(start: minute(index).start, count: count), threshold: limit))
            }
        }
        return breaches.sorted { ($0.minute.start, $0.bundle) < ($1.minute.start, $1.bundle) }
    }

    /// The reloads per `width` minutes (the last group may be shorter): a chart's columns.
    public func grouped(by width: Int) -> [Int] { Self.grouped(perMinute, by: width) }

    /// `counts` added up `width` at a time (the last group may be shorter).
    public static func grouped(_ counts: [Int], by width: Int) -> [Int] {
        let width = max(1, width)
        return stride(from: 0, to: counts.count, by: width).map { counts[$0..<min(counts.count, $0 + width)].reduce(0, +) }
    }
}
