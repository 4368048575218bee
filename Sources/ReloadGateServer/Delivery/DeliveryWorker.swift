import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import ServiceLifecycle

/// Sends released deliveries through the upstream and reports each one's way to the door (which writes
/// it): pending -> sending -> sent | failed (docs/DESIGN.md, Durability); with an upstream whose own record
/// says what it took (the outbox), pending -> sent, no `sending` mark. Apple's 410 goes to the door too,
/// which marks the device unregistered and drops its pending reloads.
///
/// A delivery the upstream cannot take now (`retry`), or whose attempt ended without an answer
/// (`unknown`: a reset stream, a lost connection, a timeout, an error), goes back to `pending` and is
/// tried again after an exponential backoff with jitter (1 s doubling to 60 s, or the upstream's
/// `retryAfter`), at most `maximumAttempts` times. Attempts without an answer are counted in the store
/// (`unknownOutcomes`): only those deliveries can have reached Apple twice. One that stays in `pending`
/// or `sending` when the gateway stops is sent again on the next start with the same apns-id.
struct DeliveryWorker: Sendable {
    /// Where deliveries' addresses are read.
    let store: any GatewayStoreReading
    let upstream: any DeliveryUpstream
    /// Where state changes and 410s go (the door; state changes are written in batches).
    let states: any DeliveryReports
    let now: @Sendable () -> Date
    let logger: Logger
    /// Deliveries in flight at once (toward Apple: bounded concurrency).
    var concurrency = 1
    /// First attempts sent together (one commit of their marks, one hand-over to the upstream) when
    /// requests are not paced: ``groupSize`` when set, else a quarter of ``concurrency``, at most 64, so
    /// that several groups are in flight while the next one's marks commit.
    var batchSize: Int { groupSize ?? max(1, min(64, concurrency / 4)) }
    /// The size of a group of first attempts, when not derived from ``concurrency`` (the outbox: one
    /// group as large as the concurrency, in flight alone, so that lines are written in release order).
    var groupSize: Int?
    /// The outbox's group: lines written with one write and one sync.
    static let outboxGroup = 256
    /// Attempts of one delivery before it is `failed` with the last reason.
    var maximumAttempts = 10
    /// The first wait before a retry; it doubles with each attempt.
    var firstBackoff: Duration = .seconds(1)
    /// Longest wait between two attempts of one delivery.
    var maximumBackoff: Duration = .seconds(60)
    /// How long after its release a delivery for now or never (`apns-expiration: 0`) may still be tried
    /// again after a failure that asks for a retry (docs/APNS.md). Every delivery's first attempt is made
    /// whenever the worker gets to it, as Apple tries every push it accepted at least once; retries stop at
    /// the delivery's expiration, or this long after the release of one for now or never.
    static let nowOrNeverRetries: Duration = .seconds(30)
    /// Spaces requests to the push service (`upstream.requestsPerSecond`); `nil`: no limit.
    var rateLimiter: RateLimiter<ContinuousClock>?
    /// The clock retries wait on (a manual one in tests).
    var clock: any Clock<Duration> = ContinuousClock()
    var metrics = GatewayMetrics()
    /// This gateway's partition leases when several gateways share one database (``ClusterMembership``);
    /// `nil` with one gateway, which sends every delivery. A delivery of a partition no longer held is
    /// left behind (``DeliveryLeases/leaveBehind(_:)``) for the partition's new owner, which sends it again
    /// with the same apns-id. Asked before the `sending` mark and after it, where the attempt begins.
    var leases: (any DeliveryLeases)?
    /// What the worker holds now: a delivery handed over again while held is not taken twice.
    let held = HeldDeliveries()
    /// Called when the worker holds nothing any more, and hands no batch out, after at least
    /// ``burstSize`` deliveries ended (a herd sent): the memory upkeep looks at the heap then
    /// (``HeapTrims/lookSoon()``).
    var burstEnded: @Sendable () -> Void = {}
    /// The deliveries a burst (``HeldDeliveries/endHandingOut()``) ends at least for ``burstEnded`` to be
    /// called: some tens of megabytes of heap freed, near the upkeep's threshold (``HeapTrims/threshold``).
    var burstSize = 50_000

    /// Sends `unfinished` (deliveries left by the last run), then the deliveries of `batches`, at most
    /// ``concurrency`` at once, until the stream ends or the gateway shuts down gracefully (ServiceLifecycle's
    /// shutdown, which the worker's tasks inherit from the service that runs it). The addresses of a batch
    /// are read from the store together.
    func run(
        unfinished: [RecordedDelivery] = [],
        _ batches: AsyncStream<[RecordedDelivery]>
    ) async {
        // A delivery holds a slot from before its first attempt until it ends. A group gives back the
        // slots of the deliveries its first attempts ended, and each delivery it tries again keeps one
        // (a delivery waiting a minute for its retry must not hold its whole group's slots).
        let slots = DeliverySlots(concurrency)
        let started = Timestamp(now())
        await withDiscardingTaskGroup { group in
            func add(_ handed: consuming [RecordedDelivery]) async -> Bool {
                let given = held.take(handed)
                _ = consume handed
                var deliveries = given
                let interrupted = Set(given.filter { interruptedBefore(started, $0) }.map(\.apnsID))
                if !interrupted.isEmpty {
                    // Being sent when its last sender stopped (this gateway's last run, or the partition's
                    // last owner). Taken by the upstream already (the outbox has its line): sent.
                    // Otherwise Apple may have it: sent again, with the same apns-id.
                    let taken = await upstream.alreadySent(interrupted)
                    for delivery in given where interrupted.contains(delivery.apnsID) {
                        if taken.contains(delivery.apnsID) {
                            // (The attempt of a `pending` one was counted by no record.)
                            finish(delivery, .sent, error: nil, outcome: .sent, attempted: delivery.state == .pending)
                        } else if delivery.state == .sending {
                            // Its attempt's outcome is unknown. (A `pending` one without a line in the outbox
                            // was never taken: it is sent with nothing unknown about it.)
                            states.record(DeliveryStateChange(
                                apnsID: delivery.apnsID, state: .pending, error: "the gateway stopped while sending it", unknownOutcome: true
                            ))
                        }
                    }
                    if !taken.isEmpty {
                        logger.notice("deliveries interrupted by the last stop were already taken by the upstream", metadata: ["deliveries": "\(taken.count)"])
                        deliveries.removeAll { taken.contains($0.apnsID) }
                    }
                }
                for chunk in deliveries.chunks(of: 256) {
                    if Task.isShuttingDownGracefully { return false }
                    let addresses = try? await store.pushAddresses(chunk.map { ($0.device, instancesToName($0)) })
                    let lookups = chunk.indices.map { index in addresses.map { Lookup.found($0[index - chunk.startIndex]) } ?? .unknown }
                    if rateLimiter == nil {
                        // First attempts go out in groups: one commit of their `sending` marks and one
                        // hand-over to the connection's event loop per group.
                        for part in Array(zip(chunk, lookups)).chunks(of: batchSize) {
                            let items = Array(part)
                            await slots.acquire(items.count)
                            group.addTask {
                                let retries = await sendTogether(items)
                                slots.release(items.count - retries.count)
                                await withDiscardingTaskGroup { group in
                                    for retry in retries {
                                        group.addTask {
                                            await self.retry(retry)
                                            slots.release(1)
                                        }
                                    }
                                }
                            }
                        }
                    } else {
                        // Paced: each request takes its own turn.
                        for (delivery, lookup) in zip(chunk, lookups) {
                            await slots.acquire(1)
                            group.addTask {
                                await send(delivery, address: lookup)
                                slots.release(1)
                            }
                        }
                    }
                }
                return true
            }
            // The batch is consumed by `add`, whose own arrays end with it: once it returns, the batch's
            // storage is freed, and a burst can end (``HeldDeliveries/endHandingOut()``).
            func handOut(_ batch: consuming [RecordedDelivery]) async -> Bool {
                held.beginHandingOut()
                let going = await add(batch)
                if let ended = held.endHandingOut() { endOfBurst(ended) }
                return going
            }
            guard await handOut(unfinished) else { return }
            for await batch in batches {
                guard await handOut(batch) else { return }
            }
        }
    }

    /// The instances whose widget ids are read with a delivery's address: none when the upstream does
    /// not use them (Apple's request carries none), which spares the store a read of the device's widgets.
    private func instancesToName(_ delivery: RecordedDelivery) -> CompactList<Int64> {
        upstream.namesWidgets ? delivery.instances : []
    }

    /// Whether `delivery` may have been taken by the upstream before this worker started at `started`
    /// (its attempt's outcome unknown): marked `sending`, or, with an upstream that records what it takes
    /// (no `sending` mark is written for it), released before this run.
    func interruptedBefore(_ started: Timestamp, _ delivery: RecordedDelivery) -> Bool {
        delivery.state == .sending || (upstream.recordsWhatItTakes && delivery.released < started)
    }

    /// Writes the `sending` marks of `deliveries` durably before their attempt (after a crash, `sending`
    /// means they may have reached the push service), unless the upstream's own record says what it took.
    private func markSending(_ deliveries: [RecordedDelivery]) async throws {
        guard !upstream.recordsWhatItTakes else { return }
        try await states.recordDurably(deliveries.map { DeliveryStateChange(apnsID: $0.apnsID, state: .sending) })
    }

    /// A delivery handed back by a group to be tried again alone: after its first attempt's outcome,
    /// or from the start when its address could not be read with the group's.
    struct Retry: Sendable {
        var delivery: RecordedDelivery
        var outcome: DeliveryOutcome?
    }

    private func retry(_ retry: Retry) async {
        if let outcome = retry.outcome {
            await self.retry(retry.delivery, after: outcome)
        } else {
            await send(retry.delivery)
        }
    }

    /// A delivery's address as read with its batch (`found(nil)`: the device is gone), or `unknown`
    /// (not read yet, or the read failed).
    enum Lookup: Sendable {
        case found(PushAddress?)
        case unknown
    }

    /// Sends one delivery, retrying while the upstream says so and the gateway runs.
    func send(_ delivery: RecordedDelivery, address: Lookup = .unknown) async {
        let outcome = await attemptOnce(delivery, address: address)
        await retry(delivery, after: outcome)
    }

    /// Sends the first attempts of several deliveries together: their `sending` marks in one commit,
    /// their requests through ``DeliveryUpstream/send(batch:)``. Returns the ones to be tried again
    /// (429, 5xx, no answer; or their address could not be read), each to go on alone.
    func sendTogether(_ items: [(RecordedDelivery, Lookup)]) async -> [Retry] {
        var ready: [(delivery: RecordedDelivery, push: OutgoingPush)] = []
        var contents: [String: Int64] = [:]
        var retries: [Retry] = []
        for (delivery, lookup) in items {
            guard case .found(let address) = lookup else {
                retries.append(Retry(delivery: delivery, outcome: nil))   // its address could not be read with the others
                continue
            }
            switch await prepare(delivery, address: address) {
            case .push(let push, let content):
                ready.append((delivery, push))
                contents[delivery.apnsID] = content
            case .finished: break
            case .retry: retries.append(Retry(delivery: delivery, outcome: nil))   // its content could not be read: tried alone
            }
        }
        leaveBehind(&ready, unless: owns)
        // Content goes in its device's turn: one waiting for an attempt on its way is tried alone. A turn
        // ends with the content its attempt made reach Apple, if it did or may have.
        var turns: [Int64: Int64?] = [:]
        defer { for (device, reached) in turns { held.endTurn(device: device, reached: reached) } }
        ready.removeAll { delivery, _ in
            guard let content = contents[delivery.apnsID] else { return false }
            switch held.tryTurn(device: delivery.device, timestamp: content) {
            case .go:
                turns[delivery.device] = .some(nil)
                return false
            case .busy:
                retries.append(Retry(delivery: delivery, outcome: nil))
            case .outdated(let newer):
                finishOutdated(delivery, content: content, newer: newer)
            }
            return true
        }
        guard !ready.isEmpty else { return retries }
        do {
            try await markSending(ready.map(\.delivery))
        } catch {
            let outcome = DeliveryOutcome.retry(reason: "cannot record the attempt: \(error)", retryAfter: nil)
            return retries + ready.map { Retry(delivery: $0.delivery, outcome: outcome) }
        }
        // The lease may have run out while the marks committed (a paused process): not sent here. The
        // others are out until their outcomes are recorded (a hand-back of their partition waits for them).
        leaveBehind(&ready, unless: beginAttempt)
        guard !ready.isEmpty else { return retries }
        defer { for (delivery, _) in ready { leases?.endAttempt(delivery) } }
        let started = ContinuousClock.now
        let outcomes = await upstream.send(batch: ready.map(\.push))
        let latency = started.duration(to: .now)   // the group's: until its last answer
        for ((delivery, push), result) in zip(ready, outcomes) {
            let outcome = await conclude(delivery, push: push, result: result, latency: latency)
            if outcome.mayHaveReached, let content = contents[delivery.apnsID] { turns[delivery.device] = content }
            switch outcome {
            case .retry, .unknown: retries.append(Retry(delivery: delivery, outcome: outcome))
            case .sent, .failed, .deviceInvalid: break
            }
        }
        return retries
    }

    /// Takes out of `ready` the deliveries for which `held` says no (their partition is not held now), and
    /// leaves them behind (to come back if the lease is renewed, or to the new owner).
    private func leaveBehind(
        _ ready: inout [(delivery: RecordedDelivery, push: OutgoingPush)], unless held: (RecordedDelivery) -> Bool
    ) {
        var unowned: [RecordedDelivery] = []
        ready.removeAll { item in
            if held(item.delivery) { return false }
            unowned.append(item.delivery)
            return true
        }
        if !unowned.isEmpty { leave(unowned) }
    }

    /// Whether this gateway holds the lease of `delivery`'s partition now (always, with one gateway).
    private func owns(_ delivery: RecordedDelivery) -> Bool {
        leases?.owns(delivery) ?? true
    }

    /// ``owns(_:)``, and when it does the attempt counts as out until ``DeliveryLeases/endAttempt(_:)``.
    private func beginAttempt(_ delivery: RecordedDelivery) -> Bool {
        leases?.beginAttempt(delivery) ?? true
    }

    /// Tries a delivery again, after a backoff, while its last outcome says so and the gateway runs.
    private func retry(_ delivery: RecordedDelivery, after first: DeliveryOutcome) async {
        var outcome = first
        var attempt = 0
        while true {
            let reason: String
            let retryAfter: Int64?
            switch outcome {
            case .retry(let why, let after):
                (reason, retryAfter) = (why, after)
            case .unknown(let why):
                (reason, retryAfter) = (why, nil)
            case .sent, .failed, .deviceInvalid:
                return
            }
            attempt += 1
            if attempt >= maximumAttempts {
                logger.warning("delivery failed after retries", metadata: Self.metadata(delivery, ["reason": "\(reason)"]))
                finish(delivery, .failed, error: "\(reason) (after \(attempt) attempts)", outcome: outcome)
                return
            }
            let backoff = backoff(attempt: attempt, retryAfter: retryAfter)
            logger.warning(
                "delivery will be retried",
                metadata: Self.metadata(delivery, ["reason": "\(reason)", "in": "\(backoff)"])
            )
            states.record(DeliveryStateChange(apnsID: delivery.apnsID, state: .pending, error: reason, unknownOutcome: outcome.isUnknown))
            // A graceful shutdown (or the task's cancellation) ends the wait: the stop does not wait for
            // a long backoff, and a delivery left pending is sent on the next start.
            guard (try? await cancelWhenGracefulShutdown({ [clock] in try await clock.sleep(for: backoff) })) != nil else { return }
            if let late = retriesEnded(delivery, at: Timestamp(now())) {
                let error = "\(reason); \(late)"
                logger.warning("delivery dropped", metadata: Self.metadata(delivery, ["reason": "\(error)"]))
                finish(delivery, .failed, error: "\(error) (after \(attempt) attempts)", outcome: .failed(reason: "expired"))
                return
            }
            outcome = await attemptOnce(delivery, address: .unknown)
        }
    }

    /// Why a delivery is not tried again at `now`: its expiration passed, or it was for now or never and
    /// released ``nowOrNeverRetries`` ago; `nil` while it may be.
    func retriesEnded(_ delivery: RecordedDelivery, at now: Timestamp) -> String? {
        guard let expiration = delivery.expiration else { return nil }
        if expiration.isNowOrNever {
            guard now.milliseconds - delivery.released.milliseconds >= Self.nowOrNeverRetries.milliseconds else { return nil }
            return "expiration 0 (now or never): not tried again \(Int(Self.nowOrNeverRetries.seconds)) s after its release"
        }
        return now > expiration ? "not tried again after its expiration \(expiration)" : nil
    }

    /// What a delivery is before its attempt: a push to send, finished (device gone, content gone), or
    /// to try again (its content could not be read).
    private enum Prepared {
        /// With its content's timestamp, for a push type that carries content.
        case push(OutgoingPush, content: Int64?)
        case finished(DeliveryOutcome)
        case retry(DeliveryOutcome)
    }

    /// The push of a delivery to `address`, or its end when the device is gone. A push type whose
    /// deliveries carry content gets its body by its merge rule from the requests' recorded bodies.
    private func prepare(_ delivery: RecordedDelivery, address: PushAddress?) async -> Prepared {
        guard let address else {
            let outcome = DeliveryOutcome.failed(reason: "device gone")
            finish(delivery, .failed, error: "the device is no longer registered", outcome: outcome)
            return .finished(outcome)
        }
        // Some push types fix the priority or expiration, whatever the requests asked (controls: 10, now
        // or never).
        let type = address.pushType.descriptor
        var payload: [UInt8]?
        var content: Int64?
        if case .newestContent = type.mergeRule {
            let winners: ActivityPayload.Winners?
            do {
                winners = ActivityPayload.winners(try await store.requestBodies(Array(delivery.requests)))
            } catch {
                return .retry(.retry(reason: "store: \(error)", retryAfter: nil))
            }
            payload = winners.flatMap(ActivityPayload.merged)
            content = winners?.content.stamp.timestamp
            guard payload != nil else {
                // The ledger no longer holds what it was to carry (pruned by retention).
                let outcome = DeliveryOutcome.failed(reason: "content gone")
                finish(delivery, .failed, error: "the requests' content is no longer in the ledger (ledger.retention)", outcome: outcome)
                return .finished(outcome)
            }
        }
        var push = OutgoingPush(
            apnsID: delivery.apnsID,
            bundle: address.bundle,
            deviceToken: address.token,
            pushType: address.pushType,
            widgetIDs: address.widgetIDs,
            requests: delivery.requests,
            requestCount: delivery.requestCount,
            priority: type.deliveryPriority ?? delivery.priority,
            expiration: type.deliversNowOrNever ? .nowOrNever : delivery.expiration,
            releasedAt: delivery.released
        )
        push.payload = payload
        return .push(push, content: content)
    }

    /// Ends a delivery whose content is older than content its device was sent meanwhile (its attempt
    /// failed first, or another group went first): the device would not show it after the newer one, as
    /// the scheduler drops an update older than one released (`outdated`). Not a freshness miss, as the
    /// scheduler's `outdated` is not: the newer delivery, released later, serves what this one would have.
    @discardableResult
    private func finishOutdated(_ delivery: RecordedDelivery, content: Int64, newer: Int64) -> DeliveryOutcome {
        let outcome = DeliveryOutcome.failed(reason: "outdated")
        logger.info("delivery outdated", metadata: Self.metadata(delivery, ["timestamp": "\(content)", "newer": "\(newer)"]))
        finish(
            delivery, .failed,
            error: DecisionReason.outdated(timestamp: content, delivered: newer).description,
            outcome: outcome, served: false
        )
        return outcome
    }

    private func attemptOnce(_ delivery: RecordedDelivery, address lookup: Lookup) async -> DeliveryOutcome {
        // Another gateway schedules the device now and sends it (nothing is recorded here), or the
        // lease comes back with the next heartbeat and so does the delivery.
        guard owns(delivery) else {
            leave([delivery])
            return Self.handedOver
        }
        let address: PushAddress?
        switch lookup {
        case .found(let found):
            address = found
        case .unknown:
            do {
                address = try await store.pushAddress(device: delivery.device, instances: instancesToName(delivery))
            } catch {
                return .retry(reason: "store: \(error)", retryAfter: nil)
            }
        }
        let push: OutgoingPush
        let content: Int64?
        switch await prepare(delivery, address: address) {
        case .push(let prepared, let timestamp): (push, content) = (prepared, timestamp)
        case .finished(let outcome), .retry(let outcome): return outcome
        }
        if let content {
            // Content goes in its device's turn, after the attempt on its way (if any) ended.
            if case .outdated(let newer) = await held.turn(device: delivery.device, timestamp: content) {
                guard owns(delivery) else {
                    leave([delivery])
                    return Self.handedOver
                }
                return finishOutdated(delivery, content: content, newer: newer)
            }
        }
        var reached: Int64?
        defer { if content != nil { held.endTurn(device: delivery.device, reached: reached) } }
        do {
            try await markSending([delivery])
        } catch {
            return .retry(reason: "cannot record the attempt: \(error)", retryAfter: nil)
        }
        guard beginAttempt(delivery) else {
            leave([delivery])
            return Self.handedOver
        }
        // (After `conclude` has recorded the outcome.)
        defer { leases?.endAttempt(delivery) }
        if let rateLimiter {
            // Paced as close to the wire as possible: after the commit (whose fsync could hold paced
            // requests back and release them together) and with the connections up (requests paced
            // while one opens would all go the moment it is up). A crash while it waits leaves it
            // `sending`: sent again on restart, counted as an unknown outcome.
            await upstream.ready()
            do { try await rateLimiter.waitForSlot() } catch { return .retry(reason: "stopping", retryAfter: nil) }
        }
        let started = ContinuousClock.now
        let result: Result<DeliveryOutcome, any Error>
        do {
            result = .success(try await upstream.send(push))
        } catch {
            result = .failure(error)
        }
        let outcome = await conclude(delivery, push: push, result: result, latency: started.duration(to: .now))
        if outcome.mayHaveReached { reached = content }
        return outcome
    }

    /// A delivery of a partition this gateway may not hold now: it ends here without a state change
    /// (left behind: the partition's next owner sends it, or this worker again when the lease is renewed).
    static let handedOver = DeliveryOutcome.failed(reason: "its partition is held by another gateway")

    /// Counts an attempt's outcome and records what it ends (sent, failed, the device invalid). An
    /// error means the request may have reached the push service: `unknown`, sent again.
    private func conclude(
        _ delivery: RecordedDelivery,
        push: OutgoingPush,
        result: Result<DeliveryOutcome, any Error>,
        latency: Duration
    ) async -> DeliveryOutcome {
        // An upstream that records what it takes got no `sending` mark: the attempt is counted on the
        // change that records its outcome (one to be tried again: a `pending` change now; the retry
        // records its reason when it is scheduled).
        let uncounted = upstream.recordsWhatItTakes
        let outcome: DeliveryOutcome
        switch result {
        case .success(let answered):
            outcome = answered
            metrics.deliveryAttempt(outcome: outcome.label, reason: outcome.reason, latency: latency)
        case .failure(let error):
            outcome = .unknown(reason: "\(error)")
            metrics.deliveryAttempt(outcome: outcome.label, reason: outcome.reason, latency: nil)
            if uncounted { states.record(DeliveryStateChange(apnsID: delivery.apnsID, state: .pending, attempted: true)) }
            return outcome
        }
        switch outcome {
        case .sent:
            metrics.pushSent(push.pushType)
            finish(delivery, .sent, error: nil, outcome: outcome, attempted: uncounted)
        case .failed(let reason):
            logger.warning("delivery failed", metadata: Self.metadata(delivery, ["reason": "\(reason)"]))
            finish(delivery, .failed, error: reason, outcome: outcome, attempted: uncounted)
        case .deviceInvalid(let reason, let since):
            logger.info("device unregistered by Apple", metadata: Self.metadata(delivery, ["device": "\(push.deviceToken.shortened)", "reason": "\(reason)"]))
            // The device is marked before the delivery's failure is recorded: once the failure can be
            // read, the next push to the token is answered 410, and a crash between the two writes sends
            // the delivery again (Apple answers 410 again) instead of losing the mark.
            await states.markUnregistered(device: delivery.device, since: since ?? Timestamp(now()))
            finish(delivery, .failed, error: reason, outcome: outcome, attempted: uncounted)
        case .retry, .unknown:
            if uncounted { states.record(DeliveryStateChange(apnsID: delivery.apnsID, state: .pending, attempted: true)) }
        }
        return outcome
    }

    /// Leaves `deliveries` to the next heartbeat or the partition's new owner (``DeliveryLeases/leaveBehind(_:)``).
    private func leave(_ deliveries: [RecordedDelivery]) {
        release(deliveries)
        leases?.leaveBehind(deliveries)
    }

    /// No longer holds `deliveries`; tells ``burstEnded`` when that ended a burst.
    private func release(_ deliveries: [RecordedDelivery]) {
        if let ended = held.release(deliveries) { endOfBurst(ended) }
    }

    private func endOfBurst(_ released: Int) {
        if released >= burstSize { burstEnded() }
    }

    /// The delivery's last state: recorded, counted, and (when Apple refused it) logged.
    /// `attempted`: the change counts an attempt no `sending` mark counted (``DeliveryStateChange/attempted``).
    /// `served`: whether the delivery's end serves (or misses) its requests in the freshness figures.
    private func finish(
        _ delivery: RecordedDelivery, _ state: RecordedDelivery.State, error: String?, outcome: DeliveryOutcome, attempted: Bool = false,
        served: Bool = true
    ) {
        release([delivery])
        states.record(DeliveryStateChange(
            apnsID: delivery.apnsID, state: state, error: error, unknownOutcome: outcome.isUnknown, attempted: attempted
        ))
        if served, state == .sent || state == .failed { states.served(delivery, at: Timestamp(now()), failed: state == .failed) }
        metrics.deliveryFinished(outcome: state.rawValue)
    }

    /// A delivery's log metadata: its apns-id and the ids of the requests it serves (the first ten), so
    /// that a log line leads to `reloadgate explain`.
    static func metadata(_ delivery: RecordedDelivery, _ extra: Logger.Metadata) -> Logger.Metadata {
        var metadata = extra
        metadata["apns-id"] = "\(delivery.apnsID)"
        let listed = delivery.requests.prefix(10).map(String.init).joined(separator: ",")
        metadata["requests"] = "\(listed)\(delivery.requestCount > 10 ? ",…" : "")"
        return metadata
    }

    /// The first backoff (1 s), doubled per attempt up to the maximum, each with up to 20% jitter; at
    /// least `retryAfter` seconds, which counts for at most an hour (Apple's header is outside input).
    func backoff(attempt: Int, retryAfter: Int64?) -> Duration {
        let first = firstBackoff.seconds * 1000
        let maximum = maximumBackoff.seconds * 1000
        let doublings = attempt <= 1 ? 0 : min(attempt, 17) - 1
        let base = min(first * Double(1 << doublings), maximum)
        let jittered = base * Double.random(in: 0.8...1.0)
        let asked = Double(min(max(retryAfter ?? 0, 0), 3600)) * 1000
        return .milliseconds(Int64(max(jittered, asked)))
    }
}

/// A gateway's partition leases as the delivery worker asks them (``ClusterMembership``).
protocol DeliveryLeases: Sendable {
    /// Whether `delivery` may be sent now: its partition's lease is held, with the epoch it was released
    /// under, and has not run out by the local clock.
    func owns(_ delivery: RecordedDelivery) -> Bool
    /// ``owns(_:)``; when it may be sent, its attempt counts as out until ``endAttempt(_:)``: a hand-back
    /// of its partition waits for it, so that the next owner does not send it again.
    func beginAttempt(_ delivery: RecordedDelivery) -> Bool
    /// The attempt begun by ``beginAttempt(_:)`` ended and its outcome is recorded.
    func endAttempt(_ delivery: RecordedDelivery)
    /// Takes deliveries not sent because ``owns(_:)`` said no: they come back to the worker if the lease
    /// is renewed with the same epoch (it had only run out by the local clock); else the new owner sends them.
    func leaveBehind(_ deliveries: [RecordedDelivery])
}
