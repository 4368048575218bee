import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore

/// The admin API (docs/DESIGN.md, Interfaces 4) for the operator's CLI: pending reloads, explain, budget,
/// cancel, flush, stats. Served on the admin socket only (``AdminService``), never on the public
/// listener. Answers are JSON objects with sorted keys; times are RFC 3339 in UTC.
struct AdminRoutes {
    /// Where changes go (keys, teams, credentials, devices, cancel, flush); queries read through its
    /// ``GatewayDoor/reader``.
    let door: GatewayDoor
    let logger: Logger
    /// The herd forecast with the configured thresholds.
    let forecaster: HerdForecaster

    private var store: any GatewayStoreReading { door.reader }
    private func now() -> Date { door.now() }

    func register(on router: some RouterMethods) {
        router.get("/v1/pending") { request, _ in try await pending(request) }
        router.get("/v1/explain/{id}") { _, context in try await explain(try context.parameters.require("id")) }
        router.get("/v1/budget/{token}") { request, context in try await budget(try context.parameters.require("token"), request) }
        router.post("/v1/cancel/{id}") { _, context in try await cancel(try context.parameters.require("id")) }
        router.post("/v1/flush") { request, _ in try await flush(request) }
        router.get("/v1/stats") { _, _ in try await stats() }
        router.get("/v1/cluster") { _, _ in try await cluster() }
        router.get("/v1/forecast") { request, _ in try await forecast(request) }
        router.get("/v1/freshness") { request, _ in try await freshness(request) }
        router.get("/v1/devices") { request, _ in try await devices(request) }
        router.get("/v1/devices/{token}") { request, context in try await device(try context.parameters.require("token"), request) }
        router.delete("/v1/devices/{token}") { request, context in try await removeDevice(try context.parameters.require("token"), request) }
        router.post("/v1/apps/{bundle}/rotate-key") { request, context in
            try await rotateKey(try context.parameters.require("bundle"), request)
        }
        router.post("/v1/apps/{bundle}/team") { request, context in
            try await setTeam(try context.parameters.require("bundle"), request)
        }
        router.post("/v1/keys") { request, _ in try await addKey(request) }
        router.delete("/v1/keys/{kid}") { _, context in try await removeKey(try context.parameters.require("kid")) }
    }

    // MARK: Keys and teams

    /// `reloadgate keys add` with a gateway running: stored, then in the key directory before the answer,
    /// so that the next push verifies with it (and no refusal remembered before counts).
    private func addKey(_ request: Request) async throws -> Response {
        let body = try await JSONBody.decode(AdminAPI.KeyRequest.self, request, limit: 16 * 1024)
        let kid = body.kid
        let team = body.team
        guard ProviderKey.isValidIdentifier(kid) else { throw APIError.invalidField("kid must be 1 to 64 letters or digits") }
        guard ProviderKey.isValidIdentifier(team) else { throw APIError.invalidField("team must be 1 to 64 letters or digits") }
        let pem = body.publicKey
        guard !pem.contains("PRIVATE KEY"), let publicKey = try? P256.Signing.PublicKey(pemRepresentation: pem) else {
            throw APIError.invalidField("publicKey must be a P-256 public key in PEM (never a private key)")
        }
        let environment = body.environment ?? "both"
        guard ProviderKey.Environments(rawValue: environment) != nil else {
            throw APIError.invalidField("environment must be sandbox, production or both")
        }
        let topics = try body.topics.enumerated().map { index, item in
            guard let bundle = try? BundleID(item) else {
                throw APIError.invalidField("topics[\(index)] is not a bundle id")
            }
            return bundle
        }
        do {
            // The next push verifies with it (the door refreshes the key directory).
            try await door.execute(AddProviderKey(
                StoredProviderKey(keyID: kid, teamID: team, publicKeyPEM: publicKey.pemRepresentation, topics: topics, environments: environment, createdAt: now())
            ))
        } catch let error as StoreError {
            throw APIError(status: .conflict, code: "key-exists", message: error.description)
        }
        logger.notice("provider key added by the operator", metadata: ["kid": "\(kid)", "team": "\(team)"])
        return try Self.json(AdminAPI.KeyAdded(kid: kid, team: team, topics: topics.map(\.rawValue), environment: environment))
    }

    /// `reloadgate keys remove` with a gateway running: the next push signed with the key is refused.
    private func removeKey(_ kid: String) async throws -> Response {
        guard try await door.execute(RemoveProviderKey(keyID: kid)) else { throw APIError.notFound("no provider key \(kid) is registered") }
        logger.notice("provider key removed by the operator", metadata: ["kid": "\(kid)"])
        return try Self.json(AdminAPI.KeyRemoved(removed: kid))
    }

    /// `reloadgate apps set-team`: the app's provider-token pushes from then on only from that team's keys.
    private func setTeam(_ bundle: String, _ request: Request) async throws -> Response {
        guard let bundleID = try? BundleID(bundle) else { throw APIError.invalidField("\(bundle) is not a bundle id") }
        let team = try await JSONBody.decode(AdminAPI.TeamRequest.self, request, limit: 4096).team
        guard ProviderKey.isValidIdentifier(team) else { throw APIError.invalidField("team must be 1 to 64 letters or digits") }
        guard let app = try await door.execute(SetTeam(bundle: bundleID, team: team)) else { throw APIError.notFound("no app \(bundle)") }
        logger.notice("app bound to a team by the operator", metadata: ["bundle": "\(bundle)", "team": "\(team)"])
        return try Self.json(AdminAPI.TeamBound(bundle: app.bundle.rawValue, team: team))
    }

    // MARK: Devices and apps

    private func devices(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        var limit = 1000
        if let text = query["limit"] {
            guard let value = Int(text), (1...100_000).contains(value) else { throw APIError.invalidField("limit must be 1 to 100000") }
            limit = value
        }
        let devices = try await store.devices(bundle: try Self.bundleFilter(query["bundle"]), token: nil, limit: limit)
        return try Self.json(AdminAPI.DeviceList(devices: devices.map { Self.device($0, widgets: $0.widgets) }))
    }

    private func device(_ token: String, _ request: Request) async throws -> Response {
        let token = try Self.deviceToken(token)
        let bundle = try Self.bundleFilter(request.uri.queryParameters["bundle"])
        let devices = try await store.devices(bundle: bundle, token: token, limit: 100)
        guard !devices.isEmpty else { throw APIError.notFound("no device \(token)") }
        let instances = try await store.instances(ofDevice: token, bundle: bundle)
        return try Self.json(AdminAPI.DeviceDetails(
            devices: devices.map { device in
                Self.device(device, widgets: instances.filter { $0.bundle == device.bundle }.map { entry in
                    AdminAPI.Widget(
                        id: entry.instance.widgetID,
                        kind: entry.instance.kind,
                        family: entry.instance.family,
                        configuration: .parsedOrText(entry.instance.configuration),
                        timelinePolicy: entry.instance.timelinePolicy
                    )
                })
            }
        ))
    }

    private func removeDevice(_ token: String, _ request: Request) async throws -> Response {
        let token = try Self.deviceToken(token)
        let bundle = try Self.bundleFilter(request.uri.queryParameters["bundle"])
        let found = try await store.devices(bundle: bundle, token: token, limit: 100)
        guard let device = found.first else { throw APIError.notFound("no device \(token)") }
        guard found.count == 1 else {
            throw APIError.invalidField("device \(token) is registered for \(found.map(\.bundle).joined(separator: ", ")): give the bundle")
        }
        guard let bundleID = try? BundleID(device.bundle), let app = try await store.app(bundle: bundleID) else {
            throw APIError.notFound("no app \(device.bundle)")
        }
        let removed = try await door.execute(DeleteDevice(app: app, token: try DeviceToken(token)))
        logger.notice("device removed by the operator", metadata: ["bundle": "\(device.bundle)", "device": "\(token.prefix(8))…"])
        return try Self.json(AdminAPI.DeviceRemoved(removed: .init(bundle: device.bundle, device: token, widgets: removed.instances.count)))
    }

    private func rotateKey(_ bundle: String, _ request: Request) async throws -> Response {
        guard let bundleID = try? BundleID(bundle) else { throw APIError.invalidField("\(bundle) is not a bundle id") }
        // The body is optional: none, or an empty one, rotates the API key alone.
        let length = request.head.headerFields[.contentLength]
        let body = (length == nil && request.head.headerFields[.transferEncoding] == nil) || length == "0"
            ? nil : try await JSONBody.decode(AdminAPI.RotateKeyRequest.self, request, limit: 4096)
        let rotateSecret = body?.webhookSecret ?? false
        let registration = body?.registration ?? false
        guard let credentials = try await door.execute(RotateCredentials(bundle: bundleID, webhookSecret: rotateSecret, registration: registration)) else {
            throw APIError.notFound("no app \(bundle)")
        }
        logger.notice(
            "app credentials rotated by the operator",
            metadata: ["bundle": "\(bundle)", "webhook-secret": "\(rotateSecret)", "registration-key": "\(registration)"]
        )
        return try Self.json(AdminAPI.Credentials(credentials, bundle: bundle, webhookSecret: rotateSecret, registration: registration))
    }

    static func device<Widgets>(_ device: DeviceRecord, widgets: Widgets) -> AdminAPI.Device<Widgets> {
        AdminAPI.Device(
            bundle: device.bundle,
            device: device.token,
            pushType: device.pushType.rawValue,
            active: device.active,
            registeredAt: Timestamp(device.registeredAt).rfc3339,
            unregisteredAt: device.unregisteredAt.map { Timestamp($0).rfc3339 },
            widgets: widgets,
            pendingReloads: device.pendingReloads
        )
    }

    // MARK: Pending

    private func pending(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        var filter = PendingFilter()
        filter.bundle = try Self.bundleFilter(query["bundle"])
        filter.kind = query["kind"].map(String.init)
        if let device = query["device"] { filter.deviceToken = try Self.deviceToken(String(device)) }
        if let text = query["dueBefore"] {
            guard let time = Timestamp(rfc3339: String(text)) else {
                throw APIError.invalidField("dueBefore must be an RFC 3339 time from 1970 to 9999, such as 2026-11-22T10:00:00Z")
            }
            filter.dueBefore = time
        }
        if let text = query["limit"] {
            guard let limit = Int(text), (1...10_000).contains(limit) else { throw APIError.invalidField("limit must be 1 to 10000") }
            filter.limit = limit
        }
        let rows = try await store.pendingReloads(filter)
        let waits = await door.pendingWaits(rows.map(\.instance))
        let time = Timestamp(now())
        return try Self.json(AdminAPI.PendingList(
            now: time.rfc3339,
            pending: rows.map { row in
                AdminAPI.PendingReload(
                    instance: row.instance,
                    bundle: row.bundle,
                    device: row.deviceToken,
                    widget: row.widgetID,
                    kind: row.kind,
                    family: row.family,
                    configuration: .parsedOrText(row.configuration),
                    due: row.due.rfc3339,
                    dueInSeconds: Double(row.due.milliseconds - time.milliseconds) / 1000,
                    priority: row.priority,
                    expiration: row.expiration.map(\.rfc3339),
                    requestCount: row.requestCount,
                    requests: row.requests,
                    exempt: row.exempt,
                    // Committed but not yet in the scheduler's view (a moment after a commit): due.
                    waitsFor: (waits[row.instance] ?? .due).rawValue
                )
            }
        ))
    }

    // MARK: Explain

    private func explain(_ id: String) async throws -> Response {
        // A push's apns-id names its request (the last one, if the sender reused the id).
        if Int64(id) == nil, try await store.delivery(apnsID: id) == nil, let pushed = try await store.requests(apnsID: id).last {
            return try await explain(String(pushed))
        }
        if let requestID = Int64(id) {
            guard let record = try await store.requestRecord(requestID) else {
                if let pruned = try await store.ledgerPruning(request: requestID).sentence(request: requestID) {
                    throw APIError(status: .gone, code: "pruned", message: pruned)
                }
                throw APIError.notFound("no request \(requestID)")
            }
            let pending = try await store.pendingReloads(PendingFilter(limit: 10_000)).filter { $0.requests.contains(requestID) }
            return try Self.json(AdminAPI.RequestExplanation(
                request: Self.request(record),
                pending: pending.map { AdminAPI.ExplainedPending(instance: $0.instance, widget: $0.widgetID, device: $0.deviceToken, due: $0.due.rfc3339) },
                deliveries: try await explained(try await store.deliveries(serving: requestID))
            ))
        }
        guard let delivery = try await store.delivery(apnsID: id) else {
            var message = "no request, push or delivery \(id) (a request id is a number, an apns-id a UUID)"
            if let latest = try await store.ledgerPruning(request: nil).latest {
                message += "; the ledger has pruned requests received before \(latest.receivedBefore.rfc3339) and deliveries released before then (ledger.retention)"
            }
            throw APIError.notFound(message)
        }
        var requests: [RequestRecord] = []
        for request in delivery.delivery.requests {
            if let record = try await store.requestRecord(Int64(bitPattern: request)) { requests.append(record) }
        }
        return try Self.json(AdminAPI.DeliveryExplanation(delivery: try await explained(delivery), requests: requests.map(Self.request)))
    }

    private func explained(_ records: [DeliveryRecord]) async throws -> [AdminAPI.Delivery] {
        var deliveries: [AdminAPI.Delivery] = []
        for record in records { deliveries.append(try await explained(record)) }
        return deliveries
    }

    /// A delivery as `explain` shows it: for a push type that merges content, which request it took it from.
    private func explained(_ record: DeliveryRecord) async throws -> AdminAPI.Delivery {
        var delivery = Self.delivery(record)
        if let winners = ActivityPayload.winners(try await store.requestBodies(Array(record.delivery.requests))) {
            delivery.content = AdminAPI.DeliveredContent(
                request: Int64(bitPattern: winners.content.stamp.request), timestamp: winners.content.stamp.timestamp,
                alertRequest: winners.alert.map { Int64(bitPattern: $0.stamp.request) }, end: winners.end != nil, merged: winners.merged
            )
        }
        return delivery
    }

    // MARK: Budget

    private func budget(_ token: String, _ request: Request) async throws -> Response {
        let token = try Self.deviceToken(token)
        let query = request.uri.queryParameters
        var instances = try await store.instances(ofDevice: token, bundle: try Self.bundleFilter(query["bundle"]))
        guard !instances.isEmpty else { throw APIError.notFound("no registered device \(token)") }
        if let widget = query["widget"] {
            instances = instances.filter { $0.instance.widgetID == widget }
            guard !instances.isEmpty else { throw APIError.notFound("device \(token) has no widget \(widget)") }
        }
        let budgets = await door.budgets(instances.map(\.instance.instance))
        let bundles = Set(instances.map(\.bundle)).sorted()
        var recent: [DeliveryRecord] = []
        for bundle in bundles { recent += try await store.recentDeliveries(bundle: bundle, deviceToken: token, limit: 5) }
        return try Self.json(AdminAPI.DeviceBudget(
            device: token,
            now: Timestamp(now()).rfc3339,
            instances: instances.map { entry in
                let budget = budgets[entry.instance.instance]
                return AdminAPI.InstanceBudget(
                    bundle: entry.bundle,
                    widget: entry.instance.widgetID,
                    kind: entry.instance.kind,
                    family: entry.instance.family,
                    timelinePolicy: entry.instance.timelinePolicy,
                    tokens: budget?.tokens ?? 0,
                    burst: budget?.burst ?? 0,
                    dailyBudget: budget?.dailyBudget ?? 0,
                    nextToken: budget?.nextToken.map(\.rfc3339),
                    lastReload: budget?.lastReload.map(\.rfc3339),
                    plannedReload: budget?.plannedReload.map(\.rfc3339),
                    earliestReload: budget.map(\.earliestReload.rfc3339),
                    pending: budget?.pending.map { pending in
                        AdminAPI.PendingInBudget(due: pending.due.rfc3339, priority: pending.priority.rawValue, requestCount: pending.requestCount)
                    }
                )
            },
            recentDeliveries: recent.map(Self.delivery)
        ))
    }

    // MARK: Cancel and flush

    private func cancel(_ id: String) async throws -> Response {
        guard let requestID = Int64(id) else {
            if try await store.delivery(apnsID: id) != nil {
                throw APIError(
                    status: .conflict,
                    code: "already-released",
                    message: "delivery \(id) has been released to the push service and cannot be cancelled; cancel a request id instead"
                )
            }
            throw APIError.notFound("no request or delivery \(id)")
        }
        guard try await store.requestRecord(requestID) != nil else { throw APIError.notFound("no request \(requestID)") }
        let dropped = try await door.execute(CancelRequest(request: requestID))
        guard !dropped.isEmpty else {
            throw APIError(status: .conflict, code: "not-pending", message: "request \(requestID) has no pending reload (explain it to see what happened)")
        }
        logger.notice("pending reloads cancelled by the operator", metadata: ["request": "\(requestID)", "instances": "\(dropped.keys.sorted())"])
        return try Self.json(AdminAPI.Cancelled(
            cancelled: dropped.keys.sorted().map { AdminAPI.CancelledReload(instance: $0, requests: dropped[$0]!.map { Int64(bitPattern: $0) }) }
        ))
    }

    private func flush(_ request: Request) async throws -> Response {
        let body = try await JSONBody.decode(AdminAPI.FlushRequest.self, request, limit: 4096)
        let device = try body.device.map(Self.deviceToken)
        let bundle = try Self.bundleFilter(body.bundle.map { Substring($0) })
        let ignoreBudget = body.ignoreBudget
        if device != nil, bundle != nil { throw APIError.invalidField("give device or bundle, not both") }
        let flushed = try await door.execute(FlushPending(deviceToken: device, bundle: bundle, ignoringBudget: ignoreBudget))
        logger.notice(
            "pending reloads flushed by the operator",
            metadata: ["count": "\(flushed.count)", "ignore-budget": "\(ignoreBudget)", "device": "\(device ?? "-")", "bundle": "\(bundle ?? "-")"]
        )
        return try Self.json(AdminAPI.Flushed(flushed: flushed.count, instances: flushed, ignoreBudget: ignoreBudget))
    }

    // MARK: Stats

    private func stats() async throws -> Response {
        let statistics = try await store.statistics()
        var decisions: [String: Int] = [:]
        for kind in DecisionKind.allCases { decisions[kind.rawValue] = statistics.decisionsByKind[kind.rawValue] ?? 0 }
        var deliveries: [String: Int] = [:]
        for state in ["pending", "sending", "sent", "failed"] { deliveries[state] = statistics.deliveriesByState[state] ?? 0 }
        return try Self.json(AdminAPI.Stats(
            decisions: decisions,
            deliveries: deliveries,
            failures: statistics.failuresByReason,
            pendingReloads: statistics.pendingReloads,
            oldestPendingDue: statistics.oldestPendingDue.map(\.rfc3339),
            deliveryQueue: deliveries["pending", default: 0] + deliveries["sending", default: 0],
            oldestOpenDelivery: statistics.oldestOpenDelivery.map(\.rfc3339),
            unknownOutcomes: statistics.unknownOutcomes
        ))
    }

    /// The reload herd ahead: `hours` (1 to 48, default 24) from the current minute, of one app or kind.
    private func forecast(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        var hours = 24
        if let text = query["hours"] {
            guard let value = Int(text), (1...HerdForecast.maximumMinutes / 60).contains(value) else {
                throw APIError.invalidField("hours must be 1 to \(HerdForecast.maximumMinutes / 60)")
            }
            hours = value
        }
        let bundle = try Self.bundleFilter(query["bundle"])
        let kind = query["kind"].flatMap { $0.isEmpty ? nil : String($0) }
        return try Self.json(forecaster.answer(try await forecaster.forecast(hours: hours, bundle: bundle, kind: kind)))
    }

    /// Freshness per app and kind over the last hour and day (this gateway's), of one app or kind.
    private func freshness(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        let bundle = try Self.bundleFilter(query["bundle"])
        let kind = query["kind"].flatMap { $0.isEmpty ? nil : String($0) }
        // What is queued counts: the answer includes every delivery taken before the call.
        let reader = door.reader
        await door.engine.freshness.applyNow { try await reader.instanceDescriptions($0) }
        let time = Timestamp(door.now())
        return try Self.json(Self.freshnessAnswer(door.engine.freshness.reports(bundle: bundle, kind: kind, now: time), at: time))
    }

    static func freshnessAnswer(_ reports: [FreshnessMonitor.Report], at time: Timestamp) -> AdminAPI.Freshness {
        func window(_ summary: FreshnessSummary, _ objective: FreshnessObjective) -> AdminAPI.FreshnessWindow {
            AdminAPI.FreshnessWindow(
                requests: summary.requests, served: summary.served, within: summary.within, share: summary.share,
                met: summary.meets(objective), p50: summary.p50, p90: summary.p90, p99: summary.p99,
                misses: summary.misses.sorted { ($1.value, $0.key.rawValue) < ($0.value, $1.key.rawValue) }.map {
                    AdminAPI.FreshnessMiss(cause: $0.key.rawValue, count: $0.value)
                }
            )
        }
        return AdminAPI.Freshness(at: time.rfc3339, kinds: reports.map { report in
            AdminAPI.FreshnessKind(
                bundle: report.key.bundle, kind: report.key.kind,
                objectiveQuantile: report.objective.quantile, objectiveWithin: report.objective.within,
                hour: window(report.hour, report.objective), day: window(report.day, report.objective),
                hourlyRequests: report.hours.map(\.requests), hourlyWithin: report.hours.map(\.within)
            )
        })
    }

    /// The gateways sharing the database and who holds which partition (one gateway on SQLite: it
    /// schedules every device).
    private func cluster() async throws -> Response {
        guard let partitioning = door.partitioning else {
            return try Self.json(AdminAPI.Cluster(store: "sqlite", this: "", gateways: [], partitions: []))
        }
        let now = Int64(now().timeIntervalSince1970 * 1000)
        let gateways = try await partitioning.store.clusterGateways(within: 5000)
        let leases = try await partitioning.store.partitionLeases()
        // Consecutive partitions of one owner as one range.
        var ranges: [AdminAPI.PartitionRange] = []
        var start = 0
        for index in leases.indices {
            let lease = leases[index]
            let live = lease.expiresAt > now ? lease.owner : nil
            let next = index + 1 < leases.count ? leases[index + 1] : nil
            let nextLive = next.flatMap { $0.expiresAt > now ? $0.owner : nil }
            if next == nil || nextLive != live {
                let acquired = leases[start...index].compactMap(\.acquiredAt).min()
                ranges.append(AdminAPI.PartitionRange(
                    first: leases[start].partition, last: lease.partition, owner: live,
                    leaseAgeSeconds: live == nil ? nil : acquired.map { max(0, now - $0) / 1000 },
                    expiresInMilliseconds: live == nil ? nil : leases[start...index].map(\.expiresAt).min().map { $0 - now }
                ))
                start = index + 1
            }
        }
        return try Self.json(AdminAPI.Cluster(
            store: "postgres",
            this: partitioning.gateway,
            gateways: gateways.map { gateway in
                AdminAPI.ClusterGateway(
                    id: gateway.id, address: gateway.address, partitions: gateway.partitions,
                    startedAt: Timestamp(milliseconds: gateway.startedAt).rfc3339,
                    heartbeatAgeMilliseconds: max(0, now - gateway.heartbeatAt)
                )
            },
            partitions: ranges
        ))
    }

    // MARK: Encoding

    static func request(_ record: RequestRecord) -> AdminAPI.Request {
        AdminAPI.Request(
            id: record.id,
            bundle: record.bundle,
            source: record.source,
            receivedAt: record.receivedAt.rfc3339,
            priority: record.priority,
            expiration: record.expiration.map(\.rfc3339),
            collapseId: record.collapseID,
            exempt: record.exempt,
            target: .parsedOrText(record.summary),
            apnsId: record.apnsID,
            decisions: record.decisions.map { decision in
                AdminAPI.Decision(
                    instance: decision.instance,
                    widget: decision.widgetID,
                    kind: decision.kind,
                    device: decision.deviceToken,
                    decision: decision.decision,
                    due: decision.due.map(\.rfc3339),
                    reason: decision.reason
                )
            }
        )
    }

    static func delivery(_ record: DeliveryRecord) -> AdminAPI.Delivery {
        let delivery = record.delivery
        return AdminAPI.Delivery(
            apnsId: delivery.apnsID,
            bundle: record.bundle,
            device: record.deviceToken,
            releasedAt: delivery.released.rfc3339,
            instances: Array(delivery.instances),
            requests: delivery.requests.map { Int64(bitPattern: $0) },
            requestCount: delivery.requestCount,
            priority: delivery.priority.rawValue,
            state: delivery.state.rawValue,
            attempts: delivery.history.attempts,
            unknownOutcomes: delivery.history.unknownOutcomes,
            lastError: delivery.history.lastError,
            updatedAt: record.updatedAt.map(\.rfc3339)
        )
    }

    /// A `bundle` filter (a query's or a body's): absent or empty is none; anything else must be a bundle id,
    /// as the OpenAPI document's pattern says.
    static func bundleFilter(_ text: Substring?) throws -> String? {
        guard let text, !text.isEmpty else { return nil }
        guard (try? BundleID(String(text))) != nil else { throw APIError.invalidField("bundle: \(text) is not a bundle id") }
        return String(text)
    }

    static func deviceToken(_ text: String) throws -> String {
        guard let token = try? DeviceToken(text) else { throw APIError.invalidField("\(text) is not a device token (64 hex digits)") }
        return token.hex
    }

    static func json(_ body: some Encodable) throws -> Response {
        let data = try BodyJSON.encode(body)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}
