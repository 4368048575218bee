import ReloadGateCore
import ReloadGateStore

/// The engine's idempotency keys (a webhook call's `idempotency-key`): the first call with a key is decided;
/// a call with the same key and body while the first is in flight waits for its answer, and after it gets
/// the recorded answer again (the store's, for 24 hours); the same key with another body is a conflict.
/// Only the commit loop decides, one request after the other, so no second call with a key is accepted
/// while the first is undecided.
extension SchedulerEngine {
    /// An app's idempotency key.
    struct KeyName: Hashable {
        var app: Int64
        var key: String
    }

    /// A key whose first call is decided but not committed: its body's hash, and whoever waits for its answer.
    struct InFlightKey {
        var bodyHash: [UInt8]
        var waiters: [Reply] = []
    }

    /// Whether `submission` is to be decided: yes without a key or with a new one (then held in flight);
    /// otherwise `reply` is answered (or will be, with the first call's answer) and it is not.
    func claimKey(of submission: ReloadCommand, reply: @escaping Reply) async -> Bool {
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
        do {
            switch try await store.idempotentAnswer(
                app: submission.app.id, key: idempotency.key, bodyHash: idempotency.bodyHash, now: submission.received
            ) {
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
        } catch {
            reply(.failure(error))
            return false
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
                response: answer.body, createdAt: submission.received
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
