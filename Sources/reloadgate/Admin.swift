import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateAPI
import ReloadGateCore
import ReloadGateServer

/// The options of commands that talk to a running gateway over its admin socket.
struct AdminOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The admin socket (default: admin.socket of the configuration, or data/admin.sock).", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("YAML configuration file (for admin.socket and data.directory).", valueName: "file"))
    var config: String?

    @Flag(name: .long, help: "Print the answer as JSON (for scripts).")
    var json = false

    @Option(name: .long, help: ArgumentHelp("The admin API's TLS listener instead of the socket, e.g. https://gateway:8444 (admin.tls).", valueName: "url"))
    var url: String?

    @Option(name: .customLong("token-file"), help: ArgumentHelp("With --url: the file with the admin token (default: admin.tokenFile, or data/admin.token).", valueName: "file"))
    var tokenFile: String?

    @Option(name: .long, help: ArgumentHelp("With --url: CA certificates (PEM) to trust (default: certs/ca.pem when it exists, else the system's).", valueName: "file"))
    var cacert: String?

    /// The socket's path: `--socket`, or the configuration's.
    func socketPath() throws -> String {
        if let socket { return socket }
        do {
            return try GatewayConfiguration.load(file: config, environment: ProcessInfo.processInfo.environment).adminSocketPath
        } catch {
            throw CommandFailure.exit(error.description, status: 2)
        }
    }

    /// Sends one request to the admin API and returns its answer as `Answer` (the type the server
    /// encodes, ``AdminAPI``); exits 1 with the server's message on an error answer, and with a hint when
    /// no gateway listens.
    func call<Answer: Decodable>(_ method: HTTPMethod, _ path: String, body: (any Encodable)? = nil, as answer: Answer.Type) async throws -> Answer {
        do {
            return try Self.decode(answer, try await send(method, path, body: body), path: path)
        } catch let error as NoGateway {
            throw CommandFailure.exit(error.description, status: 1)
        }
    }

    /// Like ``call(_:_:body:as:)``, for commands that also work without a gateway: `nil` when no gateway
    /// answers on the socket (the command then changes the data directory itself).
    func callIfRunning<Answer: Decodable>(_ method: HTTPMethod, _ path: String, body: (any Encodable)? = nil, as answer: Answer.Type) async throws -> Answer? {
        let data: Data
        do {
            data = try await send(method, path, body: body)
        } catch is NoGateway where url == nil {
            return nil
        }
        return try Self.decode(answer, data, path: path)
    }

    private static func decode<Answer: Decodable>(_ answer: Answer.Type, _ data: Data, path: String) throws -> Answer {
        do {
            return try BodyJSON.decode(answer, from: data)
        } catch {
            throw CommandFailure.exit("the gateway's answer to \(path) is not what this reloadgate reads (another version?): \(error)", status: 1)
        }
    }

    /// No gateway answers where the command looked.
    struct NoGateway: Error, CustomStringConvertible {
        var description: String
    }

    private func send(_ method: HTTPMethod, _ path: String, body: (any Encodable)?) async throws -> Data {
        if let url { return try await callTLS(url, method, path, body: body) }
        let socket = try socketPath()
        guard FileManager.default.fileExists(atPath: socket) else {
            throw NoGateway(description: "no gateway is running here: \(socket) does not exist (start one with `reloadgate serve`, or give --socket)")
        }
        guard let url = URL(httpURLWithSocketPath: socket, uri: path) else {
            throw CommandFailure.exit("\(socket) cannot be used as a socket path", status: 2)
        }
        return try await CommandHTTPClient.with { client in
            try await call(client, socket: socket, url: url, method, body: body)
        }
    }

    /// The same over the admin TLS listener, with the bearer token.
    private func callTLS(_ base: String, _ method: HTTPMethod, _ path: String, body: (any Encodable)?) async throws -> Data {
        guard let parsed = URL(string: base), parsed.scheme == "https", parsed.host != nil else {
            throw CommandFailure.exit("--url must be https://host:port, not \(base)", status: 2)
        }
        var tokenPath = tokenFile ?? ""
        if tokenFile == nil {
            do {
                tokenPath = try GatewayConfiguration.load(file: config, environment: ProcessInfo.processInfo.environment).adminTokenPath
            } catch {
                throw CommandFailure.exit(error.description, status: 2)
            }
        }
        guard let token = (try? String(contentsOfFile: tokenPath, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines),
            !token.isEmpty
        else {
            throw CommandFailure.exit("cannot read the admin token from \(tokenPath) (give --token-file)", status: 2)
        }
        let ca = cacert ?? (FileManager.default.fileExists(atPath: "certs/ca.pem") ? "certs/ca.pem" : nil)
        let target = base.hasSuffix("/") ? String(base.dropLast()) : base
        guard let full = URL(string: target + path) else { throw CommandFailure.exit("bad URL \(target + path)", status: 2) }
        return try await CommandHTTPClient.with(tls: try CommandHTTPClient.tls(trusting: ca)) { client in
            try await call(client, socket: base, url: full, method, body: body, token: token)
        }
    }

    private func call(
        _ client: HTTPClient,
        socket: String,
        url: URL,
        _ method: HTTPMethod,
        body: (any Encodable)?,
        token: String? = nil
    ) async throws -> Data {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        if let token { request.headers.add(name: "authorization", value: "bearer \(token)") }
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try BodyJSON.encode(body)))
        }
        let response: HTTPClientResponse
        let data: ByteBuffer
        do {
            response = try await client.execute(request, timeout: .seconds(30))
            data = try await response.body.collect(upTo: 64 << 20)
        } catch {
            throw NoGateway(description: "no gateway answers on \(socket) (\(error)); is `reloadgate serve` running?")
        }
        guard response.status == .ok else {
            let refusal = try? BodyJSON.decode(APIError.Body.self, from: Data(data.readableBytesView))
            let message = refusal?.message ?? String(decoding: data.readableBytesView, as: UTF8.self)
            throw CommandFailure.exit(message, status: response.status.code == 422 ? 2 : 1)
        }
        return Data(data.readableBytesView)
    }
}

/// Text helpers for the commands' tables.
enum AdminText {
    /// A query parameter's value, percent-encoded (`&`, `=` and `+` too).
    static func queryValue(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(["&", "=", "+"])) ?? value
    }

    /// Columns padded to their widest cell.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n")
    }

    /// `in 4m 10s` / `2m ago` from seconds.
    static func relative(_ seconds: Double) -> String {
        let magnitude = Int(abs(seconds).rounded())
        let text: String
        switch magnitude {
        case ..<60: text = "\(magnitude)s"
        case ..<3600: text = "\(magnitude / 60)m \(magnitude % 60)s"
        case ..<86_400: text = "\(magnitude / 3600)h \(magnitude / 60 % 60)m"
        default: text = "\(magnitude / 86_400)d \(magnitude / 3600 % 24)h"
        }
        return seconds >= 0 ? "in \(text)" : "\(text) ago"
    }

    /// Seconds from `now` (RFC 3339) to `time` (RFC 3339).
    static func seconds(from now: String?, to time: String?) -> Double? {
        guard let now = now.flatMap(date), let time = time.flatMap(date) else { return nil }
        return time.timeIntervalSince(now)
    }

    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// A short device token: its first 8 digits.
    static func short(_ token: String?) -> String {
        guard let token else { return "-" }
        return String(token.prefix(8)) + "…"
    }

    /// A cell: the text, or `-` for none.
    static func text(_ value: String?) -> String { value ?? "-" }

    /// An expiration as the admin API gives it (a time, the epoch for now or never, or none).
    static func expiration(_ value: String?) -> String {
        value == Timestamp.nowOrNever.rfc3339 ? "0 (now or never)" : text(value)
    }

    /// A JSON value from the sender (a configuration, a request's target): a string as itself, anything
    /// else as one line of JSON with sorted keys.
    static func text(_ value: JSONValue) -> String {
        switch value {
        case .null: "-"
        case .string(let text): text
        default: FoundationOrderJSON.text(value)
        }
    }

    /// A list of ids as JSON, `[3,4]`.
    static func text(_ values: [Int64]) -> String { "[" + values.map(String.init).joined(separator: ",") + "]" }
}

/// `reloadgate pending`.
struct Pending: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List pending reloads: what waits, until when, and why.",
        discussion: """
            One line per widget instance with a pending reload, in due order: device, widget, kind, \
            configuration, due time (relative and absolute), priority, merged requests, and what it waits \
            for (budget, interval, low-priority, background, coalescing, or due). Asks the running gateway \
            over its admin socket.
            """
    )

    @Option(name: .long, help: "Only this app.") var bundle: String?
    @Option(name: .long, help: "Only widgets of this kind.") var kind: String?
    @Option(name: .long, help: ArgumentHelp("Only this device.", valueName: "token")) var device: String?
    @Option(name: .customLong("due-before"), help: ArgumentHelp("Only reloads due before this time: RFC 3339, or from now: 90s, 10m, 2h.", valueName: "time"))
    var dueBefore: String?
    @Option(name: .long, help: "At most this many lines (1 to 10000).") var limit: Int = 100
    @OptionGroup var admin: AdminOptions

    func run() async throws {
        var query: [String] = []
        func add(_ name: String, _ value: String?) {
            guard let value else { return }
            query.append("\(name)=\(AdminText.queryValue(value))")
        }
        add("bundle", bundle)
        add("kind", kind)
        add("device", device)
        add("dueBefore", try dueBefore.map(Self.time))
        add("limit", String(limit))
        let answer = try await admin.call(.GET, "/v1/pending" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")), as: AdminAPI.PendingList.self)
        if admin.json { return try printJSON(answer) }
        guard !answer.pending.isEmpty else { return printLine("no pending reloads") }
        printLine(AdminText.table(
            ["DEVICE", "WIDGET", "KIND", "CONFIGURATION", "DUE", "", "PRIORITY", "REQUESTS", "WAITS FOR"],
            answer.pending.map { row in
                [
                    AdminText.short(row.device),
                    row.widget,
                    row.kind,
                    AdminText.text(row.configuration),
                    AdminText.relative(row.dueInSeconds),
                    row.due,
                    String(row.priority),
                    String(row.requestCount),
                    row.waitsFor + (row.exempt ? " (exempt)" : ""),
                ]
            }
        ))
    }

    /// RFC 3339 as given, or `90s`/`10m`/`2h`/`1d` from now as RFC 3339.
    static func time(_ text: String) throws -> String {
        if AdminText.date(text) != nil { return text }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        // A number of units from now, at most ten years: `1e300d`, `nan` or `inf` are refused, not turned
        // into a date the formatter cannot write.
        guard let unit = text.last.flatMap({ units[$0] }), let amount = Double(text.dropLast()), amount.isFinite,
            (0...315_360_000).contains(amount * unit)
        else {
            throw CommandFailure.exit(
                "--due-before \(text): give an RFC 3339 time (2026-11-22T10:00:00Z) or 90s, 10m, 2h, 1d (at most ten years)",
                status: 2
            )
        }
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date().addingTimeInterval(amount * unit))
    }
}

/// `reloadgate explain ID`.
struct Explain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Explain a request (by request id or its push's apns-id) or a delivery (by its apns-id): decisions, reasons, Apple's answer."
    )

    @Argument(help: "A request id (the webhook's requestId), a push's apns-id, or a delivery's apns-id.")
    var id: String
    @OptionGroup var admin: AdminOptions

    func run() async throws {
        let answer = try await admin.call(
            .GET, "/v1/explain/\(id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id)", as: AdminAPI.Explanation.self
        )
        if admin.json { return try printJSON(answer) }
        var lines: [String] = []
        func describe(_ request: AdminAPI.Request) {
            lines.append(
                "request \(request.id) from \(request.source) for \(request.bundle), "
                    + "received \(request.receivedAt), priority \(request.priority), "
                    + "expiration \(AdminText.expiration(request.expiration)), target \(AdminText.text(request.target))"
            )
            lines.append(AdminText.table(
                ["  DEVICE", "WIDGET", "KIND", "DECISION", "DUE", "REASON"],
                request.decisions.map {
                    ["  " + AdminText.short($0.device), AdminText.text($0.widget), AdminText.text($0.kind), $0.decision, AdminText.text($0.due), $0.reason]
                }
            ))
        }
        func describe(delivery: AdminAPI.Delivery) {
            lines.append(
                "delivery \(delivery.apnsId) to \(AdminText.short(delivery.device)) released \(delivery.releasedAt): "
                    + "\(delivery.state) after \(delivery.attempts) attempt(s)"
                    + (delivery.lastError.map { ", Apple's answer / last error: \($0)" } ?? "")
                    + (delivery.unknownOutcomes > 0 ? ", \(delivery.unknownOutcomes) without an answer" : "")
                    + "; serves \(delivery.requestCount) request(s)"
            )
            if let content = delivery.content {
                lines.append(
                    "  content of request \(content.request) (timestamp \(content.timestamp)): the newest of \(content.merged) merged update(s)"
                        + (content.alertRequest.map { "; alert of request \($0), the newest with one" } ?? "; no alert")
                        + (content.end ? "; sent as the activity's end" : "")
                )
            }
        }
        switch answer {
        case .request(let explanation):
            describe(explanation.request)
            for pending in explanation.pending {
                lines.append("pending: \(pending.widget) on \(AdminText.short(pending.device)) due \(pending.due)")
            }
            for delivery in explanation.deliveries { describe(delivery: delivery) }
            if explanation.deliveries.isEmpty, explanation.pending.isEmpty { lines.append("no delivery and nothing pending for it") }
        case .delivery(let explanation):
            describe(delivery: explanation.delivery)
            for request in explanation.requests { describe(request) }
        }
        printLine(lines.joined(separator: "\n"))
    }
}

/// `reloadgate budget TOKEN`.
struct Budget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a device's widget budgets: tokens left, next refill, last and planned reloads, pending reload."
    )

    @Argument(help: "The device token (64 hex digits).") var token: String
    @Option(name: .long, help: ArgumentHelp("Only this widget (its id).", valueName: "id")) var widget: String?
    @Option(name: .long, help: "Only this app (when the token is registered for several).") var bundle: String?
    @OptionGroup var admin: AdminOptions

    func run() async throws {
        var query: [String] = []
        if let widget { query.append("widget=\(widget.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? widget)") }
        if let bundle { query.append("bundle=\(bundle)") }
        let answer = try await admin.call(
            .GET, "/v1/budget/\(token)" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")), as: AdminAPI.DeviceBudget.self
        )
        if admin.json { return try printJSON(answer) }
        let now = answer.now
        var output = AdminText.table(
            ["WIDGET", "KIND", "TOKENS", "NEXT TOKEN", "LAST RELOAD", "PLANNED RELOAD", "TIMELINE", "PENDING"],
            answer.instances.map { row in
                [
                    row.widget,
                    row.kind,
                    "\(row.tokens)/\(row.burst) (daily \(row.dailyBudget))",
                    Self.when(row.nextToken, now: now),
                    Self.when(row.lastReload, now: now),
                    Self.when(row.plannedReload, now: now),
                    AdminText.text(row.timelinePolicy),
                    row.pending.map { "due \(Self.when($0.due, now: now)), \($0.requestCount) request(s)" } ?? "-",
                ]
            }
        )
        if !answer.recentDeliveries.isEmpty {
            output += "\nrecent deliveries:\n" + AdminText.table(
                ["  APNS-ID", "RELEASED", "STATE", "LAST ERROR"],
                answer.recentDeliveries.map { ["  " + $0.apnsId, $0.releasedAt, $0.state, AdminText.text($0.lastError)] }
            )
        }
        printLine(output)
    }

    static func when(_ value: String?, now: String?) -> String {
        guard let time = value else { return "-" }
        guard let seconds = AdminText.seconds(from: now, to: time) else { return time }
        return "\(time) (\(AdminText.relative(seconds)))"
    }
}

/// `reloadgate cancel ID`.
struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel the pending reloads of a request (by request id).",
        discussion: """
            Drops every pending reload that serves the request, with the other requests merged into it \
            (they are listed). A delivery already released to the push service cannot be cancelled.
            """
    )

    @Argument(help: "The request id.") var id: String
    @OptionGroup var admin: AdminOptions

    func run() async throws {
        let answer = try await admin.call(
            .POST, "/v1/cancel/\(id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id)", as: AdminAPI.Cancelled.self
        )
        if admin.json { return try printJSON(answer) }
        printLine("cancelled \(answer.cancelled.count) pending reload(s): " + answer.cancelled.map {
            "instance \($0.instance) (requests \(AdminText.text($0.requests)))"
        }.joined(separator: ", "))
    }
}

/// `reloadgate flush`.
struct Flush: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deliver pending reloads now (of a device, of an app, or all).",
        discussion: """
            Makes the pending reloads due now; each still waits for the minimum interval since its last \
            reload and for a budget token, unless --ignore-budget (operator override: it goes now whatever \
            the interval and budget say, is not charged to the budget, and is marked exempt).
            """
    )

    @Option(name: .long, help: ArgumentHelp("Only this device.", valueName: "token")) var device: String?
    @Option(name: .long, help: "Only this app.") var bundle: String?
    @Flag(name: .customLong("ignore-budget"), help: "Deliver without a budget token (operator override).") var ignoreBudget = false
    @OptionGroup var admin: AdminOptions

    func validate() throws {
        if device != nil, bundle != nil { throw ValidationError("give --device or --bundle, not both") }
    }

    func run() async throws {
        let body = AdminAPI.FlushRequest(device: device, bundle: bundle, ignoreBudget: ignoreBudget)
        let answer = try await admin.call(.POST, "/v1/flush", body: body, as: AdminAPI.Flushed.self)
        if admin.json { return try printJSON(answer) }
        printLine("flushed \(answer.flushed) pending reload(s)" + (ignoreBudget ? " (ignoring the budget)" : ""))
    }
}

/// `reloadgate stats`.
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Counts by decision and delivery outcome, the delivery queue, the oldest pending reload, the last hour's freshness."
    )

    @OptionGroup var admin: AdminOptions

    func run() async throws {
        let answer = try await admin.call(.GET, "/v1/stats", as: AdminAPI.Stats.self)
        if admin.json { return try printJSON(answer) }
        func pairs(_ counts: [String: Int]) -> String {
            guard !counts.isEmpty else { return "-" }
            return counts.keys.sorted().map { "\($0) \(counts[$0]!)" }.joined(separator: ", ")
        }
        printLine([
            "decisions:        \(pairs(answer.decisions))",
            "deliveries:       \(pairs(answer.deliveries))",
            "failures:         \(pairs(answer.failures))",
            "pending reloads:  \(answer.pendingReloads) (oldest due \(AdminText.text(answer.oldestPendingDue)))",
            "delivery queue:   \(answer.deliveryQueue) (oldest released \(AdminText.text(answer.oldestOpenDelivery)))",
            "unknown outcomes: \(answer.unknownOutcomes)",
            "freshness:        \(Freshness.line(try await admin.call(.GET, "/v1/freshness", as: AdminAPI.Freshness.self)))",
        ].joined(separator: "\n"))
    }
}

/// `reloadgate cluster`.
struct Cluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The gateways sharing the PostgreSQL database, and which partitions each holds (through the running gateway)."
    )

    @OptionGroup var admin: AdminOptions

    func run() async throws {
        let answer = try await admin.call(.GET, "/v1/cluster", as: AdminAPI.Cluster.self)
        if admin.json { return try printJSON(answer) }
        guard answer.store == "postgres" else {
            return printLine("one gateway (store.kind: sqlite): it schedules every device")
        }
        var lines = ["gateways:"]
        for gateway in answer.gateways {
            lines.append(
                "  \(gateway.id)\(gateway.id == answer.this ? " (this one)" : "")  \(AdminText.text(gateway.address))  partitions \(gateway.partitions)"
                    + "  heartbeat \(gateway.heartbeatAgeMilliseconds) ms ago  started \(gateway.startedAt)"
            )
        }
        lines.append("partitions:")
        for range in answer.partitions {
            let span = "\(range.first)-\(range.last)"
            if let owner = range.owner {
                lines.append(
                    "  \(span)  \(owner)  lease held \(AdminText.text(range.leaseAgeSeconds.map(String.init))) s, "
                        + "expires in \(AdminText.text(range.expiresInMilliseconds.map(String.init))) ms"
                )
            } else {
                lines.append("  \(span)  no owner (taken by the next heartbeat)")
            }
        }
        printLine(lines.joined(separator: "\n"))
    }
}

/// `reloadgate devices`.
struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, show and remove registered devices (through the running gateway).",
        subcommands: [List.self, Show.self, Remove.self]
    )

    /// `reloadgate devices list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List devices: app, token, status, widgets, pending reloads.")

        @Option(name: .long, help: "Only this app.") var bundle: String?
        @Option(name: .long, help: "At most this many lines (1 to 100000).") var limit: Int = 1000
        @OptionGroup var admin: AdminOptions

        func run() async throws {
            var path = "/v1/devices?limit=\(limit)"
            if let bundle { path += "&bundle=\(bundle)" }
            let answer = try await admin.call(.GET, path, as: AdminAPI.DeviceList.self)
            if admin.json { return try printJSON(answer) }
            guard !answer.devices.isEmpty else { return printLine("no devices registered") }
            printLine(AdminText.table(
                ["BUNDLE", "DEVICE", "TYPE", "STATUS", "REGISTERED", "WIDGETS", "PENDING"],
                answer.devices.map { device in
                    [
                        device.bundle,
                        device.device,
                        PushType(rawValue: device.pushType).map { $0.descriptor.tokenScope == .appOnDevice ? "widgets" : $0.descriptor.label } ?? device.pushType,
                        device.active ? "active" : "unregistered \(AdminText.text(device.unregisteredAt))",
                        device.registeredAt,
                        String(device.widgets),
                        String(device.pendingReloads),
                    ]
                }
            ))
        }
    }

    /// `reloadgate devices show TOKEN`.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a device and its widgets.")

        @Argument(help: "The device token.") var token: String
        @Option(name: .long, help: "Only this app (when the token is registered for several).") var bundle: String?
        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let answer = try await admin.call(.GET, "/v1/devices/\(token)" + (bundle.map { "?bundle=\($0)" } ?? ""), as: AdminAPI.DeviceDetails.self)
            if admin.json { return try printJSON(answer) }
            var lines: [String] = []
            for device in answer.devices {
                lines.append(
                    "\(device.bundle) \(device.device): "
                        + (device.active ? "active" : "unregistered \(AdminText.text(device.unregisteredAt))")
                        + ", registered \(device.registeredAt), \(device.pendingReloads) pending reload(s)"
                )
                lines.append(AdminText.table(
                    ["  WIDGET", "KIND", "FAMILY", "CONFIGURATION", "TIMELINE"],
                    device.widgets.map { ["  " + $0.id, $0.kind, $0.family, AdminText.text($0.configuration), AdminText.text($0.timelinePolicy)] }
                ))
            }
            printLine(lines.joined(separator: "\n"))
        }
    }

    /// `reloadgate devices remove TOKEN`.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a device, its widgets and their pending reloads (as the registry API's DELETE does)."
        )

        @Argument(help: "The device token.") var token: String
        @Option(name: .long, help: "The app (needed when the token is registered for several).") var bundle: String?
        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let answer = try await admin.call(.DELETE, "/v1/devices/\(token)" + (bundle.map { "?bundle=\($0)" } ?? ""), as: AdminAPI.DeviceRemoved.self)
            if admin.json { return try printJSON(answer) }
            printLine("removed \(answer.removed.device) of \(answer.removed.bundle) with \(answer.removed.widgets) widget(s)")
        }
    }
}
