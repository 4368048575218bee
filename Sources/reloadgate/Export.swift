import ArgumentParser
import Crypto
import Foundation
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateSimulation
import ReloadGateStore

/// `reloadgate export`: the gateway's own traffic as a trace for `reloadgate simulate`.
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the gateway's traffic since a time as a trace (JSON lines) for `reloadgate simulate`.",
        discussion: """
            Reads the ledger of the data directory or the PostgreSQL database (also while gateways run): the registry as it stands \
            (each active device with its widgets, registered at the trace's start), the widgets' latest \
            timelines (at the time they were reported, or at the start), and every push and webhook call \
            received since then, with its targets and the decisions the scheduler made on arrival, so that \
            `reloadgate simulate --check` can compare its replay with them. No secrets; device tokens are \
            replaced by stable pseudonyms (a SHA-256 of the app and token) unless --keep-tokens. Only the \
            latest timeline of each widget is kept, and budgets start full at the trace's start: decisions \
            that depended on older state may replay differently. On PostgreSQL, the whole cluster's traffic, \
            whichever gateway took it.
            """
    )

    @Option(name: .long, help: ArgumentHelp("How far back: a number with s, m, h or d (e.g. 24h), at most 3650d.", valueName: "duration"))
    var since: String

    @Option(name: .long, help: ArgumentHelp("Only this app's devices and requests.", valueName: "bundle"))
    var bundle: String?

    @Flag(name: .long, help: "Write device tokens as they are instead of pseudonyms.")
    var keepTokens = false

    @Option(name: [.short, .long], help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
    var output: String?

    @OptionGroup var store: StoreOptions

    /// Milliseconds of a duration such as `90s`, `15m`, `24h` or `7d` (`nil`: not one, or out of range).
    static func milliseconds(_ text: String) -> Int64? {
        guard let unit = text.last, let count = Int64(text.dropLast()), count >= 0 else { return nil }
        let factor: Int64
        switch unit {
        case "s": factor = 1000
        case "m": factor = 60_000
        case "h": factor = 3_600_000
        case "d": factor = 86_400_000
        default: return nil
        }
        let (value, overflow) = count.multipliedReportingOverflow(by: factor)
        guard !overflow, value <= 3650 * 86_400_000 else { return nil }
        return value
    }

    func validate() throws {
        guard Self.milliseconds(since) != nil else {
            throw ValidationError("--since must be a duration such as 90s, 15m, 24h or 7d, at most 3650d")
        }
    }

    func run() async throws {
        let opened = try await store.openStore()
        defer { try? opened.close() }
        let start = Timestamp(clampingUnixSeconds: Date().timeIntervalSince1970).adding(milliseconds: -Self.milliseconds(since)!)
        if let bundle {
            // A mistyped bundle would otherwise export an empty trace and exit 0.
            guard try await opened.app(bundle: try Apps.bundleID(bundle)) != nil else {
                throw CommandFailure.exit("no app \(bundle) (`reloadgate apps list` shows the apps)", status: 1)
            }
        }
        // On a terminal (standard error), what it is doing while it works; nothing on a pipe.
        let progress = ProgressLine.onTerminal("export")
        let ledger: LedgerExport
        progress?.begin("reading the ledger", unit: "rows")
        var rowsRead: (@Sendable (Int) -> Void)?
        if let progress { rowsRead = { rows in progress.advance(to: rows) } }
        do {
            ledger = try await opened.exportLedger(since: start, bundle: bundle, progress: rowsRead)
        } catch {
            progress?.end()
            throw CommandFailure.exit("cannot read the ledger: \(error)", status: 1)
        }
        progress?.end()
        let (lines, leftOut) = Self.trace(ledger, start: start, keepTokens: keepTokens, progress: progress)
        let text = lines.joined(separator: "\n") + (lines.isEmpty ? "" : "\n")
        if let output {
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                throw CommandFailure.exit("cannot write \(output): \(error.localizedDescription)", status: 1)
            }
        } else {
            FileHandle.standardOutput.write(Data(text.utf8))
        }
        var summary = "reloadgate: exported \(ledger.devices.count) devices, \(ledger.timelines.count) timelines, \(ledger.requests.count - leftOut) requests since \(start.rfc3339)"
        if leftOut > 0 { summary += " (\(leftOut) left out: all their widgets were removed since)" }
        FileHandle.standardError.write(Data((summary + "\n").utf8))
        if let note = try? await Self.prunedNote(opened, start: start) {
            FileHandle.standardError.write(Data((note + "\n").utf8))
        }
    }

    /// What the trace cannot include because the ledger's retention deleted it (`nil`: nothing).
    static func prunedNote(_ store: any GatewayStore, start: Timestamp) async throws -> String? {
        guard let latest = try await store.ledgerPruning(request: nil).latest, start < latest.receivedBefore else { return nil }
        return "reloadgate: requests received before \(latest.receivedBefore.rfc3339) were pruned from the ledger (ledger.retention), "
            + "so the trace has none from \(start.rfc3339) to then"
    }

    /// The trace's lines, and how many requests were left out (every target's widget removed since).
    static func trace(_ ledger: LedgerExport, start: Timestamp, keepTokens: Bool, progress: ProgressLine? = nil) -> (lines: [String], leftOut: Int) {
        var names = TraceNames()
        var instances: [Int64: InstanceHandle] = [:]
        // The instances whose requests carry content (Live Activities): only theirs are parsed.
        var carryContent = Set<Int64>()
        var events: [TraceEvent] = []
        for device in ledger.devices {
            let name = keepTokens ? "\(device.bundle)/\(device.token)" : pseudonym(bundle: device.bundle, token: device.token)
            let handle = names.device(name)
            let widgets = device.widgets.map { widget in
                let instance = names.instance(device: handle, widget: widget.widgetID)
                instances[widget.id] = instance
                if device.pushType.descriptor.mergeRule == .newestContent { carryContent.insert(widget.id) }
                return TraceWidget(instance: instance, kind: widget.kind, pushType: device.pushType, family: device.pushType == .widgets ? "" : widget.family)
            }
            events.append(.registration(at: start, device: handle, widgets: widgets))
        }
        for timeline in ledger.timelines {
            guard let instance = instances[timeline.widget] else { continue }
            let at = max(start, timeline.reportedAt)
            // A planned reload before the trace starts happened before it (or never will): left out.
            let planned = timeline.plannedReload.flatMap { $0 >= at ? $0 : nil }
            events.append(.timeline(at: at, instance: instance, plannedReload: planned))
        }
        var leftOut = 0
        for request in ledger.requests {
            var targets: [InstanceHandle] = []
            var recorded: [DecisionKind] = []
            for decision in request.decisions {
                guard let kind = DecisionKind(rawValue: decision.kind) else { continue }
                if let instance = decision.instance {
                    guard let handle = instances[instance] else { continue }
                    targets.append(handle)
                }
                recorded.append(kind)
            }
            if recorded.isEmpty || (targets.isEmpty && recorded != [.noMatch]) {
                leftOut += 1
                continue
            }
            events.append(
                .request(
                    TraceRequest(
                        at: request.received,
                        source: request.source == "webhook" ? .webhook : .push,
                        targets: .instances(targets),
                        priority: Priority(rawValue: request.priority) ?? .high,
                        expiration: request.expiration,
                        collapseID: request.collapseID,
                        team: request.collapseID == nil ? nil : "\(request.source):\(request.app)",
                        exempt: request.exempt,
                        recorded: recorded,
                        // A Live Activity update's event and timestamp, from its recorded body.
                        activity: request.decisions.contains { $0.instance.map(carryContent.contains) == true }
                            ? ActivityPayload.content(ofRecorded: request.summary) : nil
                    )
                )
            )
        }
        progress?.begin("writing the trace", total: events.count, unit: "lines")
        defer { progress?.end() }
        var lines: [String] = []
        lines.reserveCapacity(events.count)
        for event in events {
            lines.append(TraceFile.line(event, names: names))
            progress?.advance(to: lines.count)
        }
        return (lines, leftOut)
    }

    /// A device's stable pseudonym: the first 16 hex digits of SHA-256 over the app and the token.
    static func pseudonym(bundle: String, token: String) -> String {
        let digest = SHA256.hash(data: Data("reloadgate-export\u{0}\(bundle)\u{0}\(token.lowercased())".utf8))
        return "d-" + digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }
}
