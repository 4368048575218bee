public import ReloadGateCore

/// Why the store could not be opened or used. Each case has a stable ``code``.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// The database file could not be created, opened or migrated.
    case cannotOpen(path: String, reason: String)
    /// The data directory belongs to a gateway of the other environment.
    case environmentMismatch(path: String, stored: DeploymentEnvironment, configured: DeploymentEnvironment)
    /// `secrets.key` in `directory` is not the key the store's secrets were sealed with (another gateway's
    /// data directory, a key made anew): no webhook call could be verified.
    case secretsKeyMismatch(directory: String)
    /// The store's contents break an invariant the gateway relies on.
    case corrupt(reason: String)
    /// An app with this bundle id, in any case, is registered already (the registered spelling).
    case appExists(BundleID)
    /// A provider key with this key id is registered already.
    case keyExists(String)
    /// The database cannot be reached now (nothing was done; the operation may be retried).
    case unavailable(reason: String)
    /// Another gateway took partitions over from this one since the batch was begun (a shared store):
    /// nothing of the batch was written. `generation` is this gateway's fence generation now and `held`
    /// the partitions whose leases it still holds.
    case fenced(generation: Int64, held: [Int])
    /// Another gateway answered this idempotency key (webhook `idempotency-key`, push `apns-id`) after this
    /// one looked it up and before its batch committed: nothing of the batch was written; a retry gets that
    /// answer.
    case keyAnsweredMeanwhile(key: String)
    /// The database may or may not have done what was sent: the connection broke, or the deadline passed,
    /// after the statement left (a commit whose answer was lost). A retry with the same idempotency key or
    /// `apns-id` gets the first answer if it was committed, and is decided if it was not.
    case outcomeUnknown(reason: String)

    /// Whether the operation was refused for the database's state, not for what it asked: the database is
    /// away, another gateway took partitions over while a batch committed, or answered an idempotency key of
    /// the batch meanwhile. Nothing was written and a retry may succeed (a gateway answers `503`).
    public var isTransient: Bool {
        switch self {
        case .unavailable, .fenced, .keyAnsweredMeanwhile, .outcomeUnknown: true
        default: false
        }
    }

    /// The error of a read, as the answer to the request that needed it: a read writes nothing, so an
    /// unknown outcome (a deadline or a broken connection under it) is the store being unavailable; other
    /// errors stay as they are.
    public static func readFailed(_ error: any Error) -> any Error {
        if case .outcomeUnknown(let reason)? = error as? StoreError { return StoreError.unavailable(reason: reason) }
        return error
    }

    /// Whether the store cannot be reached or did not answer (a gateway degrades and probes until it
    /// answers again), as opposed to a refusal of this one batch.
    public var isStoreAway: Bool {
        switch self {
        case .unavailable, .outcomeUnknown: true
        default: false
        }
    }

    /// A stable identifier for logs and tests.
    public var code: String {
        switch self {
        case .cannotOpen: "store.cannot-open"
        case .environmentMismatch: "store.environment-mismatch"
        case .secretsKeyMismatch: "store.secrets-key-mismatch"
        case .corrupt: "store.corrupt"
        case .appExists: "store.app-exists"
        case .keyExists: "store.key-exists"
        case .unavailable: "store.unavailable"
        case .fenced: "store.fenced"
        case .keyAnsweredMeanwhile: "store.key-answered-meanwhile"
        case .outcomeUnknown: "store.outcome-unknown"
        }
    }

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason): "cannot open the store \(path): \(reason)"
        case .environmentMismatch(let path, let stored, let configured):
            "the store \(path) holds \(stored) devices but this gateway runs in \(configured): "
                + "use another data directory (data.directory) for the \(configured) environment"
        case .secretsKeyMismatch(let directory):
            "\(directory)/secrets.key is not the key this store's secrets were sealed with: every gateway of one "
                + "store needs the same secrets.key; copy it from a gateway that works (or from the data directory "
                + "the store was created with) into \(directory)"
        case .corrupt(let reason): "the store is corrupt: \(reason)"
        case .appExists(let bundle): "the app \(bundle) is registered already (bundle ids are compared regardless of case)"
        case .keyExists(let keyID): "a provider key with the id \(keyID) is registered already"
        case .unavailable(let reason): "the store cannot commit now: \(reason)"
        case .fenced(let generation, let held):
            "another gateway took partitions over from this one (fence generation now \(generation), "
                + "\(held.count) partition\(held.count == 1 ? "" : "s") still held): nothing was written"
        case .keyAnsweredMeanwhile(let key):
            "another gateway answered the idempotency key \(key) meanwhile: nothing was written; a retry gets its answer"
        case .outcomeUnknown(let reason):
            "the store may or may not have committed: \(reason); a retry with the same key or apns-id is answered, not decided again"
        }
    }
}
