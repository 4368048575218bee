import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// An answer of the push endpoint, independent of HTTP/2 or HTTP/1.1.
struct PushResponse: Error, Sendable {
    var status: Int
    var apnsID: String
    /// `reloadgate-decision`, `reloadgate-due`.
    var extraHeaders: [(String, String)] = []
    /// JSON error body, or `nil` for a success (empty body).
    var body: String?
    /// APNs' reason of a refusal (metrics).
    var reason: String?

    init(status: Int, apnsID: String, extraHeaders: [(String, String)] = [], body: String? = nil) {
        self.status = status
        self.apnsID = apnsID
        self.extraHeaders = extraHeaders
        self.body = body
    }

    init(_ failure: APNsFailure, apnsID: String) {
        self.init(status: failure.reason.status, apnsID: apnsID, body: failure.body)
        self.reason = failure.reason.rawValue
    }
}

/// The push endpoint's logic (docs/APNS.md) between the transport and the scheduler, in two steps that
/// follow docs/APNS.md's order of checks: ``checkHead(_:certificate:authentication:ids:)`` (method and path,
/// headers, authentication), as soon as the headers arrive, and ``process(_:body:respond:)`` (payload,
/// device token, then the scheduler) once the body is complete. The transports (HTTP/2 frames, HTTP/1.1)
/// call both on their event loop; nothing here blocks on a commit: the answer comes through `respond`.
final class PushIngress: Sendable {
    /// A push whose method, path, headers and credentials passed.
    struct AcceptedHead: Sendable {
        var headers: PushHeaders
        var deviceToken: Substring
        var apnsID: String
        /// The app of the topic, when the door's cache knew it; `nil`: ``process(_:body:connection:respond:)``
        /// looks it up in the store (off the event loop) before anything else.
        var app: App?
        /// Scopes collapse ids: the token's team, or the certificate's bundle.
        var team: String
        /// The provider token's team (a certificate has none): the app must belong to it.
        var tokenTeam: String?
    }

    /// Where pushes go; devices and targets are read through its ``GatewayDoor/reader``.
    private let door: GatewayDoor
    private let store: any GatewayStoreReading
    private let apps: AppDirectory
    private let verifier: ProviderTokenVerifier
    private let unknownDevices: GatewayConfiguration.Ingress.UnknownDevices
    /// docs/APNS.md's abuse guard (`429 TooManyRequests`), per device token.
    private let guardRail: RateLimiter<ContinuousClock>
    private let revokedSerials: Set<String>
    /// Devices' status and default targets, kept in memory (a registry change forgets what it may have changed).
    let devices: RegistryCache
    private let now: @Sendable () -> Date
    let logger: Logger
    /// Counts the listener's answers by status and reason.
    let metrics: GatewayMetrics

    init(
        door: GatewayDoor,
        verifier: ProviderTokenVerifier,
        configuration: GatewayConfiguration.Ingress,
        now: @escaping @Sendable () -> Date,
        logger: Logger,
        metrics: GatewayMetrics = GatewayMetrics()
    ) {
        self.metrics = metrics
        self.door = door
        self.store = door.reader
        self.apps = door.apps
        self.verifier = verifier
        self.unknownDevices = configuration.unknownDevices
        self.guardRail = RateLimiter.tokenGuard(perSecond: configuration.requestsPerSecondPerToken)
        self.revokedSerials = Set(configuration.revokedCertificateSerials)
        self.devices = door.registryCache
        self.now = now
        self.logger = logger
    }

    /// The `apns-id` answers carry: the request's own when it is a canonical UUID, else a new one.
    static func responseID(_ headers: [(name: String, value: String)], ids: inout MessageID.Generator) -> String {
        if let sent = headers.first(where: { $0.name == "apns-id" })?.value, PushHeaders.isCanonicalUUID(sent) {
            return sent
        }
        return ids.next()
    }

    /// Method and path, headers, authentication (the client certificate when the connection has one,
    /// else the provider token), and the app: a token's key must be of the app's team (docs/APNS.md: keys are
    /// team-scoped) and allow its topic. A refusal is logged at `debug` with its reason, its detail and
    /// `connection`'s metadata (never the token itself).
    func checkHead(
        _ head: PushRequestHead,
        certificate: ClientCertificate?,
        authentication: inout ConnectionAuthentication,
        ids: inout MessageID.Generator,
        connection: Logger
    ) -> Result<AcceptedHead, PushResponse> {
        let apnsID = Self.responseID(head.headers, ids: &ids)
        var headers: PushHeaders?
        do throws(APNsFailure) {
            let token = try PushHeaders.deviceTokenText(method: head.method, path: head.path)
            let checked = try PushHeaders(head.headers, certificateTopics: certificate?.topics)
            headers = checked
            let bundle = checked.bundle
            let team: String
            var tokenTeam: String?
            if let certificate {
                // A connection with a client certificate: its topics decide; authorization is ignored.
                // Apple takes Live Activity pushes over provider tokens only.
                guard checked.pushType.descriptor.allowsCertificates else {
                    throw APNsFailure(.topicDisallowed, detail: "\(checked.pushType.rawValue) pushes need a provider token; a certificate is refused, as at Apple")
                }
                if revokedSerials.contains(certificate.serial) {
                    throw APNsFailure(.badCertificate, detail: "the certificate's serial \(certificate.serial) is revoked")
                }
                guard certificate.topics.contains(bundle.rawValue) else {
                    throw APNsFailure(.topicDisallowed, detail: "the certificate's topics \(certificate.topics) do not include \(bundle)")
                }
                team = "certificate:" + bundle.rawValue
            } else {
                let verified = try authentication.authenticate(
                    bearer: checked.bearerToken,
                    verifier: verifier,
                    now: Timestamp(now()).milliseconds / 1000
                )
                guard verified.key.allows(bundle) else {
                    throw APNsFailure(
                        .topicDisallowed,
                        detail: "key \(verified.key.keyID) may push only to \(verified.key.topics.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                team = verified.teamID
                tokenTeam = verified.teamID
            }
            // The app from the door's cache; one it does not hold is read from the store in `process`.
            let app = apps.cachedApp(bundle: bundle)
            if let app { try Self.check(app, tokenTeam: tokenTeam) }
            return .success(
                AcceptedHead(
                    headers: checked, deviceToken: token, apnsID: checked.apnsID ?? apnsID, app: app, team: team, tokenTeam: tokenTeam
                )
            )
        } catch {
            connection.debug(
                "push refused",
                metadata: Self.refusalMetadata(error, apnsID: apnsID, bearer: certificate == nil ? headers?.bearerToken : nil)
            )
            return .failure(PushResponse(error, apnsID: apnsID))
        }
    }

    /// A provider token's key must be of the app's team (docs/APNS.md: keys are team-scoped).
    static func check(_ app: App, tokenTeam: String?) throws(APNsFailure) {
        if let tokenTeam, app.teamID != tokenTeam {
            throw APNsFailure(
                .topicDisallowed,
                detail: "the app \(app.bundle) belongs to \(app.teamID.map { "team \($0)" } ?? "no team (reloadgate apps set-team)"), the key to team \(tokenTeam)"
            )
        }
    }

    /// What a refusal's log line says: the reason, the detail, and for a provider token its `kid` and
    /// team as the token claims them (read without verifying; the token itself is never logged).
    static func refusalMetadata(_ failure: APNsFailure, apnsID: String, bearer: Substring?) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["reason": "\(failure.reason)", "apns-id": "\(apnsID)"]
        if let detail = failure.detail { metadata["detail"] = "\(detail)" }
        if let bearer, let claimed = ProviderToken.claimedIdentity(bearer) {
            metadata["kid"] = "\(claimed.keyID ?? "-")"
            metadata["team"] = "\(claimed.teamID ?? "-")"
        }
        return metadata
    }

    /// Payload, device token, then the scheduler. `respond` is called exactly once, possibly on another
    /// thread (after the decision's group commit).
    ///
    /// A push whose app and device the door's caches hold is decided without leaving the event loop; one
    /// that needs the store (an app or device not cached, a push naming a kind or configuration) is
    /// handed to a task, so that no store read runs on the loop (with PostgreSQL it is a network round
    /// trip). The checks and their order are the same on both paths.
    func process(
        _ head: AcceptedHead,
        body: some Collection<UInt8>,
        connection: Logger,
        respond: @escaping @Sendable (PushResponse) -> Void
    ) {
        let received = now()
        if let app = head.app {
            do throws(APNsFailure) {
                let (payload, token) = try Self.parse(head, body: body)
                if let entry = devices.entry(app: app.id, token: token.hex),
                    !Self.needsTargetRead(payload, entry: entry)
                {
                    let status = try admit(entry.status, token: token, pushType: head.headers.pushType)
                    return submit(
                        head, app: app, payload: payload, token: token, status: status, targets: entry.allTargets,
                        summary: String(decoding: Array(body), as: UTF8.self), received: received, respond: respond
                    )
                }
            } catch {
                connection.debug("push refused", metadata: Self.refusalMetadata(error, apnsID: head.apnsID, bearer: nil))
                return respond(PushResponse(error, apnsID: head.apnsID))
            }
        }
        let bytes = Array(body)
        Task {
            await self.processReadingStore(head, body: bytes, received: received, connection: connection, respond: respond)
        }
    }

    /// ``process(_:body:connection:respond:)`` with the store's reads awaited: the app (a topic of no app
    /// registered here is `TopicDisallowed`, before the payload is looked at), the device's status and
    /// its widgets.
    private func processReadingStore(
        _ head: AcceptedHead,
        body: [UInt8],
        received: Date,
        connection: Logger,
        respond: @escaping @Sendable (PushResponse) -> Void
    ) async {
        do {
            let app: App
            if let known = head.app {
                app = known
            } else {
                let bundle = head.headers.bundle
                guard let found = try await apps.app(bundle: bundle) else {
                    throw APNsFailure(.topicDisallowed, detail: "no app \(bundle) is registered here (reloadgate apps add)")
                }
                try Self.check(found, tokenTeam: head.tokenTeam)
                app = found
            }
            let (payload, token) = try Self.parse(head, body: body)
            let store = store
            let entry = try await devices.entry(app: app.id, token: token.hex) {
                let read = try await store.pushDeviceStatus(app: app, token: token)
                var entry = RegistryCache.Entry(status: read, allTargets: [])
                if case .active(let device, _) = read {
                    entry.allTargets = try await store.pushTargets(device: device, kind: nil, match: [:])
                }
                if case .unknown = read { return (entry, keep: false) }
                return (entry, keep: true)
            }
            let status = try admit(entry.status, token: token, pushType: head.headers.pushType)
            var targets = entry.allTargets
            if case .active(let device, _) = status, Self.needsTargetRead(payload, entry: entry) {
                targets = try await store.pushTargets(device: device, kind: payload.kind, match: payload.match)
            }
            submit(
                head, app: app, payload: payload, token: token, status: status, targets: targets,
                summary: String(decoding: body, as: UTF8.self), received: received, respond: respond
            )
        } catch let failure as APNsFailure {
            connection.debug("push refused", metadata: Self.refusalMetadata(failure, apnsID: head.apnsID, bearer: nil))
            respond(PushResponse(failure, apnsID: head.apnsID))
        } catch let error as StoreError where error.isStoreAway {
            // The database is away: Apple's answer for "try again later".
            connection.debug("push refused: the store cannot be reached", metadata: ["apns-id": "\(head.apnsID)"])
            respond(Self.refusal(StoreError.readFailed(error), apnsID: head.apnsID))
        } catch {
            logger.error("cannot read an app or device", metadata: ["error": "\(error)", "apns-id": "\(head.apnsID)"])
            respond(Self.refusal(StoreError.readFailed(error), apnsID: head.apnsID))
        }
    }

    /// The payload, then the device token (docs/APNS.md's order).
    private static func parse(_ head: AcceptedHead, body: some Collection<UInt8>) throws(APNsFailure) -> (PushPayload, DeviceToken) {
        let payload = try PushPayload(body, rule: head.headers.pushType.descriptor.payloadRule)
        guard !head.deviceToken.utf8.isEmpty else { throw APNsFailure(.missingDeviceToken) }
        guard let token = try? DeviceToken(String(head.deviceToken)) else { throw APNsFailure(.badDeviceToken) }
        return (payload, token)
    }

    /// Whether the push selects widgets by kind or configuration, which the cache's default targets
    /// (every push-enabled widget of the device) do not answer.
    private static func needsTargetRead(_ payload: PushPayload, entry: RegistryCache.Entry) -> Bool {
        guard case .active = entry.status else { return false }
        return payload.kind != nil || !payload.match.isEmpty || entry.allTargets.isEmpty
    }

    /// The device's status as an answer: 410 for a retired token, 400 for another app's or for a token of
    /// the other push type (a device's token in a controls push, a control's in a widgets push: its topic
    /// is not the token's, as Apple answers), the unknown device policy, then the per-token guard.
    private func admit(_ found: PushDeviceStatus, token: DeviceToken, pushType: PushType) throws(APNsFailure) -> PushDeviceStatus {
        switch found {
        case .active(_, let registered) where registered != pushType:
            throw APNsFailure(.deviceTokenNotForTopic, detail: "the token is registered for \(registered) pushes")
        case .active, .unknown: break
        case .unregistered(let since):
            throw APNsFailure(.unregistered, timestamp: Timestamp(since).milliseconds)
        case .otherApp: throw APNsFailure(.deviceTokenNotForTopic)
        }
        if case .unknown = found, unknownDevices == .reject { throw APNsFailure(.badDeviceToken) }
        guard guardRail.allow(token.hex) else { throw APNsFailure(.tooManyRequests) }
        return found
    }

    /// Hands the push to the door (adopting an unknown device first); `respond` is called once its
    /// decision is committed.
    private func submit(
        _ head: AcceptedHead,
        app: App,
        payload: PushPayload,
        token: DeviceToken,
        status: PushDeviceStatus,
        targets known: [Int64],
        summary: String,
        received: Date,
        respond: @escaping @Sendable (PushResponse) -> Void
    ) {
        // 0, or a date already past: now or never (``Timestamp/expiration(_:receivedAt:)``). A date names a
        // whole second and lasts to its end: a client that sends "now + 0 s" in whole seconds (aioapns'
        // time_to_live=0) names the second the push arrives in, which Apple still tries once (docs/DECISIONS.md,
        // "An apns-expiration lasts to the end of its second"). The header is 0 to 9999-12-31T23:59:59
        // (PushHeaders), so the milliseconds fit.
        let expiration = Timestamp.expiration(
            head.headers.expiration.map { $0 == 0 ? .nowOrNever : Timestamp(seconds: $0).adding(milliseconds: 999) },
            receivedAt: Timestamp(received)
        )
        let enqueue: @Sendable (Int64, [Int64]) -> Void = { [door, logger] device, targets in
            let submission = ReloadCommand(
                app: app,
                source: .push,
                targets: targets,
                targetDevices: Array(repeating: device, count: targets.count),
                priority: head.headers.priority,
                expiration: expiration,
                collapseID: head.headers.collapseID,
                team: head.team,
                exempt: false,
                summary: summary,
                apnsID: StoredAPNsID.of(head.apnsID),
                received: Timestamp(received),
                activity: payload.activity,
                // A sender's own apns-id names the push: its retry is answered, not decided again.
                idempotency: head.headers.apnsID.map { .push(apnsID: $0, device: device) }
            )
            // The answer is recorded only for a push with a key (rendered on the commit loop); any other is
            // rendered from its decisions here, on the thread of its reply.
            let keyed = submission.idempotency != nil
            let render: SchedulerEngine.Render = { _, decisions in (200, keyed ? Self.answerRecord(Self.decisionHeaders(decisions)) : "") }
            door.enqueue(submission, render: render) { result in
                switch result {
                case .success(.decided(let id, let decisions, let status, _)):
                    logger.debug(
                        "push accepted",
                        metadata: [
                            "apns-id": "\(head.apnsID)", "request": "\(id)", "bundle": "\(app.bundle)",
                            "device": "\(token.shortened)", "decisions": "\(WebhookRoutes.decisionSummary(decisions))",
                        ]
                    )
                    // The headers the record holds, made again from the decisions (no parsing on this path).
                    respond(PushResponse(status: status, apnsID: head.apnsID, extraHeaders: Self.decisionHeaders(decisions)))
                case .success(.replay(let status, let record)):
                    // The same apns-id for the same device, answered before: that answer, nothing decided again.
                    logger.debug("push answered before", metadata: ["apns-id": "\(head.apnsID)", "device": "\(token.shortened)"])
                    respond(PushResponse(
                        status: status, apnsID: head.apnsID, extraHeaders: Self.answerHeaders(record) + [("idempotent-replayed", "true")]
                    ))
                case .success(.conflict):
                    // A push's key has no body hash: a conflict cannot come.
                    respond(PushResponse(APNsFailure(.internalServerError), apnsID: head.apnsID))
                case .failure(let error):
                    respond(Self.refusal(error, apnsID: head.apnsID))
                }
            }
        }

        switch status {
        case .active(let device, _):
            enqueue(device, known)
        default:
            // Adopting writes the device (rare: once per new token) in the registry's group commit, not
            // on the event loop nor in the scheduler's commit loop; the push is submitted once the device
            // is there. A device the adoption created has only its implicit instance, which every push
            // targets; one written first by another (a registration meanwhile) may have more, read here.
            // A start pushed to a token never seen is a push-to-start token's.
            let pushToStart = payload.activity?.event == .start
            door.adopt(app: app, token: token, pushType: head.headers.pushType, pushToStart: pushToStart) { [logger, store] result in
                switch result {
                case .success(let adopted) where adopted.created:
                    enqueue(adopted.device, [adopted.instance])
                case .success(let adopted):
                    Task {
                        do {
                            enqueue(adopted.device, try await store.pushTargets(device: adopted.device, kind: payload.kind, match: payload.match))
                        } catch {
                            logger.error("cannot read a device's widgets", metadata: ["error": "\(error)"])
                            respond(Self.refusal(StoreError.readFailed(error), apnsID: head.apnsID))
                        }
                    }
                case .failure(RegistryError.otherPushType(_, let registered)):
                    // A push of the other type adopted the token a moment before.
                    respond(PushResponse(
                        APNsFailure(.deviceTokenNotForTopic, detail: "the token is registered for \(registered) pushes"), apnsID: head.apnsID
                    ))
                case .failure(let error):
                    logger.error("cannot adopt a device", metadata: ["device": "\(token.shortened)", "error": "\(error)"])
                    respond(Self.refusal(error, apnsID: head.apnsID))
                }
            }
        }
    }

    /// Whether `error` refused a push for the gateway's state (queue full, the store away): Apple's 503,
    /// safe to retry.
    /// The answer to a push the gateway could not decide or commit: Apple's reason (`Shutdown`,
    /// `ServiceUnavailable` for the store's or the gateway's state, else `InternalServerError`), and
    /// `reloadgate-outcome`: `unknown` when the commit may have been made (its answer was lost; the retry
    /// with the push's apns-id is answered, not decided again), `not-stored` otherwise (docs/OPERATIONS.md,
    /// "What a failed answer means").
    static func refusal(_ error: any Error, apnsID: String) -> PushResponse {
        let reason: APNsReason =
            switch error {
            case is SchedulerUnavailable: .shutdown
            case let error where isUnavailable(error): .serviceUnavailable
            default: .internalServerError
            }
        var response = PushResponse(APNsFailure(reason), apnsID: apnsID)
        let unknown = if case .outcomeUnknown? = error as? StoreError { true } else { false }
        response.extraHeaders = [("reloadgate-outcome", unknown ? "unknown" : "not-stored")]
        return response
    }

    static func isUnavailable(_ error: any Error) -> Bool {
        switch error {
        case is SchedulerOverloaded: true
        // Another gateway took the device's partition over while the batch committed: nothing was
        // written, and a retry reaches the new owner.
        case let error as StoreError: error.isTransient
        default: false
        }
    }

    /// A push's answer headers as the idempotency record keeps them, one `name: value` per line: a retry
    /// of the push with its apns-id gets the same headers (``answerHeaders(_:)``).
    static func answerRecord(_ headers: [(String, String)]) -> String {
        headers.map { "\($0.0): \($0.1)" }.joined(separator: "\n")
    }

    /// The headers of an ``answerRecord(_:)``.
    static func answerHeaders(_ record: String) -> [(String, String)] {
        record.split(separator: "\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), String(line[line.index(after: colon)...].drop { $0 == " " }))
        }
    }

    /// `reloadgate-decision` (the most consequential of the push's decisions) and `reloadgate-due`
    /// (the earliest due time, when something is pending).
    static func decisionHeaders(_ decisions: [Decision]) -> [(String, String)] {
        let order: [DecisionKind] = [.scheduled, .deferred, .merged, .absorbed, .expired, .outdated, .afterEnd, .forwarded, .noMatch]
        let kind = order.first { kind in decisions.contains { $0.kind == kind } } ?? .noMatch
        var headers = [("reloadgate-decision", kind.rawValue)]
        if let due = decisions.compactMap(\.due).min() {
            headers.append(("reloadgate-due", due.rfc3339))
        }
        return headers
    }
}
