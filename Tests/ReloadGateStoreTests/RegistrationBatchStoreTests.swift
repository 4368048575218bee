import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// Registrations in one registry batch (those of distinct tokens that retire none are written together:
/// the tokens' rows read in one statement, new devices inserted in one, their instances in one per 500
/// rows), on every store implementation: each comes out as if it had been written alone, in the batch's
/// order, refusals included.
struct RegistrationBatchStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)
    typealias Transcript = AdoptionBatchStoreTests.Transcript

    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(String(repeating: "4e", count: 30) + String(format: "%08x", number))
    }

    static func widgets(_ ids: [String], team: String = "1") -> [WidgetRegistration] {
        ids.map { WidgetRegistration(id: $0, kind: "scores", family: .systemSmall, configuration: WidgetConfiguration(["team": .string(team)])) }
    }

    /// Registered before the writes: token 2 with one widget, token 4 as a control, token 7 retired by
    /// token 10 (its row inactive).
    func prepare(_ store: any GatewayStore, _ app: App) async throws -> [Result<RegistryWritten, RegistryError>] {
        try await store.writeRegistry([
            .putDevice(app: app, token: Self.token(2), widgets: Self.widgets(["w1"]), previousToken: nil),
            .putControl(app: app, token: Self.token(4), control: ControlRegistration(kind: "garage", configuration: WidgetConfiguration([:])), previousToken: nil),
            .putDevice(app: app, token: Self.token(7), widgets: Self.widgets(["w1"]), previousToken: nil),
            .putDevice(app: app, token: Self.token(10), widgets: Self.widgets(["w1"]), previousToken: Self.token(7)),
        ], now: now)
    }

    /// The writes: new tokens of each push type, a token known with its widgets changed, one of the
    /// other push type (refused), a token twice, a retirement between runs, a retired token registered
    /// again, the same token in two apps, an adopted token then registered, and a timeline.
    func writes(_ app: App, _ other: App) -> [RegistryWrite] {
        [
            .putDevice(app: app, token: Self.token(1), widgets: Self.widgets(["w1", "w2"]), previousToken: nil),
            .putDevice(app: app, token: Self.token(2), widgets: Self.widgets(["w1", "w2"], team: "2"), previousToken: nil),
            .putControl(app: app, token: Self.token(3), control: ControlRegistration(kind: "light", configuration: WidgetConfiguration([:])), previousToken: nil),
            .putDevice(app: app, token: Self.token(4), widgets: Self.widgets(["w1"]), previousToken: nil),
            .putDevice(app: other, token: Self.token(1), widgets: Self.widgets(["w9"]), previousToken: nil),
            .putDevice(app: app, token: Self.token(1), widgets: Self.widgets(["w2"]), previousToken: nil),
            .putDevice(app: app, token: Self.token(5), widgets: Self.widgets(["w1"]), previousToken: Self.token(10)),
            .putActivity(app: app, token: Self.token(6), activity: ActivityRegistration(attributesType: "ScoreAttributes"), previousToken: nil),
            .putDevice(app: app, token: Self.token(7), widgets: Self.widgets(["w1", "w3"]), previousToken: nil),
            .adoptDevice(app: app, token: Self.token(8), pushType: .widgets, pushToStart: false),
            .putDevice(app: app, token: Self.token(8), widgets: Self.widgets(["w1"]), previousToken: nil),
            .putTimeline(app: app, token: Self.token(1), widgetID: "w2", timeline: Timeline(entries: [], policy: .never)),
            .putDevice(app: app, token: Self.token(9), widgets: Self.widgets(["w1", "w2", "w3"]), previousToken: nil),
        ]
    }

    @Test(arguments: StoreImplementation.all) func registrationsInOneBatchComeOutAsOneByOne(_ implementation: StoreImplementation) async throws {
        var transcripts: [[String]] = []
        for together in [true, false] {
            let directory = try TemporaryDirectory("registration-batch")
            defer { directory.remove() }
            let store = try await implementation.open(directory, now: now)
            defer { try? store.close() }
            let app = try await store.createApp(bundle: try BundleID("com.example.release"), teamID: nil, allowsExemptions: false, now: now).app
            let other = try await store.createApp(bundle: try BundleID("com.example.other"), teamID: nil, allowsExemptions: false, now: now).app
            let prepared = try await prepare(store, app)
            var results: [Result<RegistryWritten, RegistryError>] = []
            if together {
                results = try await store.writeRegistry(writes(app, other), now: now)
            } else {
                for write in writes(app, other) { results += try await store.writeRegistry([write], now: now) }
            }
            var transcript = Transcript()
            for result in prepared { transcript.add(result) }
            for result in results { transcript.add(result) }
            // And what the store holds after: each token's status, its push targets and their configurations.
            for (owner, number) in (1...10).map({ (app, $0) }) + [(other, 1)] {
                let status = try await store.pushDeviceStatus(app: owner, token: Self.token(number))
                let label = "\(owner.bundle) token \(number)"
                guard case .active(let device, let pushType) = status else {
                    transcript.lines.append("\(label): \(status)")
                    continue
                }
                let targets = try await store.pushTargets(device: device, kind: nil, match: [:])
                let teams = try await store.pushTargets(device: device, kind: nil, match: ["team": .string("2")])
                transcript.lines.append(
                    "\(label): \(transcript.name(device, "d")) \(pushType) \(targets.map { transcript.name($0, "i") }) team 2 \(teams.map { transcript.name($0, "i") })"
                )
            }
            transcripts.append(transcript.lines)
        }
        #expect(transcripts[0] == transcripts[1], "written together:\n\(transcripts[0].joined(separator: "\n"))\none by one:\n\(transcripts[1].joined(separator: "\n"))")
        // What the writes mean, read from the transcript written together.
        #expect(transcripts[0] == [
            // Prepared: tokens 2, 4 (a control), 7 and 10 (retiring 7).
            "registered d1 [\"i1\"] removed []",
            "registered d2 [\"i2\"] removed []",
            "registered d3 [\"i3\"] removed []",
            "registered d4 [\"i4\"] removed []",
            // The writes.
            "registered d5 [\"i5\", \"i6\"] removed []",
            "registered d1 [\"i1\", \"i7\"] removed []",  // w1 keeps its instance
            "registered d6 [\"i8\"] removed []",
            "refused: registered for controls",
            "registered d7 [\"i9\"] removed []",
            "registered d5 [\"i6\"] removed [\"i5\"]",
            "registered d8 [\"i10\"] removed []",
            "registered d9 [\"i11\"] removed []",
            "registered d3 [\"i12\", \"i13\"] removed []",  // the retired token's row, active again
            "adopted d10 i14 created added",
            "registered d10 [\"i15\"] removed [\"i14\"]",
            "timeline i6",
            "registered d11 [\"i16\", \"i17\", \"i18\"] removed []",
            // What the store holds.
            "com.example.release token 1: d5 widgets [\"i6\"] team 2 []",
            "com.example.release token 2: d1 widgets [\"i1\", \"i7\"] team 2 [\"i1\", \"i7\"]",
            "com.example.release token 3: d6 controls [\"i8\"] team 2 []",
            "com.example.release token 4: d2 controls [\"i2\"] team 2 []",
            "com.example.release token 5: d8 widgets [\"i10\"] team 2 []",
            "com.example.release token 6: d9 liveactivity [\"i11\"] team 2 []",
            "com.example.release token 7: d3 widgets [\"i12\", \"i13\"] team 2 []",
            "com.example.release token 8: d10 widgets [\"i15\"] team 2 []",
            "com.example.release token 9: d11 widgets [\"i16\", \"i17\", \"i18\"] team 2 []",
            "com.example.release token 10: unregistered(since: \(now))",
            "com.example.other token 1: d7 widgets [\"i9\"] team 2 []",
        ])
    }

    /// More new instances in one batch than one statement takes (500 rows), and more tokens than one
    /// chunk (1,000): every registration finds its own instances, as written one by one.
    @Test(arguments: StoreImplementation.all) func manyRegistrationsSpanSeveralStatements(_ implementation: StoreImplementation) async throws {
        let directory = try TemporaryDirectory("registration-chunks")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.release"), teamID: nil, allowsExemptions: false, now: now).app
        // Tokens 1-1,001 with one widget each, then 1,002-1,011 with sixty each (600 instance rows).
        let numbers = Array(1...1_011)
        let writes = numbers.map { number in
            RegistryWrite.putDevice(
                app: app, token: Self.token(number), widgets: Self.widgets((0..<(number > 1_001 ? 60 : 1)).map { "w\($0)" }, team: "\(number)"),
                previousToken: nil
            )
        }
        let results = try await store.writeRegistry(writes, now: now)
        #expect(results.count == numbers.count)
        var devices = Set<Int64>()
        for (number, result) in zip(numbers, results) {
            guard case .success(.device(let registration)) = result else {
                Issue.record("token \(number): \(result)")
                continue
            }
            devices.insert(registration.device)
            #expect(registration.instances.map(\.widget.id) == (0..<(number > 1_001 ? 60 : 1)).map { "w\($0)" })
            // The store's own answer: the device's instances with this token's configuration are the ones returned.
            let matching = try await store.pushTargets(device: registration.device, kind: nil, match: ["team": .string("\(number)")])
            #expect(Set(matching) == Set(registration.instances.map(\.id)), "token \(number)")
            guard case .active(let device, _) = try await store.pushDeviceStatus(app: app, token: Self.token(number)) else {
                Issue.record("token \(number) is not active")
                continue
            }
            #expect(device == registration.device)
        }
        #expect(devices.count == numbers.count)
    }
}
