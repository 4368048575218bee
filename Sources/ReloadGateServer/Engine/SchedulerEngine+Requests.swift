import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The engine's requests: handed over from event loops, decided one after the other by the commit loop
/// (idempotency keys checked against the store and the keys in flight), under request ids of their own.
extension SchedulerEngine {
    /// What a submitter is told once its request is decided and committed (or refused).
    typealias Reply = @Sendable (Result<Outcome, any Error>) -> Void

    /// Decides a request and returns once its decisions are committed.
    /// - Throws: the store's error when the commit failed: nothing of the request was accepted.
    func submit(_ submission: ReloadCommand, render: @escaping Render) async throws -> Outcome {
        try checkAccepting()
        return try await withCheckedThrowingContinuation { continuation in
            enqueue(submission, render: render) { continuation.resume(with: $0) }
        }
    }

    /// Hands a request over from any thread (an event loop) without waiting: it is decided with the next
    /// batch and `reply` is called once that batch committed. No task and no actor hop per request.
    nonisolated func enqueue(_ submission: ReloadCommand, render: @escaping Render, reply: @escaping Reply) {
        switch inbox.append(.request(submission, render, reply)) {
        case nil: break
        case .full: reply(.failure(SchedulerOverloaded()))
        case .closed: reply(.failure(SchedulerUnavailable()))
        }
    }

    /// Hands a device to adopt over from any thread; the commit loop writes it (no task per adoption).
    nonisolated func enqueue(_ adoption: Adoption) {
        switch inbox.append(.adoption(adoption)) {
        case nil: break
        case .full: adoption.then(.failure(SchedulerOverloaded()))
        case .closed: adoption.then(.failure(SchedulerUnavailable()))
        }
    }

    /// Requests queued by ``enqueue(_:render:reply:)`` beyond this many are refused (`ServiceUnavailable`).
    static let inboxLimit = 50_000

    /// Decides the queued requests (the commit loop calls this before sealing a batch). Only the commit
    /// loop drains, one item after the other: an idempotency key's lookup in the store sees every
    /// earlier batch committed, and no other request with the key is accepted meanwhile.
    func drainInbox() async {
        let queued = inbox.takeAll()
        // An adoption refused because the store cannot write now (a lock held past the deadline, a full
        // disk): the others of this drain would wait for the same, one deadline each, with the commit
        // loop; they are refused with it at once, and with no commit in flight the engine degrades
        // (``CommitPipeline/storeFailed()``) and refuses the rest too.
        var storeAway: StoreError?
        let stored = await storedAnswers(of: queued)
        for item in queued {
            if pipeline.isDegraded, let storeAway {
                switch item {
                case .request(_, _, let reply): reply(.failure(storeAway))
                case .adoption(let adoption): adoption.then(.failure(storeAway))
                }
                continue
            }
            switch item {
            case .request(let submission, let render, let reply):
                await accept(submission, render: render, stored: stored, reply: reply)
            case .adoption(let adoption):
                if let storeAway {
                    adoption.then(.failure(storeAway))
                    continue
                }
                // Rare (once per new token): written here, on the commit loop, in its own transaction.
                do {
                    let adopted = try await store.adoptDevice(
                        app: adoption.app, token: adoption.token, pushType: adoption.pushType, pushToStart: adoption.pushToStart, now: adoption.received
                    )
                    if isLocal(device: adopted.device) {
                        if let handle = Self.handle(adopted.instance), let device = Self.deviceHandle(adopted.device) {
                            let descriptor = adoption.pushType.descriptor
                            let family = ImplicitInstance.of(adoption.pushType, pushToStart: adoption.pushToStart).family
                            scheduler.register(handle, device: device, descriptor.scheduling(kind: ImplicitInstance.kind, family: family))
                        }
                    }
                    // Another gateway schedules the new device: the store's notice in the adoption's own
                    // transaction is in its inbox ahead of the push that follows (which it would otherwise
                    // decide `no-match`).
                    adoption.then(.success(adopted.device))
                } catch {
                    // Degraded first (``storeFailed(_:)`` says so on `/ready`), then refused.
                    if let error = error as? StoreError, error.isStoreAway {
                        storeAway = error
                        storeFailed(error)
                    }
                    adoption.then(.failure(error))
                }
            }
        }
    }

    /// Decides a request into the open batch; `reply` is called after the batch committed, or at once
    /// for an idempotent replay or conflict. `stored`: the store's answers to the drain's keys.
    func accept(
        _ submission: ReloadCommand, render: Render, stored: Result<[KeyName: IdempotentAnswer], any Error>, reply: @escaping Reply
    ) async {
        guard claimKey(of: submission, stored: stored, reply: reply) else { return }

        let id: RequestID
        do {
            id = try await takeRequestID()
        } catch {
            refuseKey(of: submission, error)
            return reply(.failure(error))
        }
        // On a shared store, targets of devices whose partition another gateway holds go to its inbox.
        let (local, forwarded) = split(submission)
        do {
            try await learnUnknownTargets(of: submission, local: local)
        } catch {
            refuseKey(of: submission, error)
            return reply(.failure(error))
        }
        let request = ReloadRequest(
            id: id,
            targets: local.compactMap(Self.handle),
            priority: submission.priority,
            expiration: submission.expiration,
            collapseID: submission.collapseID,
            team: submission.team,
            exempt: submission.exempt,
            received: submission.received,
            activity: submission.activity
        )
        let first = pipeline.open.ledger.decisions.count
        if !local.isEmpty || forwarded.isEmpty { scheduler.receive(request, into: &pipeline.open.ledger.decisions) }
        forward(forwarded, of: submission, id: id)
        let decisions = Array(pipeline.open.ledger.decisions[first...])
        let answer = render(id, decisions)
        pipeline.open.ledger.requests.append(
            RecordedRequest(
                id: id,
                app: submission.app.id,
                source: submission.source,
                received: submission.received,
                priority: submission.priority,
                expiration: submission.expiration,
                collapseID: submission.collapseID,
                exempt: submission.exempt,
                summary: submission.summary,
                apnsID: submission.apnsID
            )
        )
        recordAnswer(answer, of: submission, request: id)
        // The commit loop seals the batch after its drain (``commitTurn()``): no wake-up is needed here.
        perform(pipeline.wait { result in
            reply(result.map { .decided(request: id, decisions: decisions, status: answer.status, body: answer.body) })
        })
    }

    /// A write of the commit loop's own found the store away: degrade as a failed commit does, when no
    /// commit is in flight (its end decides otherwise); the rebuild is a later turn's.
    func storeFailed(_ error: StoreError) {
        let actions = pipeline.storeFailed()
        guard actions.rebuild else { return }
        logger.error("the store cannot write; requests are refused until it can", metadata: ["error": "\(error)"])
        onDegraded()
        perform(actions, error: error)
    }
}
