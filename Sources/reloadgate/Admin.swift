import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
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

    /// Sends one request to the admin API and returns its JSON object; exits 1 with the server's message
    /// on an error answer, and with a hint when no gateway listens.
    func call(_ method: HTTPMethod, _ path: String, body: [String: Any]? = nil) async throws -> [String: Any] {
        do {
            return try await send(method, path, body: body)
        } catch let error as NoGateway {
            throw CommandFailure.exit(error.description, status: 1)
        }
    }

    /// Like ``call(_:_:body:)``, for commands that also work without a gateway: `nil` when no gateway
    /// answers on the socket (the command then changes the data directory itself).
    func callIfRunning(_ method: HTTPMethod, _ path: String, body: [String: Any]? = nil) async throws -> [String: Any]? {
        do {
            return try await send(method, path, body: body)
        } catch is NoGateway where url == nil {
            return nil
        }
    }

    /// No gateway answers where the command looked.
    struct NoGateway: Error, CustomStringConvertible {
        var description: String
    }

    private func send(_ method: HTTPMethod, _ path: String, body: [String: Any]?) async throws -> [String: Any] {
        if let url { return try await callTLS(url, method, path, body: body) }
        let socket = try socketPath()
        guard FileManager.default.fileExists(atPath: socket) else {
            throw NoGateway(description: "no gateway is running here: \(socket) does not exist (start one with `reloadgate serve`, or give --socket)")
        }
        guard let url = URL(httpURLWithSocketPath: socket, uri: path) else {
            throw CommandFailure.exit("\(socket) cannot be used as a socket path", status: 2)
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let result: Result<[String: Any], any Error>
        do {
            result = .success(try await call(client, socket: socket, url: url, method, body: body))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        return try result.get()
    }

    /// The same over the admin TLS listener, with the bearer token.
    private func callTLS(_ base: String, _ method: HTTPMethod, _ path: String, body: [String: Any]?) async throws -> [String: Any] {
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
        var tls = TLSConfiguration.makeClientConfiguration()
        let ca = cacert ?? (FileManager.default.fileExists(atPath: "certs/ca.pem") ? "certs/ca.pem" : nil)
        if let ca {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(ca))
            } catch {
                throw CommandFailure.exit("cannot read CA certificates from \(ca)", status: 2)
            }
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        let result: Result<[String: Any], any Error>
        do {
            let target = base.hasSuffix("/") ? String(base.dropLast()) : base
            guard let full = URL(string: target + path) else { throw CommandFailure.exit("bad URL \(target + path)", status: 2) }
            result = .success(try await call(client, socket: base, url: full, method, body: body, token: token))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        return try result.get()
    }

    private func call(
        _ client: HTTPClient,
        socket: String,
        url: URL,
        _ method: HTTPMethod,
        body: [String: Any]?,
        token: String? = nil
    ) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        if let token { request.headers.add(name: "authorization", value: "bearer \(token)") }
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let response: HTTPClientResponse
        let data: ByteBuffer
        do {
            response = try await client.execute(request, timeout: .seconds(30))
            data = try await response.body.collect(upTo: 64 << 20)
        } catch {
            throw NoGateway(description: "no gateway answers on \(socket) (\(error)); is `reloadgate serve` running?")
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(data.readableBytesView))) as? [String: Any]
        guard response.status == .ok, let object else {
            let message = object?["message"] as? String ?? String(decoding: data.readableBytesView, as: UTF8.self)
            throw CommandFailure.exit(message, status: response.status.code == 422 ? 2 : 1)
        }
        return object
    }
}

/// Text helpers for the commands' tables.
enum AdminText {
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
    static func short(_ token: Any?) -> String {
        guard let token = token as? String else { return "-" }
        return String(token.prefix(8)) + "…"
    }

    static func text(_ value: Any?) -> String {
        switch value {
        case nil, is NSNull: "-"
        case let string as String: string
        case let number as NSNumber: number.stringValue
        case let other?:
            (try? JSONSerialization.data(withJSONObject: other, options: [.sortedKeys, .fragmentsAllowed]))
                .map { String(decoding: $0, as: UTF8.self) } ?? "\(other)"
        }
    }
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
            query.append("\(name)=\(value.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(["&", "=", "+"])) ?? value)")
        }
        add("bundle", bundle)
        add("kind", kind)
        add("device", device)
        add("dueBefore", try dueBefore.map(Self.time))
        add("limit", String(limit))
        let answer = try await admin.call(.GET, "/v1/pending" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")))
        if admin.json { return try printJSON(answer) }
        let pending = answer["pending"] as? [[String: Any]] ?? []
        guard !pending.isEmpty else { return printLine("no pending reloads") }
        printLine(AdminText.table(
            ["DEVICE", "WIDGET", "KIND", "CONFIGURATION", "DUE", "", "PRIORITY", "REQUESTS", "WAITS FOR"],
            pending.map { row in
                [
                    AdminText.short(row["device"]),
                    AdminText.text(row["widget"]),
                    AdminText.text(row["kind"]),
                    AdminText.text(row["configuration"]),
                    AdminText.relative((row["dueInSeconds"] as? Double) ?? 0),
                    AdminText.text(row["due"]),
                    AdminText.text(row["priority"]),
                    AdminText.text(row["requestCount"]),
                    AdminText.text(row["waitsFor"]) + ((row["exempt"] as? Bool) == true ? " (exempt)" : ""),
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
        let answer = try await admin.call(.GET, "/v1/explain/\(id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id)")
        if admin.json { return try printJSON(answer) }
        var lines: [String] = []
        func describe(_ request: [String: Any]) {
            lines.append(
                "request \(AdminText.text(request["id"])) from \(AdminText.text(request["source"])) for \(AdminText.text(request["bundle"])), "
                    + "received \(AdminText.text(request["receivedAt"])), priority \(AdminText.text(request["priority"])), "
                    + "expiration \(AdminText.text(request["expiration"])), target \(AdminText.text(request["target"]))"
            )
            let decisions = request["decisions"] as? [[String: Any]] ?? []
            lines.append(AdminText.table(
                ["  DEVICE", "WIDGET", "KIND", "DECISION", "DUE", "REASON"],
                decisions.map {
                    ["  " + AdminText.short($0["device"]), AdminText.text($0["widget"]), AdminText.text($0["kind"]), AdminText.text($0["decision"]),
                     AdminText.text($0["due"]), AdminText.text($0["reason"])]
                }
            ))
        }
        func describe(delivery: [String: Any]) {
            lines.append(
                "delivery \(AdminText.text(delivery["apnsId"])) to \(AdminText.short(delivery["device"])) released \(AdminText.text(delivery["releasedAt"])): "
                    + "\(AdminText.text(delivery["state"])) after \(AdminText.text(delivery["attempts"])) attempt(s)"
                    + ((delivery["lastError"] as? String).map { ", Apple's answer / last error: \($0)" } ?? "")
                    + ((delivery["unknownOutcomes"] as? Int ?? 0) > 0 ? ", \(AdminText.text(delivery["unknownOutcomes"])) without an answer" : "")
                    + "; serves \(AdminText.text(delivery["requestCount"])) request(s)"
            )
        }
        if let request = answer["request"] as? [String: Any] {
            describe(request)
            for pending in answer["pending"] as? [[String: Any]] ?? [] {
                lines.append("pending: \(AdminText.text(pending["widget"])) on \(AdminText.short(pending["device"])) due \(AdminText.text(pending["due"]))")
            }
            let deliveries = answer["deliveries"] as? [[String: Any]] ?? []
            for delivery in deliveries { describe(delivery: delivery) }
            if deliveries.isEmpty, (answer["pending"] as? [Any])?.isEmpty != false { lines.append("no delivery and nothing pending for it") }
        } else if let delivery = answer["delivery"] as? [String: Any] {
            describe(delivery: delivery)
            for request in answer["requests"] as? [[String: Any]] ?? [] { describe(request) }
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
        let answer = try await admin.call(.GET, "/v1/budget/\(token)" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")))
        if admin.json { return try printJSON(answer) }
        let now = answer["now"] as? String
        let instances = answer["instances"] as? [[String: Any]] ?? []
        var output = AdminText.table(
            ["WIDGET", "KIND", "TOKENS", "NEXT TOKEN", "LAST RELOAD", "PLANNED RELOAD", "TIMELINE", "PENDING"],
            instances.map { row in
                let pending = row["pending"] as? [String: Any]
                return [
                    AdminText.text(row["widget"]),
                    AdminText.text(row["kind"]),
                    "\(AdminText.text(row["tokens"]))/\(AdminText.text(row["burst"])) (daily \(AdminText.text(row["dailyBudget"])))",
                    Self.when(row["nextToken"], now: now),
                    Self.when(row["lastReload"], now: now),
                    Self.when(row["plannedReload"], now: now),
                    AdminText.text(row["timelinePolicy"]),
                    pending.map { "due \(Self.when($0["due"], now: now)), \(AdminText.text($0["requestCount"])) request(s)" } ?? "-",
                ]
            }
        )
        let recent = answer["recentDeliveries"] as? [[String: Any]] ?? []
        if !recent.isEmpty {
            output += "\nrecent deliveries:\n" + AdminText.table(
                ["  APNS-ID", "RELEASED", "STATE", "LAST ERROR"],
                recent.map { ["  " + AdminText.text($0["apnsId"]), AdminText.text($0["releasedAt"]), AdminText.text($0["state"]), AdminText.text($0["lastError"])] }
            )
        }
        printLine(output)
    }

    static func when(_ value: Any?, now: String?) -> String {
        guard let time = value as? String else { return "-" }
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
        let answer = try await admin.call(.POST, "/v1/cancel/\(id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id)")
        if admin.json { return try printJSON(answer) }
        let cancelled = answer["cancelled"] as? [[String: Any]] ?? []
        printLine("cancelled \(cancelled.count) pending reload(s): " + cancelled.map {
            "instance \(AdminText.text($0["instance"])) (requests \(AdminText.text($0["requests"])))"
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
        var body: [String: Any] = ["ignoreBudget": ignoreBudget]
        if let device { body["device"] = device }
        if let bundle { body["bundle"] = bundle }
        let answer = try await admin.call(.POST, "/v1/flush", body: body)
        if admin.json { return try printJSON(answer) }
        printLine("flushed \(AdminText.text(answer["flushed"])) pending reload(s)" + (ignoreBudget ? " (ignoring the budget)" : ""))
    }
}

/// `reloadgate stats`.
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Counts by decision and delivery outcome, the delivery queue, the oldest pending reload."
    )

    @OptionGroup var admin: AdminOptions

    func run() async throws {
        let answer = try await admin.call(.GET, "/v1/stats")
        if admin.json { return try printJSON(answer) }
        func pairs(_ value: Any?) -> String {
            guard let object = value as? [String: Any], !object.isEmpty else { return "-" }
            return object.keys.sorted().map { "\($0) \(AdminText.text(object[$0]))" }.joined(separator: ", ")
        }
        printLine([
            "decisions:        \(pairs(answer["decisions"]))",
            "deliveries:       \(pairs(answer["deliveries"]))",
            "failures:         \(pairs(answer["failures"]))",
            "pending reloads:  \(AdminText.text(answer["pendingReloads"])) (oldest due \(AdminText.text(answer["oldestPendingDue"])))",
            "delivery queue:   \(AdminText.text(answer["deliveryQueue"])) (oldest released \(AdminText.text(answer["oldestOpenDelivery"])))",
            "unknown outcomes: \(AdminText.text(answer["unknownOutcomes"]))",
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
        let answer = try await admin.call(.GET, "/v1/cluster")
        if admin.json { return try printJSON(answer) }
        guard answer["store"] as? String == "postgres" else {
            return printLine("one gateway (store.kind: sqlite): it schedules every device")
        }
        let this = answer["this"] as? String ?? ""
        var lines = ["gateways:"]
        for gateway in answer["gateways"] as? [[String: Any]] ?? [] {
            let id = AdminText.text(gateway["id"])
            lines.append(
                "  \(id)\(id == this ? " (this one)" : "")  \(AdminText.text(gateway["address"]))  partitions \(AdminText.text(gateway["partitions"]))"
                    + "  heartbeat \(AdminText.text(gateway["heartbeatAgeMilliseconds"])) ms ago  started \(AdminText.text(gateway["startedAt"]))"
            )
        }
        lines.append("partitions:")
        for range in answer["partitions"] as? [[String: Any]] ?? [] {
            let owner = range["owner"] as? String
            let span = "\(AdminText.text(range["first"]))-\(AdminText.text(range["last"]))"
            lines.append(
                owner == nil
                    ? "  \(span)  no owner (taken by the next heartbeat)"
                    : "  \(span)  \(owner!)  lease held \(AdminText.text(range["leaseAgeSeconds"])) s, expires in \(AdminText.text(range["expiresInMilliseconds"])) ms"
            )
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
            let answer = try await admin.call(.GET, path)
            if admin.json { return try printJSON(answer) }
            let devices = answer["devices"] as? [[String: Any]] ?? []
            guard !devices.isEmpty else { return printLine("no devices registered") }
            printLine(AdminText.table(
                ["BUNDLE", "DEVICE", "TYPE", "STATUS", "REGISTERED", "WIDGETS", "PENDING"],
                devices.map { device in
                    [
                        AdminText.text(device["bundle"]),
                        AdminText.text(device["device"]),
                        (device["pushType"] as? String) == "controls" ? "control" : "widgets",
                        (device["active"] as? Bool) == true ? "active" : "unregistered \(AdminText.text(device["unregisteredAt"]))",
                        AdminText.text(device["registeredAt"]),
                        AdminText.text(device["widgets"]),
                        AdminText.text(device["pendingReloads"]),
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
            let answer = try await admin.call(.GET, "/v1/devices/\(token)" + (bundle.map { "?bundle=\($0)" } ?? ""))
            if admin.json { return try printJSON(answer) }
            var lines: [String] = []
            for device in answer["devices"] as? [[String: Any]] ?? [] {
                lines.append(
                    "\(AdminText.text(device["bundle"])) \(AdminText.text(device["device"])): "
                        + ((device["active"] as? Bool) == true ? "active" : "unregistered \(AdminText.text(device["unregisteredAt"]))")
                        + ", registered \(AdminText.text(device["registeredAt"])), \(AdminText.text(device["pendingReloads"])) pending reload(s)"
                )
                let widgets = device["widgets"] as? [[String: Any]] ?? []
                lines.append(AdminText.table(
                    ["  WIDGET", "KIND", "FAMILY", "CONFIGURATION", "TIMELINE"],
                    widgets.map {
                        ["  " + AdminText.text($0["id"]), AdminText.text($0["kind"]), AdminText.text($0["family"]),
                         AdminText.text($0["configuration"]), AdminText.text($0["timelinePolicy"])]
                    }
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
            let answer = try await admin.call(.DELETE, "/v1/devices/\(token)" + (bundle.map { "?bundle=\($0)" } ?? ""))
            if admin.json { return try printJSON(answer) }
            let removed = answer["removed"] as? [String: Any] ?? [:]
            printLine("removed \(AdminText.text(removed["device"])) of \(AdminText.text(removed["bundle"])) with \(AdminText.text(removed["widgets"])) widget(s)")
        }
    }
}
