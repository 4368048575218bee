import ArgumentParser
import Foundation
import ReloadGateCore
import ReloadGateServer
import ReloadGateSimulation

/// `reloadgate simulate`: a trace replayed through the scheduling rules on a virtual clock.
struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a trace of pushes through the scheduling rules and report what each widget kind gets.",
        discussion: """
            The trace is JSON lines (docs/SIMULATION.md): written by `reloadgate export`, by hand, or generated \
            with --generate. It runs through the gateway's own scheduler on a virtual clock, as fast as the \
            core runs: no network, no store. Prints per widget kind the requests and what was decided \
            (scheduled, merged, absorbed, deferred, expired), the reloads by push and by timeline, the pushes \
            predicted to be throttled on the device, reloads per instance per day and staleness (the time \
            from a request to the reload that served it), and writes an HTML report with charts (--report). \
            The policy: the defaults, a gateway configuration file's `scheduling` section (--policy), then \
            --set changes. --compare and --compare-set give a second policy, replayed on the same trace and \
            shown beside the first. An exported trace carries the gateway's decisions: the replay is \
            compared with them (--check fails when one differs).
            """
    )

    @Argument(help: ArgumentHelp("The trace (JSON lines). Not with --generate.", valueName: "trace.jsonl"))
    var trace: String?

    @Option(name: .long, help: ArgumentHelp("Generate a synthetic day instead of reading a trace: sports-evening.", valueName: "profile"))
    var generate: String?

    @Option(name: .long, help: "Generated: devices (widgets per device: --widgets).")
    var devices = 10_000

    @Option(name: .long, help: "Generated: widgets per device; kinds in turn scores, news, weather.")
    var widgets = 2

    @Option(name: .long, help: "Generated: matches the devices follow.")
    var matches = 50

    @Option(name: .long, help: "Generated: score changes per match.")
    var changes = 6

    @Option(name: .long, help: "Generated: news pushes per device over the day.")
    var news = 2

    @Option(name: .long, help: ArgumentHelp("Generated: push on every score `change`, or every N minutes while a match runs.", valueName: "change|N"))
    var pushEvery = "change"

    @Option(name: .long, help: ArgumentHelp("Generated: compare with the same day pushed this way instead (same policy unless --compare or --compare-set).", valueName: "change|N"))
    var comparePushEvery: String?

    @Option(name: .long, help: "Generated: the random seed.")
    var seed: UInt64 = 1

    @Option(name: .long, help: ArgumentHelp("Generated: also write the trace to this file.", valueName: "file"))
    var writeTrace: String?

    @Option(name: .long, help: ArgumentHelp("A gateway configuration file whose `scheduling` section is the policy.", valueName: "file"))
    var policy: String?

    @Option(name: .customLong("set"), help: ArgumentHelp("Change the policy: FIELD=VALUE or KIND.FIELD=VALUE (repeatable), e.g. scores.daily=60; control:FIELD=VALUE or control:KIND.FIELD=VALUE for controls.", valueName: "assignment"))
    var sets: [String] = []

    @Option(name: .long, help: ArgumentHelp("A second policy to compare (configuration file); default: the first policy.", valueName: "file"))
    var compare: String?

    @Option(name: .customLong("compare-set"), help: ArgumentHelp("Changes for the second policy (repeatable).", valueName: "assignment"))
    var compareSets: [String] = []

    @Option(name: .long, help: ArgumentHelp("Run the clock to this time (RFC 3339) after the last event (default: the last event; generated: the day's end).", valueName: "time"))
    var until: String?

    @Option(name: .long, help: ArgumentHelp("Where to write the HTML report.", valueName: "file"))
    var report = "simulation-report.html"

    @Flag(name: .long, help: "Write no HTML report.")
    var noReport = false

    @Option(name: .long, help: "The report's title.")
    var title = "ReloadGate what-if simulation"

    @Flag(name: .long, help: "Print the figures as JSON.")
    var json = false

    @Flag(name: .long, help: "Exit with status 1 when a replayed decision differs from the one the trace recorded.")
    var check = false

    func validate() throws {
        if (trace == nil) == (generate == nil) { throw ValidationError("give a trace file or --generate sports-evening, not both") }
        if let generate, generate != "sports-evening" { throw ValidationError("--generate: the profile is sports-evening") }
        func check(_ value: Int, _ range: ClosedRange<Int>, _ name: String) throws {
            guard range.contains(value) else { throw ValidationError("--\(name) must be from \(range.lowerBound) to \(range.upperBound)") }
        }
        try check(devices, TraceGenerator.Options.deviceRange, "devices")
        try check(widgets, TraceGenerator.Options.widgetRange, "widgets")
        try check(matches, TraceGenerator.Options.matchRange, "matches")
        try check(changes, TraceGenerator.Options.changeRange, "changes")
        try check(news, TraceGenerator.Options.newsRange, "news")
        if devices.multipliedReportingOverflow(by: widgets).partialValue > Int(Int32.max) - 1 {
            throw ValidationError("--devices x --widgets must be under 2^31")
        }
        _ = try strategy()
        if let comparePushEvery {
            guard generate != nil else { throw ValidationError("--compare-push-every needs --generate") }
            _ = try Self.strategy(comparePushEvery, option: "--compare-push-every")
        }
    }

    func strategy() throws -> TraceGenerator.Strategy { try Self.strategy(pushEvery, option: "--push-every") }

    static func strategy(_ text: String, option: String) throws -> TraceGenerator.Strategy {
        if text == "change" { return .everyChange }
        guard let minutes = Int(text), (1...1440).contains(minutes) else {
            throw ValidationError("\(option) must be `change` or minutes from 1 to 1440")
        }
        return .everyMinutes(minutes)
    }

    static func describe(_ strategy: TraceGenerator.Strategy) -> String {
        switch strategy {
        case .everyChange: "push on every score change"
        case .everyMinutes(let minutes): "push every \(minutes) min"
        }
    }

    /// A policy: a configuration file's scheduling section (or the defaults), then the assignments.
    static func policy(file: String?, base: GatewayConfiguration.Scheduling, sets: [String], option: String) throws -> GatewayConfiguration.Scheduling {
        var scheduling = base
        if let file {
            do {
                scheduling = try GatewayConfiguration.load(file: file, environment: [:]).scheduling
            } catch {
                throw CommandFailure.exit("\(option): \(error.description)", status: 2)
            }
        }
        for assignment in sets {
            if let problem = scheduling.set(assignment) {
                throw CommandFailure.exit("\(option == "--policy" ? "--set" : "--compare-set") \(problem)", status: 2)
            }
        }
        return scheduling
    }

    func run() throws {
        let first = try Self.policy(file: policy, base: .init(), sets: sets, option: "--policy")
        let comparing = compare != nil || !compareSets.isEmpty || comparePushEvery != nil
        let second = comparing ? try Self.policy(file: compare, base: first, sets: compareSets, option: "--compare") : nil
        var end: Timestamp?
        if let until {
            guard let parsed = try? Date(until, strategy: .iso8601), let time = Timestamp(unixSeconds: parsed.timeIntervalSince1970) else {
                throw CommandFailure.exit("--until must be an RFC 3339 time such as 2026-11-25T23:59:59Z", status: 2)
            }
            end = time
        }

        let started = ContinuousClock.now
        // On a terminal (standard error), what it is doing while it works; nothing on a pipe or with --json.
        let progress = ProgressLine.onTerminal("simulate", quiet: json)
        let runs: [SimulationPage.Run]
        if let trace {
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: trace))
            } catch {
                throw CommandFailure.exit("cannot read \(trace): \(error.localizedDescription)", status: 2)
            }
            var names = TraceNames()
            let events: [TraceEvent]
            progress?.begin("reading \(trace)", totalBytes: data.count)
            do {
                events = try TraceFile.read(data, names: &names, progress: progress.map { line in { line.advance(to: $0) } })
            } catch {
                progress?.end()
                throw CommandFailure.exit("\(trace): \(error.description)", status: 2)
            }
            progress?.end()
            let requests = events.reduce(0) { count, event in
                if case .request = event { count + 1 } else { count }
            }
            runs = [first, second].compactMap { $0 }.enumerated().map { index, scheduling in
                let name = comparing ? ["A", "B"][index] : "A"
                return Self.replay(events, requests: requests, scheduling.resolved, name: name, end: end, progress: progress, phase: comparing ? "replaying \(name)" : "replaying")
            }
        } else {
            var options = TraceGenerator.Options()
            options.devices = devices
            options.widgetsPerDevice = widgets
            options.matches = matches
            options.changesPerMatch = changes
            options.newsPerDevice = news
            options.strategy = try strategy()
            options.seed = seed
            progress?.begin("generating a sports evening for \(ProgressLine.grouped(devices)) devices", unit: "")
            let generator = TraceGenerator(options)
            progress?.end()
            if let writeTrace { try Self.write(generator, to: writeTrace, progress: progress) }
            let dayEnd = end ?? options.day.adding(seconds: 86_400)
            if let comparePushEvery {
                // The same day and policy pushed two ways (a second policy too, if given).
                var other = options
                other.strategy = try Self.strategy(comparePushEvery, option: "--compare-push-every")
                progress?.begin("generating the day pushed the other way", unit: "")
                let otherGenerator = TraceGenerator(other)
                progress?.end()
                let names = [Self.describe(options.strategy), Self.describe(other.strategy)]
                runs = [
                    Self.replay(
                        generator.events, requests: generator.requestCount, first.resolved, name: names[0], end: dayEnd,
                        progress: progress, phase: "replaying (\(names[0]))"
                    ),
                    Self.replay(
                        otherGenerator.events, requests: otherGenerator.requestCount, (second ?? first).resolved, name: names[1], end: dayEnd,
                        progress: progress, phase: "replaying (\(names[1]))"
                    ),
                ]
            } else {
                runs = [first, second].compactMap { $0 }.enumerated().map { index, scheduling in
                    let name = comparing ? ["A", "B"][index] : "A"
                    return Self.replay(
                        generator.events, requests: generator.requestCount, scheduling.resolved, name: name, end: dayEnd,
                        progress: progress, phase: comparing ? "replaying \(name)" : "replaying"
                    )
                }
            }
        }
        let took = started.duration(to: .now)

        if json {
            let objects = runs.map { $0.report.json(run: $0.name) }
            printLine(comparing ? "{\"runs\":[\(objects.joined(separator: ","))]}" : objects[0])
        } else {
            for (index, run) in runs.enumerated() {
                if index > 0 { printLine("") }
                printLine(run.report.text(title: comparing ? "== \(run.name) ==" : nil))
            }
            let seconds = took.seconds
            printLine("")
            let replayed = runs.map(\.report.requests).reduce(0, +)
            printLine("replayed \(replayed) requests\(trace == nil ? " (generated)" : "") in \(String(format: "%.2f", seconds)) s")
        }
        if !noReport {
            let page = SimulationPage.html(title: title, runs: runs)
            do {
                try Data(page.utf8).write(to: URL(fileURLWithPath: report), options: .atomic)
            } catch {
                throw CommandFailure.exit("cannot write \(report): \(error.localizedDescription)", status: 1)
            }
            if !json { printLine("report: \(report)") }
        }
        if check, runs.contains(where: { $0.report.mismatchCount > 0 }) {
            let report = runs.first { $0.report.mismatchCount > 0 }!.report
            let examples = report.mismatches.prefix(5).map { "request \($0.request): recorded \($0.recorded.rawValue), replayed \($0.simulated.rawValue)" }
            throw CommandFailure.exit(
                "\(report.mismatchCount) of \(report.compared) decisions differ from the trace's: \(examples.joined(separator: "; "))", status: 1
            )
        }
    }

    /// One run: the events through the scheduling rules, then the clock to `end`. `requests`: how many of
    /// the events are requests (the progress line's total).
    static func replay<Events: Sequence<TraceEvent>>(
        _ events: Events,
        requests: Int,
        _ configuration: SchedulerConfiguration,
        name: String,
        end: Timestamp?,
        progress: ProgressLine? = nil,
        phase: String = "replaying"
    ) -> SimulationPage.Run {
        var simulation = Simulation(configuration: configuration)
        // The registrations and timelines before the first request have a phase of their own: counted in
        // the requests' phase, they made its first rate and time left wrong by minutes.
        progress?.begin("\(phase): registrations and timelines", unit: "events")
        var replayed = 0
        var before = 0
        for event in events {
            simulation.apply(event)
            if case .request = event {
                if replayed == 0 { progress?.begin(phase, total: requests, unit: "requests") }
                replayed += 1
                progress?.advance(to: replayed)
            } else if replayed == 0 {
                before += 1
                progress?.advance(to: before)
            }
        }
        progress?.end()
        simulation.finish(at: end)
        return SimulationPage.Run(name: name, report: simulation.report())
    }

    static func write(_ generator: TraceGenerator, to path: String, progress: ProgressLine? = nil) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw CommandFailure.exit("cannot write \(path)", status: 1)
        }
        defer { try? handle.close() }
        let names = generator.names()
        var buffer = ""
        var written = 0
        progress?.begin("writing \(path)", total: generator.requestCount, unit: "requests")
        defer { progress?.end() }
        for event in generator.events {
            if case .request = event {
                written += 1
                progress?.advance(to: written)
            }
            buffer += TraceFile.line(event, names: names)
            buffer += "\n"
            if buffer.utf8.count > 1 << 20 {
                handle.write(Data(buffer.utf8))
                buffer = ""
            }
        }
        handle.write(Data(buffer.utf8))
    }
}
