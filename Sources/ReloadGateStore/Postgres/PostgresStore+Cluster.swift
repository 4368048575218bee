import Foundation
import Logging
import PostgresNIO
import Synchronization
public import ReloadGateCore

// What several gateways on one database share beyond the store contract: the inbox of forwarded work,
// request ids in blocks, the partition-wise loading of the scheduler's state, and change notifications
// (LISTEN/NOTIFY on one channel).

extension PostgresStore: ClusterStore {
    /// The channel every gateway listens on; a notification's payload tells a ``ClusterNotice``.
    static let clusterChannel = "reloadgate"

    /// Request ids per block (``requestIDBlock()``).
    public static let requestBlockSize: Int64 = 1024

    public func requestIDBlock() async throws -> ClosedRange<RequestID> {
        let block = try await rows("SELECT nextval('request_block') AS block").first!.value("block", as: Int64.self)
        let first = block * Self.requestBlockSize
        return RequestID(first)...RequestID(first + Self.requestBlockSize - 1)
    }

    /// The partitions are named by a bitmap, one bit each (`get_bit`), and the inbox is walked in the order
    /// of its key from `after`: the owner reads its inbox at every turn that takes requests (decision
    /// 0120), and `partition = ANY(<the 1,024 partitions one gateway holds>)` took 2.3 ms to plan and run
    /// on an empty inbox, against about 0.1 ms so. Entries of partitions held elsewhere are passed over
    /// (their owners take them within a commit, or a takeover does).
    public func inbox(partitions: [Int], after: Int64, limit: Int) async throws -> [InboxEntry] {
        guard !partitions.isEmpty else { return [] }
        let decoder = JSONDecoder()
        var entries: [InboxEntry] = []
        var unreadable: [Int64] = []
        for row in try await rows(
            """
            SELECT id, partition, work FROM inbox WHERE id > \(after) AND get_bit(\(Self.partitionBits(partitions)), partition) = 1
                ORDER BY id LIMIT \(Int64(limit))
            """
        ) {
            let id = try row.value("id", as: Int64.self)
            let partition = try row.value("partition", as: Int64.self)
            let work = try row.value("work", as: String.self)
            guard let decoded = try? decoder.decode(ForwardedWork.self, from: Data(work.utf8)) else {
                logger.error("an inbox entry cannot be read; it is dropped", metadata: ["inbox-id": "\(id)", "work": "\(work)"])
                unreadable.append(id)
                continue
            }
            entries.append(InboxEntry(id: id, partition: Int(partition), work: decoded))
        }
        if !unreadable.isEmpty { _ = try await rows("DELETE FROM inbox WHERE id = ANY(\(unreadable))") }
        return entries
    }

    /// `partitions` as a bitmap of ``DevicePartition/partitionCount`` bits, as `get_bit` reads one: partition
    /// `p` is bit `p % 8` (the least significant first) of byte `p / 8`.
    static func partitionBits(_ partitions: [Int]) -> ByteBuffer {
        var bytes = [UInt8](repeating: 0, count: DevicePartition.partitionCount / 8)
        for partition in partitions where bytes.indices.contains(partition / 8) && partition >= 0 {
            bytes[partition / 8] |= 1 << UInt8(partition % 8)
        }
        return ByteBuffer(bytes: bytes)
    }

    public func forward(_ entries: [InboxEntry]) async throws {
        guard !entries.isEmpty else { return }
        var batch = LedgerBatch()
        batch.forwards = entries
        try await commit(batch)
    }

    /// One statement however many payloads the notice takes (``ClusterNotice/payloads(limit:)``).
    public func publish(_ notice: ClusterNotice) async throws {
        _ = try await rows("SELECT pg_notify(\(Self.clusterChannel), payload) FROM unnest(\(notice.payloads())::text[]) AS payload")
    }

    public func analyzeTablesWithoutStatistics(minimumRows: Int) async throws -> [String] {
        // The tables of the schema the store's migrations create them in, and only those this role may
        // analyze (their owner's): PostgreSQL skips another's with a warning, and it would be looked at again
        // every time. Read from `pg_class` and the statistics functions `pg_stat_user_tables` is made of,
        // for this schema's tables only: the view computes every column for every table of the database
        // (5-6 ms of the server's time a look during a registration run, against 1.3 ms; decision 0113). The
        // schema is found by its name as the catalog holds it (a cast to `regnamespace` would parse it as an
        // identifier, and fail on one that needs quoting).
        let tables = try await rows("""
            SELECT c.relname FROM pg_class c
            WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind IN ('r', 'p')
                AND pg_stat_get_last_analyze_time(c.oid) IS NULL AND pg_stat_get_last_autoanalyze_time(c.oid) IS NULL
                AND pg_stat_get_live_tuples(c.oid) >= \(Int64(minimumRows)) AND pg_has_role(c.relowner, 'USAGE')
            ORDER BY c.relname
            """).map { try $0.value("relname", as: String.self) }
        let logger = logger
        for table in tables {
            // A name from the catalog, quoted as an identifier (`ANALYZE` takes no parameters). It samples at
            // most 30,000 rows, but a large table restored without statistics may take longer than the store's
            // deadline: it gets the scanning reads' deadline, and a stopping gateway does not wait for it.
            let name = "\"" + table.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            try await transaction(deadline: Self.readDeadline, leftWhenCancelled: true) { connection in
                try await connection.run("ANALYZE \(unescaped: name)", logger: logger)
            }
        }
        return tables
    }

    /// `widget.deviceId % 1024` in one of `partitions` (the expression ``DevicePartition`` computes).
    private static func inPartitions(_ column: String, _ partitions: [Int]) -> String {
        "(\(column) % \(DevicePartition.partitionCount)) = ANY('{\(partitions.map(String.init).joined(separator: ","))}'::bigint[])"
    }

    public func registeredInstances(partitions: [Int]) async throws -> [RegisteredInstance] {
        guard !partitions.isEmpty else { return [] }
        return try await registeredInstances(where: "device.active AND \(unescaped: Self.inPartitions("widget.deviceId", partitions))")
    }

    public func schedulingState(instances: [Int64]) async throws
        -> (instances: [RegisteredInstance], snapshots: [(instance: Int64, snapshot: InstanceSnapshot)])
    {
        guard !instances.isEmpty else { return ([], []) }
        return (
            try await registeredInstances(where: "device.active AND widget.id IN \(ids: instances)"),
            try await instanceSnapshots(where: "s.instanceId IN \(ids: instances)")
        )
    }

    public func device(ofInstance instance: Int64) async throws -> Int64? {
        try await rows("SELECT deviceId FROM widget WHERE id = \(instance)").first?.value("deviceId", as: Int64.self)
    }

    /// Some devices' instances: read in the commit loop's turn (a resync), so with the store's deadline,
    /// not the scanning reads' minutes.
    public func registeredInstances(devices: [Int64]) async throws -> [RegisteredInstance] {
        guard !devices.isEmpty else { return [] }
        return try await registeredInstances(where: "device.active AND widget.deviceId IN \(ids: devices)", scanning: false)
    }

    public func instanceSnapshots(partitions: [Int]) async throws -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        guard !partitions.isEmpty else { return [] }
        return try await instanceSnapshots(
            where: "s.instanceId IN (SELECT widget.id FROM widget WHERE \(unescaped: Self.inPartitions("widget.deviceId", partitions)))"
        )
    }

    public func deliveries(in states: [RecordedDelivery.State], partitions: [Int]) async throws -> [RecordedDelivery] {
        guard !partitions.isEmpty else { return [] }
        return try await reading(scanning: true) { session in
            try await session.rows("""
                SELECT \(unescaped: RecordedDelivery.columns) FROM delivery dl WHERE \(unescaped: RecordedDelivery.State.condition(states))
                    AND \(unescaped: Self.inPartitions("dl.deviceId", partitions)) ORDER BY dl.releasedAt, dl.apnsId
                """).compactMap(RecordedDelivery.init)
        }
    }

    public func partitionLeases() async throws -> [PartitionLease] {
        try await rows("SELECT partition, owner, epoch, expiresAt, acquiredAt FROM partition_lease ORDER BY partition").map { row in
            PartitionLease(
                partition: Int(try row.value("partition", as: Int64.self)), owner: try row.value("owner"), epoch: try row.value("epoch"),
                expiresAt: try row.value("expiresAt"), acquiredAt: try row.value("acquiredAt")
            )
        }
    }

    /// Listens on the cluster channel with a connection of its own (outside the pool), reconnecting
    /// after a second when it breaks, until the task is cancelled.
    public func listen(onChange: @escaping @Sendable (ClusterNotice?) async -> Void) async {
        // Returns as soon as the caller is cancelled, without waiting for postgres-nio to end the
        // notification sequence (see ``abandoning(after:timedOut:_:)``).
        _ = try? await abandoning(after: nil, timedOut: { CancellationError() }) { await self.listenUntilCancelled(onChange: onChange) }
    }

    private func listenUntilCancelled(onChange: @escaping @Sendable (ClusterNotice?) async -> Void) async {
        var quiet = logger
        quiet.logLevel = .critical
        // The connection in use, closed on cancellation: that ends the notification sequence (whose
        // iteration does not end by cancellation alone), so that a stopping gateway is not held.
        let current = Mutex<PostgresConnection?>(nil)
        await withTaskCancellationHandler {
            var reported = false
            while !Task.isCancelled {
                var open: PostgresConnection?
                do {
                    let connection = try await PostgresConnection.connect(
                        on: PostgresStore.connectionLoops.next(), configuration: try location.connectionConfiguration(), id: 0, logger: quiet
                    )
                    open = connection
                    current.withLock { $0 = connection }
                    if !Task.isCancelled {
                        try await connection.listen(on: Self.clusterChannel) { notifications in
                            if reported { logger.notice("listening for other gateways' changes again") }
                            reported = false
                            await onChange(nil)
                            for try await notification in notifications {
                                await onChange(ClusterNotice(payload: notification.payload))
                            }
                        }
                    }
                } catch {
                    if !Task.isCancelled, !reported {
                        logger.warning("cannot listen for other gateways' changes; retrying each second", metadata: ["error": "\(Self.describe(error))"])
                        reported = true
                    }
                }
                current.withLock { $0 = nil }
                // Closed before it is released (postgres-nio requires it).
                try? await open?.close()
                try? await Task.sleep(for: .seconds(1))
            }
        } onCancel: {
            if let connection = current.withLock({ $0 }) { let closing: EventLoopFuture<Void> = connection.close(); _ = closing }
        }
    }
}
