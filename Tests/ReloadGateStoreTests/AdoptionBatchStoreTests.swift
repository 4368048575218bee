import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Adoptions in one registry batch (the registry's group commit writes them with registrations; those one
/// after the other in two statements for the lot), on every store implementation: each comes out as if it
/// had been written alone, in the batch's order, refusals included.
struct AdoptionBatchStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(String(repeating: "ad", count: 30) + String(format: "%08x", number))
    }

    /// The writes: new tokens, a token twice, one registered before (it gets the implicit instance), one
    /// of the other push type (refused), a push-to-start token, and a registration between two runs of
    /// adoptions of the same token.
    func writes(_ app: App) -> [RegistryWrite] {
        [
            .adoptDevice(app: app, token: Self.token(1), pushType: .widgets, pushToStart: false),
            .adoptDevice(app: app, token: Self.token(2), pushType: .controls, pushToStart: false),
            .adoptDevice(app: app, token: Self.token(1), pushType: .widgets, pushToStart: false),
            .adoptDevice(app: app, token: Self.token(3), pushType: .widgets, pushToStart: false),
            .adoptDevice(app: app, token: Self.token(4), pushType: .widgets, pushToStart: false),
            .adoptDevice(app: app, token: Self.token(5), pushType: .liveactivity, pushToStart: true),
            .adoptDevice(app: app, token: Self.token(2), pushType: .widgets, pushToStart: false),
            .putDevice(app: app, token: Self.token(1), widgets: [
                WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration([:])),
            ], previousToken: nil),
            .adoptDevice(app: app, token: Self.token(1), pushType: .widgets, pushToStart: false),
            .adoptDevice(app: app, token: Self.token(6), pushType: .widgets, pushToStart: false),
        ]
    }

    /// Registered before the writes: token 3 with a widget, token 4 as a control.
    func prepare(_ store: any GatewayStore, _ app: App) async throws {
        _ = try await store.writeRegistry([
            .putDevice(app: app, token: Self.token(3), widgets: [
                WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration([:])),
            ], previousToken: nil),
            .putControl(app: app, token: Self.token(4), control: ControlRegistration(kind: "garage", configuration: WidgetConfiguration([:])), previousToken: nil),
        ], now: now)
    }

    @Test(arguments: StoreImplementation.all) func adoptionsInOneBatchComeOutAsOneByOne(_ implementation: StoreImplementation) async throws {
        var transcripts: [[String]] = []
        for together in [true, false] {
            let directory = try TemporaryDirectory("adoption-batch")
            defer { directory.remove() }
            let store = try await implementation.open(directory, now: now)
            defer { try? store.close() }
            let app = try await store.createApp(bundle: try BundleID("com.example.herd"), teamID: nil, allowsExemptions: false, now: now).app
            try await prepare(store, app)
            var results: [Result<RegistryWritten, RegistryError>] = []
            if together {
                results = try await store.writeRegistry(writes(app), now: now)
            } else {
                for write in writes(app) { results += try await store.writeRegistry([write], now: now) }
            }
            var transcript = Transcript()
            for result in results { transcript.add(result) }
            // And what the store holds after: each token's status and its push targets.
            for number in 1...6 {
                let status = try await store.pushDeviceStatus(app: app, token: Self.token(number))
                guard case .active(let device, let pushType) = status else {
                    transcript.lines.append("token \(number): \(status)")
                    continue
                }
                let targets = try await store.pushTargets(device: device, kind: nil, match: [:])
                transcript.lines.append("token \(number): \(transcript.name(device, "d")) \(pushType) \(targets.map { transcript.name($0, "i") })")
            }
            transcripts.append(transcript.lines)
        }
        #expect(transcripts[0] == transcripts[1], "written together:\n\(transcripts[0].joined(separator: "\n"))\none by one:\n\(transcripts[1].joined(separator: "\n"))")
        // What the writes mean, read from the transcript written together.
        #expect(transcripts[0] == [
            "adopted d1 i1 created added",
            "adopted d2 i2 created added",
            "adopted d1 i1",
            "adopted d3 i3 added",
            "refused: registered for controls",
            "adopted d4 i4 created added",
            "refused: registered for controls",
            "registered d1 [\"i5\"] removed [\"i1\"]",
            "adopted d1 i6 added",
            "adopted d5 i7 created added",
            "token 1: d1 widgets [\"i5\", \"i6\"]",
            "token 2: d2 controls [\"i2\"]",
            "token 3: d3 widgets [\"i8\", \"i3\"]",
            "token 4: d6 controls [\"i9\"]",
            "token 5: d4 liveactivity [\"i4\"]",
            "token 6: d5 widgets [\"i7\"]",
        ])
    }

    /// More adoptions in one batch than one statement takes (``SQLSession/adopt(_:now:)``'s chunks of
    /// 1,000): a token adopted in the first statement and named again in the second finds its device and
    /// instance, as written one by one would (``adoptionsInOneBatchComeOutAsOneByOne(_:)`` compares the two
    /// ways; a thousand single writes here would hold the database server shared by the suite).
    @Test(arguments: StoreImplementation.all) func adoptionsOverTwoStatementsFindWhatTheFirstCreated(_ implementation: StoreImplementation) async throws {
        // Tokens 1-1,000 fill the first statement; the second names 1 and 500 again between two new ones.
        let numbers = Array(1...1_000) + [1, 1_001, 500, 1_002]
        let directory = try TemporaryDirectory("adoption-chunks")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.herd"), teamID: nil, allowsExemptions: false, now: now).app
        let writes = numbers.map { RegistryWrite.adoptDevice(app: app, token: Self.token($0), pushType: .widgets, pushToStart: false) }
        var transcript = Transcript()
        for result in try await store.writeRegistry(writes, now: now) { transcript.add(result) }
        // (Compared line by line: a thousand lines in a failure's message say nothing.)
        #expect(transcript.lines.count == numbers.count)
        let first = transcript.lines.prefix(1_000).enumerated().first { $1 != "adopted d\($0 + 1) i\($0 + 1) created added" }
        #expect(first == nil, "write \(first?.offset ?? 0): \(first?.element ?? "")")
        #expect(transcript.lines.dropFirst(1_000) == ["adopted d1 i1", "adopted d1001 i1001 created added", "adopted d500 i500", "adopted d1002 i1002 created added"])
        // And the store holds one device a token, with the instance the adoptions named.
        for number in [1, 500, 1_001, 1_002] {
            let status = try await store.pushDeviceStatus(app: app, token: Self.token(number))
            guard case .active(let device, _) = status else {
                Issue.record("token \(number): \(status)")
                continue
            }
            #expect(transcript.name(device, "d") == "d\(number)")
        }
    }

    /// Ids named in order of appearance (the stores' ids differ with what a refused insert used up).
    struct Transcript {
        var lines: [String] = []
        var names: [String: String] = [:]
        var counts: [String: Int] = [:]

        mutating func name(_ id: Int64, _ prefix: String) -> String {
            if let known = names["\(prefix)\(id)"] { return known }
            counts[prefix, default: 0] += 1
            let name = "\(prefix)\(counts[prefix]!)"
            names["\(prefix)\(id)"] = name
            return name
        }

        mutating func add(_ result: Result<RegistryWritten, RegistryError>) {
            switch result {
            case .success(.adopted(let adopted)):
                let device = name(adopted.device, "d"), instance = name(adopted.instance, "i")
                lines.append("adopted \(device) \(instance)" + (adopted.created ? " created" : "") + (adopted.instanceAdded ? " added" : ""))
            case .success(.device(let registration)):
                lines.append("registered \(name(registration.device, "d")) \(registration.instances.map { name($0.id, "i") }) removed \(registration.removedInstances.map { name($0, "i") })")
            case .success(.timeline(let instance)):
                lines.append("timeline \(name(instance, "i"))")
            case .failure(.otherPushType(_, let registered)):
                lines.append("refused: registered for \(registered)")
            case .failure(let refusal):
                lines.append("refused \(refusal)")
            }
        }
    }
}
