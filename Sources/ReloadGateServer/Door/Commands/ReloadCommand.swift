import ReloadGateCore
import ReloadGateStore

/// A reload request, a push or a webhook call, as the listener or the route hands it to the door
/// (``GatewayDoor/reload(_:render:)``, ``GatewayDoor/enqueue(_:render:reply:)``): targets resolved,
/// credentials checked. The door decides it with the scheduler, checks its idempotency key, commits it
/// in the next group commit and answers.
struct ReloadCommand: Sendable {
    var app: App
    var source: RecordedRequest.Source
    var targets: [Int64]
    /// The device of each target (same order): on a shared store, targets whose device's partition another
    /// gateway holds are forwarded to it.
    var targetDevices: [Int64]
    var priority: Priority
    /// `nil`: none; ``Timestamp/nowOrNever`` for `expiration: 0` or a date already past.
    var expiration: Timestamp?
    var collapseID: String?
    var team: String?
    var exempt: Bool
    /// The request as sent, for `explain`.
    var summary: String
    /// A push's apns-id, for `explain`.
    var apnsID: String? = nil
    var received: Timestamp
    /// A Live Activity push's event and timestamp.
    var activity: ActivityContent? = nil
    var idempotency: Idempotency?

    /// An idempotency key, the hash of the body it came with, and how long its answer is kept: a webhook
    /// call's `idempotency-key`, or a push's `apns-id` for its device (``push(apnsID:device:)``).
    struct Idempotency: Hashable, Sendable {
        var key: String
        var bodyHash: [UInt8]
        /// Milliseconds.
        var window: Int64 = IdempotentAnswer.webhookWindow
        /// Whether the answer may be kept in the request's row (a push's apns-id, on a store that keeps
        /// answers there): the row is written anyway, where a row of the idempotency table is one more
        /// write per push (``KeptAnswerIndex``).
        var keptWithRequest = false

        /// What every push's key begins with.
        static let pushKeyPrefix = "apns-id "

        /// A push's `apns-id` as the sender sent it (lower-cased): the same id for the same device within
        /// ``IdempotentAnswer/pushRetryWindow`` is the same push, whatever its body (docs/APNS.md, "A retried
        /// apns-id"). A device is one token of one app.
        static func push(apnsID: String, device: Int64) -> Idempotency {
            Idempotency(
                key: "\(pushKeyPrefix)\(device) \(StoredAPNsID.of(apnsID))", bodyHash: [], window: IdempotentAnswer.pushRetryWindow, keptWithRequest: true
            )
        }
    }
}
