// swift-tools-version:6.2
//
// ReloadGate: a push-notification reload gateway for WidgetKit widgets.
//
// Dependency direction (see docs/DESIGN.md, "Suggested layout"):
//
//   ReloadGateCore  <-  ReloadGateStore, ReloadGateAPNs, ReloadGateAPI  <-  ReloadGateCertificates
//                   <-  ReloadGateServer  <-  reloadgate (executable)
//   ReloadGateSimulation (the what-if simulator) and ReloadGateMockAPNs (`reloadgate mock-apns`, and the tests'
//   mock of Apple) are linked into the executable too; ReloadGateMockAPNs depends on none of ours.
//   ReloadGateTesting depends on the server and the mock and is used by tests only, never by the executable.
//
// The core imports no networking and no SQLite; the executable only parses arguments.

import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "reloadgate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "reloadgate", targets: ["reloadgate"])
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Tests only: the app-side package (its bodies and client against the server).
        .package(path: "Clients/ReloadGateKit"),
        // Tests only: property-based checks of every number the gateway takes from outside.
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        // Domain values and (later) the scheduling state machine. Pure: no I/O, time injected.
        .target(
            name: "ReloadGateCore",
            dependencies: ["CReloadGatePrefetch"],
            swiftSettings: swiftSettings
        ),
        // A prefetch hint for the scheduler's instance table (Swift has no spelling for it).
        .target(name: "CReloadGatePrefetch"),
        // SQLite's process-wide settings (sqlite3_config, variadic) for the SQLite store.
        .target(name: "CReloadGateSQLite", linkerSettings: [.linkedLibrary("sqlite3")]),
        // Durable state: the SQLite store (GRDB, WAL, named migrations) and the PostgreSQL store (postgres-nio).
        .target(
            name: "ReloadGateStore",
            dependencies: [
                "CReloadGateSQLite",
                "ReloadGateCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the group commit's directly bound statements (BoundStatement).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // The shared store of several gateways (PostgresStore).
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // The SQLite store's reads wait for the disk on threads of its own (NIOThreadPool).
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The APNs wire contract: certificate topics (and later request validation, provider tokens).
        .target(
            name: "ReloadGateAPNs",
            dependencies: [
                "ReloadGateCore",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP APIs' request bodies (registry, webhook) parsed and checked, their answers, the bodies'
        // JSON (BodyJSON, the field checks, Nullable, JSONValue) and the webhook signature.
        // No HTTP server here: the fuzz targets build it with the sanitizers in minutes.
        .target(
            name: "ReloadGateAPI",
            dependencies: [
                "ReloadGateCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The what-if simulator: traces (JSON lines) replayed through the scheduler on a virtual clock,
        // the figures per widget kind and the HTML report. Pure like the core: no network, no store.
        .target(
            name: "ReloadGateSimulation",
            dependencies: ["ReloadGateCore", "ReloadGateAPI"],
            swiftSettings: swiftSettings
        ),
        // Spellings of hostile numbers, for property tests, fuzz seeds and benchmarks (their seeded generator,
        // SplitMix64, is the core's). Not linked into the executable. No dependencies.
        .target(
            name: "ReloadGateHostileInput",
            swiftSettings: swiftSettings
        ),
        // The development PKI: a local CA, server certificates, client certificates with APNs topics.
        .target(
            name: "ReloadGateCertificates",
            dependencies: [
                "ReloadGateCore",
                "ReloadGateAPNs",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // glibc's heap calls (mallinfo2, malloc_trim, mallopt) for the memory upkeep.
        .target(name: "CReloadGateHeap"),
        // The Hummingbird application: configuration, listeners, routes, services.
        .target(
            name: "ReloadGateServer",
            dependencies: [
                "CReloadGateHeap",
                "ReloadGateCore",
                "ReloadGateStore",
                "ReloadGateAPNs",
                "ReloadGateAPI",
                "ReloadGateCertificates",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // `reloadgate dashboard` forwards to the admin socket.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            // The OpenAPI document of the HTTP APIs, compiled into the binary (served at /openapi.json).
            resources: [
                .embedInCode("OpenAPI/openapi.yaml"),
                .embedInCode("Admin/Dashboard/dashboard.html"),
                .embedInCode("Admin/Dashboard/dashboard.js"),
                .embedInCode("Admin/Dashboard/dashboard.css"),
            ],
            swiftSettings: swiftSettings
        ),
        // A mock of Apple's push service (HTTP/2, TLS, provider tokens checked): `reloadgate mock-apns` runs it
        // for demos and benchmarks, and the tests use it. Depends on no other module of ours.
        .target(
            name: "ReloadGateMockAPNs",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // Support for tests only (never linked into the executable): a gateway on port 0 with generated
        // certificates and a client that trusts it, raw HTTP/2 clients, the mock APNs server wired to a gateway.
        .target(
            name: "ReloadGateTesting",
            dependencies: [
                "ReloadGateServer",
                "ReloadGateMockAPNs",
                "ReloadGateAPI",
                "ReloadGateCertificates",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                // A database of its own per test on the CI's private PostgreSQL cluster (TestPostgres).
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The executable: parses arguments and calls into the server module.
        .executableTarget(
            name: "reloadgate",
            dependencies: [
                "ReloadGateServer",
                // `reloadgate mock-apns`.
                "ReloadGateMockAPNs",
                "ReloadGateCertificates",
                "ReloadGateAPNs",
                // The bodies' JSON (`Nullable`, `JSONValue`, `BodyJSON`) the admin commands read.
                "ReloadGateAPI",
                "ReloadGateCore",
                "ReloadGateStore",
                "ReloadGateSimulation",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // Benchmarks: print figures, never run by the tests (docs/BENCHMARKS.md).
        // What Hummingbird's router costs called directly (issue 30's measurement before replacing the
        // API listener's HTTP/2 serving).
        // What parsing a request body costs (issue 31: the bodies became Decodable types), beside
        // JSONSerialization parsing the same bytes (what the bodies were read from before).
        .executableTarget(
            name: "reloadgate-bench-bodies",
            dependencies: ["ReloadGateAPI", "ReloadGateAPNs", "ReloadGateCore", "ReloadGateSimulation", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "reloadgate-bench-router",
            dependencies: [
                "ReloadGateServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "reloadgate-bench-scheduler",
            dependencies: ["ReloadGateCore", "ReloadGateHostileInput"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "reloadgate-bench-simulate",
            dependencies: ["ReloadGateCore", "ReloadGateSimulation"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "reloadgate-bench-forecast",
            dependencies: [
                "ReloadGateCore",
                "ReloadGateStore",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "reloadgate-bench-store",
            dependencies: [
                "ReloadGateCore",
                "ReloadGateStore",
                "ReloadGateAPNs",
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // Fuzz targets (Fuzz/): libFuzzer programs when built by scripts/fuzz (Fuzz/toolset.json), corpus
        // replayers in a normal build. They use the parsing modules only, not the server.
        .target(name: "FuzzDriver", path: "Fuzz/Driver", swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-push-head",
            dependencies: ["FuzzDriver", "ReloadGateAPNs", "ReloadGateCore"],
            path: "Fuzz/PushHead",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "fuzz-provider-token",
            dependencies: ["FuzzDriver", "ReloadGateAPNs", "ReloadGateCore", .product(name: "Crypto", package: "swift-crypto")],
            path: "Fuzz/ProviderToken",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "fuzz-webhook-signature",
            dependencies: ["FuzzDriver", "ReloadGateAPI"],
            path: "Fuzz/WebhookSignature",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "fuzz-api-bodies",
            dependencies: ["FuzzDriver", "ReloadGateAPI", "ReloadGateCore"],
            path: "Fuzz/APIBodies",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "fuzz-push-payload",
            dependencies: ["FuzzDriver", "ReloadGateAPNs", "ReloadGateCore"],
            path: "Fuzz/PushPayload",
            swiftSettings: swiftSettings
        ),

        .testTarget(
            name: "ReloadGateCoreTests",
            // ReloadGateTesting for `.offThePool` only: the property tests' loops run on a thread of their own.
            dependencies: ["ReloadGateCore", "ReloadGateHostileInput", "ReloadGateTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReloadGateSimulationTests",
            dependencies: ["ReloadGateSimulation", "ReloadGateCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReloadGateStoreTests",
            dependencies: [
                // Generated runs of the leases, PostgreSQL against the table in memory (LeaseTableTests).
                .product(name: "PropertyBased", package: "swift-property-based"),
                "ReloadGateStore",
                "ReloadGateTesting",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's own count of its memory (SQLiteStoreTests: the statistics are off).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                // A test holds the pruning lock on a connection of its own (LedgerRetentionTests).
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReloadGateAPITests",
            dependencies: [
                "ReloadGateAPI",
                "ReloadGateCore",
                "ReloadGateHostileInput",
                // For `.offThePool` only: the property tests' loops run on a thread of their own.
                "ReloadGateTesting",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReloadGateAPNsTests",
            dependencies: [
                "ReloadGateAPNs",
                "ReloadGateCore",
                "ReloadGateHostileInput",
                "ReloadGateTesting",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReloadGateCertificatesTests",
            dependencies: [
                "ReloadGateCertificates",
                "ReloadGateAPNs",
                "ReloadGateTesting",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReloadGateServerTests",
            dependencies: [
                "ReloadGateServer",
                "ReloadGateAPNs",
                "ReloadGateTesting",
                "ReloadGateMockAPNs",
                "ReloadGateCertificates",
                "ReloadGateCore",
                "ReloadGateStore",
                "ReloadGateHostileInput",
                // The commit pipeline's generated event sequences (CommitPipelineTests).
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The routers called without a listener (PathRouterTests).
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // Graceful shutdown triggered by a test (DeliveryWorkerTests).
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ReloadGateKit", package: "ReloadGateKit"),
            ],
            swiftSettings: swiftSettings
        ),
        // Runs the real `reloadgate` binary as a child process.
        .testTarget(
            name: "ReloadGateCLITests",
            dependencies: [
                "reloadgate",
                // Built beside the binary so that the tests replay the fuzz corpora through them.
                "fuzz-push-head", "fuzz-provider-token", "fuzz-webhook-signature", "fuzz-api-bodies", "fuzz-push-payload",
                "ReloadGateHostileInput",
                "ReloadGateTesting",
                "ReloadGateMockAPNs",
                "ReloadGateAPNs",
                "ReloadGateStore",
                "ReloadGateCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ReloadGateKit", package: "ReloadGateKit"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
