import Foundation
public import ReloadGateCore

/// What a group commit depends on (several gateways on one database): that no other gateway has taken a
/// lease from `gateway` since the batch was begun. Every takeover of a partition from another gateway
/// raises that gateway's fence generation (``LeaseState/generation``); the batch is written only if the
/// generation is still the one it was decided under, and otherwise the commit writes nothing and throws
/// ``StoreError/fenced(generation:held:)``.
public struct LeaseFence: Sendable, Hashable {
    public var gateway: String
    /// The gateway's fence generation when the batch was begun.
    public var generation: Int64

    public init(gateway: String, generation: Int64) {
        self.gateway = gateway
        self.generation = generation
    }
}

/// Work for the gateway that owns a device's partition, written by the gateway that accepted it (an inbox
/// row, committed with the request before the caller is answered).
public enum ForwardedWork: Sendable, Hashable, Codable {
    /// A reload request's targets in one partition: the owner decides them under the request's id (the
    /// request row is written by the accepting gateway).
    case request(ForwardedRequest)
    /// A device's registration changed (widgets, timelines, deleted): the owner reads it again.
    case device(id: Int64)
    /// The operator dropped the pending reloads of `instances` (those listing `request` when given).
    case cancel(instances: [Int64], request: UInt64?)
    /// The operator made the pending reloads of `instances` due now.
    case flush(instances: [Int64], ignoringBudget: Bool)
}

/// A reload request as its partition's owner decides it.
public struct ForwardedRequest: Sendable, Hashable, Codable {
    public var id: RequestID
    public var targets: [Int64]
    public var priority: Int
    public var expiration: Int64?
    public var collapseID: String?
    public var team: String?
    public var exempt: Bool
    public var received: Int64
    /// A Live Activity push's event and timestamp (absent in work forwarded by a gateway before them).
    public var activity: ActivityContent?

    public init(
        id: RequestID, targets: [Int64], priority: Int, expiration: Int64?, collapseID: String?, team: String?,
        exempt: Bool, received: Int64, activity: ActivityContent? = nil
    ) {
        self.activity = activity
        self.id = id
        self.targets = targets
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.team = team
        self.exempt = exempt
        self.received = received
    }
}

/// Forwarded work for one partition.
public struct InboxEntry: Sendable, Hashable {
    /// The row's id (0 before it is written); the owner deletes it in the commit that applies it.
    public var id: Int64
    public var partition: Int
    public var work: ForwardedWork

    public init(id: Int64 = 0, partition: Int, work: ForwardedWork) {
        self.id = id
        self.partition = partition
        self.work = work
    }
}

/// What a gateway publishes for every other gateway of the database: a change their caches hold.
public enum ClusterChange: String, Sendable, CaseIterable, Codable {
    /// Apps, their keys and team (the API key and webhook secret caches).
    case apps
    /// Provider keys (the token verifier's keys).
    case keys
    /// Device registrations (the push path's device cache).
    case devices
    /// Forwarded work was written to the inbox.
    case inbox
}

/// A change as gateways tell it to each other: what changed and, for registrations, the tokens it
/// touched. A gateway that hears which tokens changed forgets only their entries in its device cache; one
/// that does not (`tokens` `nil`) forgets every entry (decision 0121). Every gateway hears every notice,
/// its writer's included, which forgets those tokens a second time (decision 0122).
public struct ClusterNotice: Sendable, Hashable, Codable {
    public var change: ClusterChange
    /// The tokens (lower-case hex) whose registration changed; `nil`: any.
    public var tokens: [String]?

    public init(_ change: ClusterChange, tokens: [String]? = nil) {
        self.change = change
        self.tokens = tokens
    }

    /// The notification payloads that tell this notice, each at most `limit` bytes: the change's name
    /// alone when it names no tokens, else the notice as JSON with as many tokens as fit, in as many
    /// payloads as needed. PostgreSQL refuses a payload of 8,000 bytes or more; a limit that leaves no room
    /// for a token tells the change's name (every entry forgotten).
    public func payloads(limit: Int = ClusterNotice.payloadLimit) -> [String] {
        guard let tokens, !tokens.isEmpty else { return [change.rawValue] }
        let encoder = JSONEncoder()
        func encoded(_ tokens: [String]) -> String? {
            var part = self
            part.tokens = tokens
            return (try? encoder.encode(part)).map { String(decoding: $0, as: UTF8.self) }
        }
        guard let empty = encoded([]) else { return [change.rawValue] }
        var payloads: [String] = []
        var part: [String] = []
        var size = empty.utf8.count
        for token in tokens {
            // A token adds its quoted text and a comma; JSON escapes nothing in hex.
            let added = token.utf8.count + 3
            if size + added > limit {
                guard !part.isEmpty else { return [change.rawValue] }
                payloads.append(encoded(part) ?? change.rawValue)
                part = []
                size = empty.utf8.count
                guard size + added <= limit else { return [change.rawValue] }
            }
            part.append(token)
            size += added
        }
        if !part.isEmpty { payloads.append(encoded(part) ?? change.rawValue) }
        return payloads
    }

    /// Below PostgreSQL's 8,000 bytes for a `NOTIFY` payload.
    public static let payloadLimit = 7_900

    /// The notice a payload tells (``payloads(limit:)``; a change's name alone is that change with nothing
    /// more told), or `nil` for one this gateway cannot read (a newer gateway's: anything may have changed).
    public init?(payload: String) {
        if let change = ClusterChange(rawValue: payload) {
            self.init(change)
        } else if payload.first == "{", let notice = try? JSONDecoder().decode(Self.self, from: Data(payload.utf8)) {
            self = notice
        } else {
            return nil
        }
    }
}

/// A store shared by several gateways (``PostgresStore``): partition leases, the inbox of forwarded work,
/// request ids in blocks, the partition-wise loading of the scheduler's state, and change notifications.
public protocol ClusterStore: GatewayStore, SharedSchedulingStore {
    // (Leases, request-id blocks, the inbox and partition-wise loading: ``SharedSchedulingStore``.)
    /// Live gateways and how many partitions each holds.
    func clusterGateways(within: Int64) async throws -> [ClusterGateway]
    /// Every partition's owner and lease (for `reloadgate cluster`).
    func partitionLeases() async throws -> [PartitionLease]
    /// Writes forwarded work outside a group commit (registry changes), durable when this returns.
    func forward(_ entries: [InboxEntry]) async throws
    /// Tells every gateway of `notice` (delivered after the current transaction commits).
    func publish(_ notice: ClusterNotice) async throws
    /// The registration and stored scheduling state of `instances` (those of active devices), for the
    /// operator's views of instances another gateway schedules.
    func schedulingState(instances: [Int64]) async throws
        -> (instances: [RegisteredInstance], snapshots: [(instance: Int64, snapshot: InstanceSnapshot)])
    /// Calls `onChange` for every notice published by any gateway (this one included) until cancelled;
    /// `onChange(nil)` after (re)connecting, and for a notice it cannot read: anything may have changed.
    func listen(onChange: @escaping @Sendable (ClusterNotice?) async -> Void) async
    /// Has the database gather statistics (`ANALYZE`) for each of the store's tables (those of its schema
    /// the gateway's role owns) that has none yet though it holds `minimumRows` rows or more; returns their
    /// names. A new database's tables have none until autovacuum first analyzes them, up to a minute after
    /// the first writes, and a plan made without them can read an app's devices once per device, or a whole
    /// table at every group commit (decision 0113).
    func analyzeTablesWithoutStatistics(minimumRows: Int) async throws -> [String]
}
/// One partition's lease, for `reloadgate cluster`.
public struct PartitionLease: Sendable, Hashable {
    public var partition: Int
    public var owner: String?
    public var epoch: Int64
    public var expiresAt: Int64
    public var acquiredAt: Int64?

    public init(partition: Int, owner: String?, epoch: Int64, expiresAt: Int64, acquiredAt: Int64?) {
        self.partition = partition
        self.owner = owner
        self.epoch = epoch
        self.expiresAt = expiresAt
        self.acquiredAt = acquiredAt
    }
}

/// The partition of a device on a shared store: its id modulo ``partitionCount`` (ids come from one
/// sequence, so the partitions fill evenly; the same expression works in SQL).
public enum DevicePartition {
    public static let partitionCount = 1024

    public static func of(device: Int64) -> Int { Int(device.magnitude % UInt64(partitionCount)) }

    /// How many partitions `gateway` should hold among the `live` gateways (sorted by id): an even split,
    /// the first ones taking one more when it does not divide.
    public static func fairShare(of gateway: String, among live: [String]) -> Int {
        let index = live.firstIndex(of: gateway) ?? 0
        let count = max(live.count, 1)
        return partitionCount / count + (index < partitionCount % count ? 1 : 0)
    }
}
