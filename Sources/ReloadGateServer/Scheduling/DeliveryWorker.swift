import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore

/// Sends released deliveries through the upstream and records each one's way through the store:
/// pending -> sending -> sent | failed (DESIGN.md, Durability).
///
/// A delivery the upstream cannot take now (`retry`, or an error) goes back to `pending` and is tried
/// again after an exponential backoff with jitter (1 s doubling to 60 s, or the upstream's
/// `retryAfter`); one that stays in `pending` or `sending` when the gateway stops is sent again on the
/// next start with the same apns-id.
struct DeliveryWorker: Sendable {
    let store: SQLiteStore
    let upstream: any DeliveryUpstream
    /// Where state changes go (written in batches).
    let states: DeliveryStateLog
    let now: @Sendable () -> Date
    let logger: Logger
    /// Forgotten when a device becomes invalid, so its next push is answered `Unregistered`.
    var pushDevices: PushDeviceCache?
    /// Deliveries in flight at once (toward Apple: bounded concurrency).
    var concurrency = 1
    /// Attempts of one delivery before it is `failed` with the last reason.
    var maximumAttempts = 10
    /// The first wait before a retry; it doubles with each attempt.
    var firstBackoff: Duration = .seconds(1)
    /// Longest wait between two attempts of one delivery.
    var maximumBackoff: Duration = .seconds(60)

    /// Sends the deliveries of `deliveries`, at most ``concurrency`` at once, until the stream ends or
    /// `isStopping` says so.
    func run(_ deliveries: AsyncStream<RecordedDelivery>, isStopping: @escaping @Sendable () async -> Bool) async {
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for await delivery in deliveries {
                if await isStopping() { break }
                if inFlight >= concurrency {
                    await group.next()
                    inFlight -= 1
                }
                inFlight += 1
                group.addTask { await send(delivery, isStopping: isStopping) }
            }
        }
    }

    /// Sends one delivery, retrying while the upstream says so and the gateway runs.
    func send(_ delivery: RecordedDelivery, isStopping: @Sendable () async -> Bool) async {
        var attempt = 0
        while true {
            let outcome = await attemptOnce(delivery)
            guard case .retry(let reason, let retryAfter) = outcome else { return }
            attempt += 1
            if attempt >= maximumAttempts {
                logger.warning("delivery failed after retries", metadata: ["apns-id": "\(delivery.apnsID)", "reason": "\(reason)"])
                record(delivery, .failed, error: "\(reason) (after \(attempt) attempts)")
                return
            }
            let backoff = backoff(attempt: attempt, retryAfter: retryAfter)
            logger.warning(
                "delivery will be retried",
                metadata: ["apns-id": "\(delivery.apnsID)", "reason": "\(reason)", "in": "\(backoff)"]
            )
            record(delivery, .pending, error: reason)
            // Sleeps in short steps so that a graceful shutdown does not wait for a long backoff; a
            // delivery left pending is sent on the next start.
            let deadline = ContinuousClock.now.advanced(by: backoff)
            while ContinuousClock.now < deadline {
                if await isStopping() { return }
                do {
                    try await Task.sleep(for: min(.milliseconds(100), ContinuousClock.now.duration(to: deadline)))
                } catch {
                    return
                }
            }
        }
    }

    private func attemptOnce(_ delivery: RecordedDelivery) async -> DeliveryOutcome {
        let address: PushAddress?
        do {
            address = try store.pushAddress(device: delivery.device, instances: delivery.instances)
        } catch {
            return .retry(reason: "store: \(error)", retryAfter: nil)
        }
        guard let address else {
            record(delivery, .failed, error: "the device is no longer registered")
            return .failed(reason: "device gone")
        }
        if let expiration = delivery.expiration, expiration < Timestamp(now()) {
            record(delivery, .failed, error: "expired before it could be sent")
            return .failed(reason: "expired")
        }
        record(delivery, .sending, error: nil)
        let push = OutgoingPush(
            apnsID: delivery.apnsID,
            bundle: address.bundle,
            deviceToken: address.token,
            widgetIDs: address.widgetIDs,
            requests: delivery.requests,
            requestCount: delivery.requestCount,
            priority: delivery.priority,
            expiration: delivery.expiration,
            releasedAt: delivery.released
        )
        let outcome: DeliveryOutcome
        do {
            outcome = try await upstream.send(push)
        } catch {
            return .retry(reason: "\(error)", retryAfter: nil)
        }
        switch outcome {
        case .sent:
            record(delivery, .sent, error: nil)
        case .failed(let reason):
            logger.warning("delivery failed", metadata: ["apns-id": "\(delivery.apnsID)", "reason": "\(reason)"])
            record(delivery, .failed, error: reason)
        case .deviceInvalid(let reason, let since):
            let time = since.map { Date(timeIntervalSince1970: Double($0.milliseconds) / 1000) } ?? now()
            do {
                if try store.markDeviceInvalid(device: delivery.device, since: time) {
                    pushDevices?.invalidate()
                    logger.info("device unregistered by Apple", metadata: ["device": "\(address.token.shortened)", "reason": "\(reason)"])
                }
            } catch {
                logger.error("cannot mark a device unregistered", metadata: ["error": "\(error)"])
            }
            record(delivery, .failed, error: reason)
        case .retry:
            break
        }
        return outcome
    }

    private func record(_ delivery: RecordedDelivery, _ state: RecordedDelivery.State, error: String?) {
        states.record(delivery.apnsID, state, error: error)
    }

    /// The first backoff (1 s), doubled per attempt up to the maximum, each with up to 20% jitter; at
    /// least `retryAfter` seconds.
    func backoff(attempt: Int, retryAfter: Int64?) -> Duration {
        let first = Double(firstBackoff.components.seconds) * 1000 + Double(firstBackoff.components.attoseconds) / 1e15
        let maximum = Double(maximumBackoff.components.seconds) * 1000
        let base = min(first * Double(1 << min(attempt - 1, 16)), maximum)
        let jittered = base * Double.random(in: 0.8...1.0)
        return .milliseconds(Int64(max(jittered, Double(retryAfter ?? 0) * 1000)))
    }
}
