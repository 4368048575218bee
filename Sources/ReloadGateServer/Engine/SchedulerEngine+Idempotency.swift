import ReloadGateCore
import ReloadGateStore

/// The engine's idempotency keys (a webhook call's `idempotency-key`, a push's `apns-id` for its device): the
/// first request with a key is decided; one with the same key and body while the first is in flight waits
/// for its answer, and after it gets the recorded answer again (the store's, until the key expires); the
/// same key with another body is a conflict. Only the commit loop decides, one request after the other, so
/// no second request with a key is accepted while the first is undecided. The keys of one drain of the
/// inbox are looked up in the store with one read (``storedAnswers(of:)``).
extension SchedulerEngine {
    /// An app's idempotency key.
    typealias KeyName = IdempotencyKey

    /// A key whose first call is decided but not committed: its body's hash, and whoever waits for its answer.
    struct InFlightKey {
        var bodyHash: [UInt8]
        var waiters: [Reply] = []
    }

    /// What the store holds for the keys of `queued`'s requests that are not in flight: at most two reads
    /// (the rows the index of kept answers names, and the idempotency table). A failed read is every
    /// such request's answer.
    func storedAnswers(of queued: [Queued]) async -> Result<[KeyName: IdempotentAnswer], any Error> {
        let now = Timestamp(self.now())
        keptAnswers.forgetExpired(at: now)
        var tableNames: [KeyName] = []
        var rows: [RequestID] = []
        var seen = Set<KeyName>()
        for index in queued.indices {
            guard let idempotency = queued[index].submission.idempotency else { continue }
            let name = KeyName(app: queued[index].submission.app.id, key: idempotency.key)
            guard inFlightKeys[name] == nil, seen.insert(name).inserted else { continue }
            // A push's apns-id: in a request's row when the index names one; in the table as well only
            // while the table may hold such keys (recorded there while the index was full, or before
            // the gateway started).
            if idempotency.keptWithRequest, keptAnswers.capacity > 0 {
                rows += keptAnswers.candidates(for: name)
                if now < tableMayHoldKeptKeysUntil { tableNames.append(name) }
            } else {
                tableNames.append(name)
            }
        }
        guard !tableNames.isEmpty || !rows.isEmpty else { return .success([:]) }
        do {
            var found = tableNames.isEmpty ? [:] : try await store.idempotentAnswers(for: tableNames)
            // Of several answers to one key (one expired, a newer one in a row), the newest.
            let kept = rows.isEmpty ? [] : Array(try await store.keptAnswers(requests: rows).values)
            for answer in kept where seen.contains(answer.name) && (found[answer.name].map { $0.expiresAt < answer.expiresAt } ?? true) {
                found[answer.name] = answer
            }
            return .success(found)
        } catch {
            return .failure(StoreError.readFailed(error))
        }
    }

    /// Rebuilds the index of kept answers from the store's request rows (on start), when the store keeps
    /// answers there.
    func loadKeptAnswers() async throws {
        guard keptAnswers.capacity > 0 else { return }
        let now = Timestamp(self.now())
        keptAnswers = KeptAnswerIndex(capacity: keptAnswers.capacity)
        for kept in try await store.keptAnswerKeys(unexpiredAt: now, window: IdempotentAnswer.pushRetryWindow) {
            keptAnswers.add(kept.name, request: kept.request, expiresAt: kept.expiresAt)
        }
        // Keys recorded in the table before (while the index was full, or by a gateway of before
        // `v18-request-answers`) are looked up there until the last of them expires.
        tableMayHoldKeptKeysUntil = try await store.lastExpiry(
            ofTableKeysPrefixed: ReloadCommand.Idempotency.pushKeyPrefix, after: now,
            notAfter: now.adding(milliseconds: IdempotentAnswer.pushRetryWindow)
        ) ?? now
        metrics.keptAnswers(keptAnswers.count)
    }

    /// Whether `submission` is to be decided: yes without a key or with a new one (then held in flight);
    /// otherwise `reply` is answered (or will be, with the first request's answer) and it is not. `stored`
    /// is what the store held for the keys of the drain (``storedAnswers(of:)``).
    func claimKey(
        of submission: ReloadCommand, stored: Result<[KeyName: IdempotentAnswer], any Error>, reply: @escaping Reply
    ) -> Bool {
        guard let idempotency = submission.idempotency else { return true }
        let name = KeyName(app: submission.app.id, key: idempotency.key)
        if var inFlight = inFlightKeys[name] {
            guard inFlight.bodyHash == idempotency.bodyHash else {
                metrics.idempotentAnswer("conflict")
                reply(.success(.conflict))
                return false
            }
            inFlight.waiters.append(reply)
            inFlightKeys[name] = inFlight
            return false
        }
        let answers: [KeyName: IdempotentAnswer]
        switch stored {
        case .success(let found): answers = found
        case .failure(let error):
            reply(.failure(error))
            return false
        }
        switch IdempotentAnswer.lookup(answers[name], bodyHash: idempotency.bodyHash, now: submission.received) {
        case .replay(let status, let body):
            metrics.idempotentAnswer("replay")
            reply(.success(.replay(status: status, body: body)))
            return false
        case .conflict:
            metrics.idempotentAnswer("conflict")
            reply(.success(.conflict))
            return false
        case .new:
            inFlightKeys[name] = InFlightKey(bodyHash: idempotency.bodyHash)
            return true
        }
    }

    /// The first call with `submission`'s key was refused before it was decided: whoever waits for it is too.
    func refuseKey(of submission: ReloadCommand, _ error: any Error) {
        guard let idempotency = submission.idempotency else { return }
        refuseKeys([KeyName(app: submission.app.id, key: idempotency.key)], error)
    }

    /// Whoever waits for the answers of `names` is refused with `error` (their batch failed or was dropped).
    func refuseKeys(_ names: [KeyName], _ error: any Error) {
        for name in names {
            for waiter in inFlightKeys.removeValue(forKey: name)?.waiters ?? [] { waiter(.failure(error)) }
        }
    }

    /// Records the answer to `submission`'s key in the open batch (a later call gets exactly these bytes):
    /// a push's apns-id in the row of its request `id` (the batch's last) while the index of kept answers
    /// has room, any other key in the idempotency table.
    func recordAnswer(_ answer: (status: Int, body: String), of submission: ReloadCommand, request id: RequestID) {
        guard let idempotency = submission.idempotency else { return }
        let recorded = IdempotentAnswer(
            app: submission.app.id, key: idempotency.key, bodyHash: idempotency.bodyHash, status: answer.status,
            response: answer.body, createdAt: submission.received,
            expiresAt: submission.received.adding(milliseconds: idempotency.window)
        )
        if idempotency.keptWithRequest, keptAnswers.hasRoom, pipeline.open.ledger.requests.last?.id == id {
            pipeline.open.ledger.requests[pipeline.open.ledger.requests.count - 1].answer = recorded
        } else {
            pipeline.open.ledger.idempotentAnswers.append(recorded)
            if idempotency.keptWithRequest, keptAnswers.capacity > 0 {
                tableMayHoldKeptKeysUntil = max(tableMayHoldKeptKeysUntil, recorded.expiresAt)
            }
        }
        pipeline.open.keys.append(KeyName(app: submission.app.id, key: idempotency.key))
    }

    /// `committed`'s keys are answered: whoever waited for them gets the recorded answer, and the answers
    /// kept in request rows join the index.
    func answerKeys(of committed: OpenBatch) {
        for request in committed.ledger.requests {
            guard let answer = request.answer else { continue }
            keptAnswers.add(answer.name, request: request.id, expiresAt: answer.expiresAt)
        }
        if keptAnswers.capacity > 0 { metrics.keptAnswers(keptAnswers.count) }
        for name in committed.keys {
            guard let inFlight = inFlightKeys.removeValue(forKey: name) else { continue }
            if !inFlight.waiters.isEmpty, let answer = committed.ledger.answer(for: name) {
                for waiter in inFlight.waiters {
                    metrics.idempotentAnswer("replay")
                    waiter(.success(.replay(status: answer.status, body: answer.response)))
                }
            }
        }
    }
}
