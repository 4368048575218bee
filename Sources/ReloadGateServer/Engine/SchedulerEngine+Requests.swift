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
        switch inbox.append(Queued(submission: submission, render: render, reply: reply)) {
        case nil: break
        case .full: reply(.failure(SchedulerOverloaded()))
        case .closed: reply(.failure(SchedulerUnavailable()))
        }
    }

    /// Requests queued by ``enqueue(_:render:reply:)`` beyond this many are refused (`ServiceUnavailable`).
    static let inboxLimit = 50_000

    /// Decides requests taken from the queue (the commit loop calls this before sealing a batch). Only the
    /// commit loop decides them, one after the other: an idempotency key's lookup in the store sees every
    /// earlier batch committed, and no other request with the key is accepted meanwhile.
    func decide(_ queued: [Queued]) async {
        guard !queued.isEmpty else { return }
        prefetchTargets(of: queued)
        let stored = await storedAnswers(of: queued)
        // Read in place by index: a `for item in` loop would copy each request (a dozen references
        // retained, then released).
        for index in queued.indices {
            await accept(queued[index].submission, render: queued[index].render, stored: stored, reply: queued[index].reply)
        }
    }

    /// Asks for the instance states that deciding `queued` reads first, all together (at most
    /// ``ReloadScheduler/prefetchLimit``): their cache misses overlap instead of following one another.
    private func prefetchTargets(of queued: [Queued]) {
        var targets: [InstanceHandle] = []
        for index in queued.indices {
            for target in queued[index].submission.targets {
                guard targets.count < ReloadScheduler.prefetchLimit else { return scheduler.prefetch(targets) }
                if let handle = Self.handle(target) { targets.append(handle) }
            }
        }
        scheduler.prefetch(targets)
    }

    /// Registers a device's implicit instance that the store has just adopted (written by the registry's
    /// group commit, beside the commit loop): the push that adopted it is decided after this. On a shared
    /// store, only a device of this gateway's partitions; its owner is told by the store's notice,
    /// written in the adoption's transaction and so in its inbox ahead of the push (which it would
    /// otherwise decide `no-match`).
    func register(adopted: AdoptedDevice, pushType: PushType, pushToStart: Bool) {
        guard isLocal(device: adopted.device), let handle = Self.handle(adopted.instance), let device = Self.deviceHandle(adopted.device) else {
            return
        }
        let family = ImplicitInstance.of(pushType, pushToStart: pushToStart).family
        scheduler.register(handle, device: device, pushType.descriptor.scheduling(kind: ImplicitInstance.kind, family: family))
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

    /// A write beside the commit loop (the registry's group commit) found the store away: degrade as a
    /// failed commit does, at once when no commit is in flight, or when the one in flight ends
    /// (``settle(_:)``); the rebuild is a later turn's, and reloads the state unless nothing was decided
    /// since the last commit and the write is known not to have been committed.
    func storeFailed(_ error: StoreError) {
        // `unavailable`: nothing was written; `outcomeUnknown`: the write may have been committed.
        let mayHaveWritten = if case .unavailable = error { false } else { true }
        let actions = pipeline.storeFailed(mayHaveWritten: mayHaveWritten)
        if pipeline.failedBesideInFlight != nil { failureBesideInFlight = error }
        guard actions.rebuild else { return }
        logger.error("the store cannot write; requests are refused until it can", metadata: ["error": "\(error)"])
        onDegraded()
        perform(actions, error: error)
    }
}
