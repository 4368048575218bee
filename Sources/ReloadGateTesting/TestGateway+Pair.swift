import Foundation
public import ReloadGateStore
public import ReloadGateServer

extension TestGateway {
    /// Two gateways on a new PostgreSQL database of the test cluster (``TestPostgres``), each with a data
    /// directory of its own holding the database's `secrets.key`, once both hold some of the partitions.
    /// `prepare` writes what the gateways need before they start (an app, a sender's key) through a store
    /// handle of the test's own, which `body` gets too.
    /// - Throws: when the partitions were not shared within the wait of ``eventually(within:every:_:)``.
    public static func withTwoOnPostgres<Prepared: Sendable>(
        _ name: String,
        prepare: (PostgresStore) async throws -> Prepared,
        _ body: @Sendable (_ first: TestGateway, _ second: TestGateway, _ store: PostgresStore, _ prepared: Prepared) async throws -> Void
    ) async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory(name)
        defer { data.remove() }
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: data.path("a"))
        defer { try? store.close() }
        let prepared = try await prepare(store)
        try FileManager.default.createDirectory(atPath: data.path("b"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: data.path("a/secrets.key"), toPath: data.path("b/secrets.key"))
        @Sendable func configure(_ directory: String) -> @Sendable (inout GatewayConfiguration) -> Void {
            { configuration in
                configuration.usePostgres(url, dataDirectory: directory)
            }
        }
        try await withRunning(configure: configure(data.path("a"))) { first in
            try await withRunning(configure: configure(data.path("b"))) { second in
                // The first gateway held every partition; it hands half to the second within two beats.
                var shares: [Int] = []
                let shared = try await eventually(every: .milliseconds(100)) {
                    shares = try await store.clusterGateways(within: 10_000).map(\.partitions)
                    return shares.count == 2 && shares.allSatisfy { $0 > 0 } && shares.reduce(0, +) == 1024
                }
                guard shared else { throw TestGatewayError.partitionsNotShared(shares) }
                try await body(first, second, store, prepared)
            }
        }
    }
}

extension TestGateway {
    /// `count` gateways on a new PostgreSQL database of the test cluster, as ``withTwoOnPostgres(_:prepare:_:)``,
    /// each changed by `configure` too (an upstream, say), once every one holds some of the partitions.
    public static func withSeveralOnPostgres<Prepared: Sendable>(
        _ name: String,
        count: Int,
        configure: @escaping @Sendable (inout GatewayConfiguration) -> Void = { _ in },
        prepare: (PostgresStore) async throws -> Prepared,
        _ body: @Sendable (_ gateways: [TestGateway], _ store: PostgresStore, _ prepared: Prepared) async throws -> Void
    ) async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory(name)
        defer { data.remove() }
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: data.path("g0"))
        defer { try? store.close() }
        let prepared = try await prepare(store)
        for index in 1..<count {
            try FileManager.default.createDirectory(atPath: data.path("g\(index)"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: data.path("g0/secrets.key"), toPath: data.path("g\(index)/secrets.key"))
        }
        @Sendable func running(_ started: [TestGateway]) async throws {
            guard started.count < count else {
                var shares: [Int] = []
                let shared = try await eventually(every: .milliseconds(100)) {
                    shares = try await store.clusterGateways(within: 10_000).map(\.partitions)
                    return shares.count == count && shares.allSatisfy { $0 > 0 } && shares.reduce(0, +) == 1024
                }
                guard shared else { throw TestGatewayError.partitionsNotShared(shares) }
                return try await body(started, store, prepared)
            }
            let directory = data.path("g\(started.count)")
            try await withRunning(configure: { configuration in
                configuration.usePostgres(url, dataDirectory: directory)
                configure(&configuration)
            }) { gateway in
                try await running(started + [gateway])
            }
        }
        try await running([])
    }
}
