import Foundation
import PostgresNIO
import ReloadGateCore

/// A gateway's leases after a heartbeat: the partitions it owns (with the epoch each lease carries, for
/// fencing), what changed, and how many it should give back so that newcomers get their share.
public struct LeaseState: Sendable, Equatable {
    /// Partition -> epoch of every lease this gateway holds now.
    public var held: [Int: Int64]
    /// Leases taken by this heartbeat (free, or expired with their owner gone): their state must be loaded.
    public var acquired: [Int]
    /// The live gateways' ids (this one included), by id.
    public var liveGateways: [String]
    /// The partitions this gateway holds beyond its fair share, to hand back (highest first) once it has
    /// stopped scheduling them (``PostgresStore/release(_:gateway:)``).
    public var surplus: [Int]
    /// When the leases renewed by this heartbeat expire (the database's clock, milliseconds since 1970).
    public var expiresAt: Int64
    /// This gateway's fence generation: its group commits are written only under it (``LeaseFence``). It
    /// rises whenever another gateway takes over one of its partitions.
    public var generation: Int64

    public init(held: [Int: Int64], acquired: [Int], liveGateways: [String], surplus: [Int], expiresAt: Int64, generation: Int64) {
        self.held = held
        self.acquired = acquired
        self.liveGateways = liveGateways
        self.surplus = surplus
        self.expiresAt = expiresAt
        self.generation = generation
    }
}

/// One gateway of the cluster and what it owns, for `reloadgate cluster`.
public struct ClusterGateway: Sendable, Equatable {
    public var id: String
    public var address: String?
    public var startedAt: Int64
    public var heartbeatAt: Int64
    public var partitions: Int
}

extension PostgresStore {
    /// The number of partitions devices hash into: fixed when the database was created.
    public static let partitionCount = DevicePartition.partitionCount

    /// The partition of a device: its id modulo ``partitionCount`` (ids come from one sequence, so the
    /// partitions fill evenly; the same expression works in SQL).
    public static func partition(ofDevice device: Int64) -> Int {
        DevicePartition.of(device: device)
    }

    /// The database's clock in milliseconds: every gateway's leases are timed by one clock.
    static let databaseMilliseconds = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

    /// Records this gateway as alive and renews, takes and balances its leases, in one transaction.
    ///
    /// Leases it still owns are renewed for `leaseMilliseconds`, also one that expired while nobody took it
    /// (a beat came late: its epoch is unchanged, nothing happened to the partition meanwhile); a lease
    /// another gateway took is lost (the caller drops its partitions). Its fair share is the partitions
    /// divided by the live gateways (heartbeat within one lease time), the remainder going to the first
    /// ones by id; below it, it takes free or expired leases (each with a new epoch); above it,
    /// ``LeaseState/surplus`` names what to give back.
    ///
    /// Taking an expired lease from another gateway raises that gateway's fence generation in the same
    /// transaction. That `UPDATE` waits for the other gateway's group commit in flight (which holds its
    /// fence row `FOR SHARE`), so the state this gateway loads for the partition afterwards includes that
    /// commit, and every later commit of the other gateway, decided under the old generation, writes
    /// nothing. Fence rows are raised in the order of their gateway ids, so two heartbeats never deadlock.
    /// - Parameters:
    ///   - now: the time to use instead of the database's clock (tests).
    public func heartbeat(
        gateway: String,
        address: String?,
        startedAt: Int64,
        leaseMilliseconds: Int64,
        now: Int64? = nil
    ) async throws -> LeaseState {
        try await transaction { connection in
            let time: Int64
            if let now {
                time = now
            } else {
                time = try await connection.rows("SELECT \(unescaped: Self.databaseMilliseconds) AS now", logger: self.logger).first!
                    .value("now", as: Int64.self)
            }
            let expiry = time + leaseMilliseconds
            try await connection.run(
                """
                INSERT INTO gateway (id, address, startedAt, heartbeatAt) VALUES (\(gateway), \(address), \(startedAt), \(time))
                ON CONFLICT (id) DO UPDATE SET address = excluded.address, heartbeatAt = excluded.heartbeatAt
                """,
                logger: self.logger
            )
            // (DO NOTHING takes no lock: a beat never waits for this gateway's own commits.)
            try await connection.run(
                "INSERT INTO gateway_fence (gateway) VALUES (\(gateway)) ON CONFLICT (gateway) DO NOTHING", logger: self.logger
            )
            var held: [Int: Int64] = [:]
            for row in try await connection.rows(
                """
                UPDATE partition_lease SET expiresAt = \(expiry)
                WHERE partition IN (SELECT partition FROM partition_lease WHERE owner = \(gateway) ORDER BY partition FOR UPDATE)
                RETURNING partition, epoch
                """,
                logger: self.logger
            ) {
                held[Int(try row.value("partition", as: Int64.self))] = try row.value("epoch", as: Int64.self)
            }
            let live = try await connection.rows(
                "SELECT id FROM gateway WHERE heartbeatAt > \(time - leaseMilliseconds) ORDER BY id COLLATE \"C\"",
                logger: self.logger
            ).map { try $0.value("id", as: String.self) }
            let share = DevicePartition.fairShare(of: gateway, among: live)
            var acquired: [Int] = []
            var previousOwners = Set<String>()
            if held.count < share {
                for row in try await connection.rows(
                    """
                    UPDATE partition_lease SET owner = \(gateway), epoch = partition_lease.epoch + 1, expiresAt = \(expiry),
                        acquiredAt = \(time)
                    FROM (SELECT partition, owner FROM partition_lease WHERE expiresAt <= \(time)
                        ORDER BY partition LIMIT \(Int64(share - held.count)) FOR UPDATE SKIP LOCKED) AS expired
                    WHERE partition_lease.partition = expired.partition
                    RETURNING partition_lease.partition, partition_lease.epoch, expired.owner AS previous
                    """,
                    logger: self.logger
                ) {
                    let partition = try row.value("partition", as: Int64.self)
                    let epoch = try row.value("epoch", as: Int64.self)
                    let previous = try row.value("previous", as: String?.self)
                    held[Int(partition)] = epoch
                    acquired.append(Int(partition))
                    if let previous, previous != gateway { previousOwners.insert(previous) }
                }
            }
            for previous in previousOwners.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                try await connection.run(
                    "UPDATE gateway_fence SET generation = generation + 1 WHERE gateway = \(previous)", logger: self.logger
                )
            }
            let generation = try await connection.rows(
                "SELECT generation FROM gateway_fence WHERE gateway = \(gateway)", logger: self.logger
            ).first!.value("generation", as: Int64.self)
            let surplus = held.count > share ? Array(held.keys.sorted().suffix(held.count - share).reversed()) : []
            // Gateways gone for a long time leave the list (their leases expired long ago).
            try await connection.run(
                "DELETE FROM gateway WHERE heartbeatAt < \(time - 100 * leaseMilliseconds)", logger: self.logger
            )
            return LeaseState(
                held: held, acquired: acquired.sorted(), liveGateways: live, surplus: surplus, expiresAt: expiry, generation: generation
            )
        }
    }

    /// Gives leases back (the caller no longer schedules their partitions): free for any gateway at once.
    /// Only leases still held with the given epochs are released.
    public func release(_ leases: [Int: Int64], gateway: String) async throws {
        guard !leases.isEmpty else { return }
        let partitions = leases.keys.sorted()
        _ = try await rows(
            """
            UPDATE partition_lease SET owner = NULL, expiresAt = 0
            FROM unnest(\(partitions.map(Int64.init)), \(partitions.map { leases[$0]! })) AS given(partition, epoch)
            WHERE partition_lease.partition = given.partition AND partition_lease.epoch = given.epoch
                AND partition_lease.owner = \(gateway)
            """
        )
    }

    public func leave(gateway: String) async throws {
        try await transaction { connection in
            try await connection.run(
                "UPDATE partition_lease SET owner = NULL, expiresAt = 0 WHERE owner = \(gateway)", logger: self.logger
            )
            try await connection.run("DELETE FROM gateway WHERE id = \(gateway)", logger: self.logger)
        }
    }

    /// The gateways that beat within `within` milliseconds, with how many partitions each holds.
    public func clusterGateways(within: Int64) async throws -> [ClusterGateway] {
        try await rows(
            """
            SELECT g.id, g.address, g.startedAt, g.heartbeatAt,
                (SELECT count(*) FROM partition_lease l WHERE l.owner = g.id AND l.expiresAt > \(unescaped: Self.databaseMilliseconds)) AS partitions
            FROM gateway g WHERE g.heartbeatAt > \(unescaped: Self.databaseMilliseconds) - \(within)
            ORDER BY g.id COLLATE "C"
            """
        ).map { row in
            ClusterGateway(
                id: try row.value("id"), address: try row.value("address"), startedAt: try row.value("startedAt"),
                heartbeatAt: try row.value("heartbeatAt"), partitions: Int(try row.value("partitions", as: Int64.self))
            )
        }
    }
}
