public import ReloadGateStore

/// PostgreSQL's partition leases (``PostgresStore/heartbeat(gateway:address:startedAt:leaseMilliseconds:now:)``,
/// `release`, `leave`) in memory, with the same rules: a heartbeat renews what the gateway holds, takes
/// expired or free leases in partition order up to its fair share among the live gateways (ordered by id,
/// bytewise), raises the epoch of each lease it takes and the fence generation of each gateway it takes
/// one from, and names its surplus (highest partitions first). For the cluster simulation; the lease
/// cases of `PartitionLeaseTests` run against this table and against PostgreSQL alike, so that the two
/// stay the same.
public struct InMemoryLeaseTable: Sendable {
    struct Lease: Sendable {
        var owner: String?
        var epoch: Int64 = 0
        var expiresAt: Int64 = 0
    }

    struct Gateway: Sendable {
        var address: String?
        var startedAt: Int64
        var heartbeatAt: Int64
    }

    private var leases = Array(repeating: Lease(), count: DevicePartition.partitionCount)
    private var gateways: [String: Gateway] = [:]
    /// Fence generations (PostgreSQL's `gateway_fence`, 1 when first seen).
    private var generations: [String: Int64] = [:]

    public init() {}

    /// One heartbeat of `gateway` at `now` (milliseconds).
    public mutating func heartbeat(gateway: String, address: String?, startedAt: Int64, leaseMilliseconds: Int64, now time: Int64)
        -> LeaseState
    {
        let expiry = time + leaseMilliseconds
        gateways[gateway, default: Gateway(address: address, startedAt: startedAt, heartbeatAt: time)].address = address
        gateways[gateway]?.heartbeatAt = time
        if generations[gateway] == nil { generations[gateway] = 1 }
        var held: [Int: Int64] = [:]
        for partition in leases.indices where leases[partition].owner == gateway {
            leases[partition].expiresAt = expiry
            held[partition] = leases[partition].epoch
        }
        let live = gateways.filter { $0.value.heartbeatAt > time - leaseMilliseconds }.keys
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let share = DevicePartition.fairShare(of: gateway, among: live)
        var acquired: [Int] = []
        var previousOwners = Set<String>()
        if held.count < share {
            for partition in leases.indices where leases[partition].expiresAt <= time {
                guard held.count < share else { break }
                if let previous = leases[partition].owner, previous != gateway { previousOwners.insert(previous) }
                leases[partition].owner = gateway
                leases[partition].epoch += 1
                leases[partition].expiresAt = expiry
                held[partition] = leases[partition].epoch
                acquired.append(partition)
            }
        }
        for previous in previousOwners { generations[previous, default: 1] += 1 }
        let surplus = held.count > share ? Array(held.keys.sorted().suffix(held.count - share).reversed()) : []
        gateways = gateways.filter { $0.value.heartbeatAt >= time - 100 * leaseMilliseconds }
        return LeaseState(
            held: held, acquired: acquired, liveGateways: live, surplus: surplus, expiresAt: expiry,
            generation: generations[gateway] ?? 1
        )
    }

    /// Frees the leases of `gateway` still held with the given epochs.
    public mutating func release(_ given: [Int: Int64], gateway: String) {
        for (partition, epoch) in given where leases.indices.contains(partition) {
            guard leases[partition].owner == gateway, leases[partition].epoch == epoch else { continue }
            leases[partition].owner = nil
            leases[partition].expiresAt = 0
        }
    }

    /// Frees every lease of `gateway` and forgets it (it stops).
    public mutating func leave(gateway: String) {
        for partition in leases.indices where leases[partition].owner == gateway {
            leases[partition].owner = nil
            leases[partition].expiresAt = 0
        }
        gateways[gateway] = nil
    }

    /// `gateway`'s fence generation.
    public func generation(of gateway: String) -> Int64 {
        generations[gateway] ?? 1
    }

    /// The partitions whose lease `gateway` holds (expired or not), in order.
    public func partitions(heldBy gateway: String) -> [Int] {
        leases.indices.filter { leases[$0].owner == gateway }
    }
}
