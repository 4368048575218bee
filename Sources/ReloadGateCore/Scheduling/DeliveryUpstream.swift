/// One widget (or control) push as it leaves the gateway: what an upstream needs to send it (docs/DESIGN.md,
/// Delivery).
public struct OutgoingPush: Hashable, Sendable {
    /// The push's `apns-id` (lower-case UUID), kept across retries so Apple and logs can match them.
    public var apnsID: String
    public var bundle: BundleID
    public var deviceToken: DeviceToken
    /// A device's widgets, or one control (`apns-push-type: controls`: always priority 10, and
    /// `apns-expiration: 0`, now or never, at the moment it is sent).
    public var pushType: PushType
    /// The widget ids the push reloads (WidgetKit reloads all push-enabled widgets of the app).
    public var widgetIDs: [String]
    /// The requests the push serves (the first 100 of each widget's pending reload).
    public var requests: CompactList<RequestID>
    /// How many requests the push serves in all.
    public var requestCount: Int
    public var priority: Priority
    public var expiration: Timestamp?
    /// When the scheduler released it.
    public var releasedAt: Timestamp
    /// The body, for a push type that carries content (a Live Activity's merged update); `nil`: the
    /// type's fixed body.
    public var payload: [UInt8]? = nil

    public init(
        apnsID: String,
        bundle: BundleID,
        deviceToken: DeviceToken,
        pushType: PushType = .widgets,
        widgetIDs: [String],
        requests: CompactList<RequestID>,
        requestCount: Int? = nil,
        priority: Priority,
        expiration: Timestamp?,
        releasedAt: Timestamp
    ) {
        self.apnsID = apnsID
        self.bundle = bundle
        self.deviceToken = deviceToken
        self.pushType = pushType
        self.widgetIDs = widgetIDs
        self.requests = requests
        self.requestCount = requestCount ?? requests.count
        self.priority = priority
        self.expiration = expiration
        self.releasedAt = releasedAt
    }

    /// The APNs topic of the push: the bundle and its push type's ``PushTypeDescriptor/topicSuffix``.
    public var topic: String { bundle.topic(for: pushType) }
}

/// What became of one attempt to send a push.
public enum DeliveryOutcome: Hashable, Sendable {
    /// Accepted (Apple's 200, or written to the outbox).
    case sent
    /// Refused for good, with the reason (for example `PayloadTooLarge`); not retried.
    case failed(reason: String)
    /// The device token is no longer valid (`410 Unregistered` with Apple's timestamp, or
    /// `400 BadDeviceToken`): not retried, and the device is marked unregistered unless it registered
    /// again after `since`.
    case deviceInvalid(reason: String, since: Timestamp?)
    /// Not sent now; try again at the earliest after `retryAfter` seconds (429, 5xx, a connection that
    /// could not be opened, a request refused by GOAWAY before Apple processed it).
    case retry(reason: String, retryAfter: Int64?)
    /// Sent, but no answer came (a reset stream, a connection lost, a timeout): Apple may have delivered
    /// it. Sent again (at least once), and counted.
    case unknown(reason: String)

    /// Whether the push reached Apple or may have (`sent`, `unknown`): a Live Activity's device may show its
    /// content. Apple's refusals (`failed`, `device-invalid`, `retry`) showed nothing.
    public var mayHaveReached: Bool {
        switch self {
        case .sent, .unknown: true
        case .failed, .deviceInvalid, .retry: false
        }
    }

    /// `sent`, `failed`, `device-invalid`, `retry` or `unknown` (logs and metrics).
    public var label: String {
        switch self {
        case .sent: "sent"
        case .failed: "failed"
        case .deviceInvalid: "device-invalid"
        case .retry: "retry"
        case .unknown: "unknown"
        }
    }

    /// The reason of an outcome other than `sent`.
    public var reason: String? {
        switch self {
        case .sent: nil
        case .failed(let reason), .deviceInvalid(let reason, _), .retry(let reason, _), .unknown(let reason): reason
        }
    }

    /// Whether the attempt ended without an answer.
    public var isUnknown: Bool {
        if case .unknown = self { return true }
        return false
    }
}

/// Where released pushes go: the outbox (the embedded default) or Apple's push service. The delivery
/// service calls it and records the outcome; an upstream only sends.
public protocol DeliveryUpstream: Sendable {
    /// Sends one push and says what became of it. Throwing counts as `unknown` (it may have been sent).
    func send(_ push: OutgoingPush) async throws -> DeliveryOutcome
    /// Sends several pushes together and says what became of each, in their order; an error in place of
    /// an outcome counts as `unknown`. The default sends them one by one with ``send(_:)``, at once.
    func send(batch pushes: [OutgoingPush]) async -> [Result<DeliveryOutcome, any Error>]

    /// Releases connections when the gateway stops (after the last `send`).
    func close() async

    /// Returns once a `send` now would go out at once: connections that can be opened are open. The
    /// delivery worker waits for this before taking a slot of `upstream.requestsPerSecond`.
    func ready() async

    /// Of the apns-ids of deliveries a stop left unfinished (their attempt's outcome is unknown), those
    /// this upstream knows it took: the worker marks them `sent` instead of sending them again. The
    /// default knows none (Apple does not say); the outbox finds their lines.
    func alreadySent(_ apnsIDs: Set<String>) async -> Set<String>

    /// Whether what the upstream took is its own durable record (the outbox: a delivery's line, synced
    /// before `send` returns), so that ``alreadySent(_:)`` knows every delivery it took. The worker then
    /// writes no `sending` mark before an attempt: after a crash it asks ``alreadySent(_:)`` about every
    /// delivery an earlier run released, `pending` ones included. The default is `false` (Apple keeps no
    /// record the gateway can read: the mark is what says a push may have reached it).
    var recordsWhatItTakes: Bool { get }

    /// Whether the upstream uses a push's ``OutgoingPush/widgetIDs`` (the outbox writes them in its line).
    /// Apple's request carries none, so for it the worker does not read them with the address. The
    /// default is `false`.
    var namesWidgets: Bool { get }
}

extension DeliveryUpstream {
    public func send(batch pushes: [OutgoingPush]) async -> [Result<DeliveryOutcome, any Error>] {
        await withTaskGroup(of: (Int, Result<DeliveryOutcome, any Error>).self) { group in
            for (index, push) in pushes.enumerated() {
                group.addTask {
                    // The outcome is awaited before the tuple is formed: Swift 6.3's optimizer can lose the
                    // part of a task's tuple result written before a suspension (swiftlang/swift#91911);
                    // `return (index, .success(try await send(push)))` came back with a garbage index in
                    // release builds.
                    let outcome: Result<DeliveryOutcome, any Error>
                    do { outcome = .success(try await send(push)) } catch { outcome = .failure(error) }
                    return (index, outcome)
                }
            }
            var outcomes = [Result<DeliveryOutcome, any Error>](repeating: .failure(CancellationError()), count: pushes.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
    }

    public func close() async {}
    public func ready() async {}
    public func alreadySent(_ apnsIDs: Set<String>) async -> Set<String> { [] }
    public var recordsWhatItTakes: Bool { false }
    public var namesWidgets: Bool { false }
}
