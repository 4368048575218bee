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

    /// What the store holds for the keys of `queued`'s requests that are not in flight: one read. A failed
    /// read is every such request's answer.
    func storedAnswers(of queued: [Queued]) async -> Result<[KeyName: IdempotentAnswer], any Error> {
        var names: [KeyName] = []
        var seen = Set<KeyName>()
        for item in queued {
            guard case .request(let submission, _, _) = item, let idempotency = submission.idempotency else { continue }
            let name = KeyName(app: submission.app.id, key: idempotency.key)
            if inFlightKeys[name] == nil, seen.insert(name).inserted { names.append(name) }
        }
        guard !names.isEmpty else { return .success([:]) }
        do {
            return .success(try await store.idempotentAnswers(for: names))
        } catch {
            return .failure(StoreError.readFailed(error))
        }
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
            reply(.success(.replay(status: status, body: body)))
            return false
        case .conflict:
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

    /// Records the answer to `submission`'s key in the open batch (a later call gets exactly these bytes).
    func recordAnswer(_ answer: (status: Int, body: String), of submission: ReloadCommand) {
        guard let idempotency = submission.idempotency else { return }
        batch.idempotentAnswers.append(
            IdempotentAnswer(
                app: submission.app.id, key: idempotency.key, bodyHash: idempotency.bodyHash, status: answer.status,
                response: answer.body, createdAt: submission.received,
                expiresAt: submission.received.adding(milliseconds: idempotency.window)
            )
        )
        batchKeys.append(KeyName(app: submission.app.id, key: idempotency.key))
    }

    /// `committed`'s keys are answered: whoever waited for them gets the recorded answer.
    func answerKeys(of committed: Sealed) {
        for name in committed.keys {
            guard let inFlight = inFlightKeys.removeValue(forKey: name) else { continue }
            if !inFlight.waiters.isEmpty, let answer = committed.batch.idempotentAnswers.first(where: {
                $0.app == name.app && $0.key == name.key
            }) {
                for waiter in inFlight.waiters { waiter(.success(.replay(status: answer.status, body: answer.response))) }
            }
        }
    }
}
