import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore

/// The reload webhook (docs/DESIGN.md, Interfaces 3): `POST /v1/apps/<bundle>/reloads`, signed with the app's
/// webhook secret, made safe to retry with `idempotency-key`, answered `202` once the request and its
/// decisions are committed.
///
/// Checks run in this order, and none of the refusals stores anything: app (404), body size (413),
/// signature (401), idempotency key (400), JSON (400), fields (422), exemption allowed (403).
struct WebhookRoutes {
    /// Where reloads go; the route reads through its ``GatewayDoor/reader``.
    let door: GatewayDoor

    /// Bodies larger than this are refused while reading (docs/DESIGN.md, Security: 64 KiB).
    static let bodyLimit = 64 * 1024
    /// Longest accepted `idempotency-key`.
    static let idempotencyKeyLength = 255

    func register(on router: some RouterMethods) {
        router.post("v1/apps/:bundle/reloads") { request, context in
            do {
                return try await reload(request, context)
            } catch let error as APIError {
                return error.response
            } catch {
                if let refusal = APIError.refusal(error) { return refusal.response }
                // The commit failed: nothing of the request was accepted, and the caller may retry.
                return APIError(status: .internalServerError, code: "storage", message: "the request could not be stored; nothing was accepted")
                    .response
            }
        }
    }

    private func reload(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let received = door.now()
        let bundleText = context.parameters.get("bundle") ?? ""
        guard let bundle = try? BundleID(bundleText), let (app, key) = try await door.apps.appWithWebhookKey(bundle: bundle) else {
            throw APIError.notFound("no app \(bundleText) is registered (reloadgate apps add \(bundleText))")
        }
        // An app's registration key may ship inside the app: it never calls the webhook (refused by its
        // look: a webhook call is signed, and a bearer key in it is never looked up).
        if KeyScope.presentsRegistrationKey(request) {
            throw KeyScope.refusal(needs: "the webhook is signed with the app's webhook secret")
        }
        let body = try await JSONBody.bytes(request, limit: Self.bodyLimit)

        do throws(WebhookSignature.Failure) {
            let signature = try WebhookSignature(header: request.headers[.reloadgateSignature])
            try signature.verify(body: body, key: key, now: received)
        } catch {
            let code =
                switch error {
                case .missing: "signature-missing"
                case .malformed: "signature-malformed"
                case .outsideWindow: "signature-stale"
                case .mismatch: "signature-mismatch"
                }
            throw APIError(status: .unauthorized, code: code, message: error.description)
        }

        var idempotency: ReloadCommand.Idempotency?
        if let key = request.headers[.idempotencyKey] {
            guard (1...Self.idempotencyKeyLength).contains(key.utf8.count),
                key.utf8.allSatisfy({ (0x21...0x7e).contains($0) })
            else {
                throw APIError(
                    status: .badRequest,
                    code: "invalid-idempotency-key",
                    message: "idempotency-key must be 1 to \(Self.idempotencyKeyLength) visible ASCII characters"
                )
            }
            idempotency = .init(key: key, bodyHash: Array(SHA256.hash(data: body)))
        }

        let parsed = try WebhookBody(json: body, received: Timestamp(received))
        if parsed.exemption != nil, !app.allowsExemptions {
            throw APIError(
                status: .forbidden,
                code: "exemption-not-allowed",
                message: "\(app.bundle) may not claim exemptions (reloadgate apps add --allow-exemptions)"
            )
        }
        var activity: ActivityContent?
        if let payload = parsed.payload {
            activity = try Self.activityContent(payload, of: parsed)
        }
        let found = try await Self.targets(of: parsed.target, app: app, door: door)
        let targets = found.map(\.instance)
        let submission = ReloadCommand(
            app: app,
            source: .webhook,
            targets: targets,
            targetDevices: found.map(\.device),
            priority: parsed.priority,
            expiration: parsed.expiration,
            collapseID: parsed.collapseID,
            team: "app:\(app.id)",
            exempt: parsed.exemption != nil,
            summary: String(decoding: body, as: UTF8.self),
            received: Timestamp(received),
            activity: activity,
            idempotency: idempotency
        )
        switch try await door.reload(submission, render: Self.render) {
        case .decided(let id, let decisions, let status, let text):
            context.logger.debug(
                "reload webhook call accepted",
                metadata: [
                    "request": "\(id)", "bundle": "\(app.bundle)", "targets": "\(targets.count)",
                    "decisions": "\(Self.decisionSummary(decisions))",
                ]
            )
            return Self.response(status: status, body: text, replayed: false)
        case .replay(let status, let text):
            return Self.response(status: status, body: text, replayed: true)
        case .conflict:
            throw APIError(
                status: .conflict,
                code: "idempotency-conflict",
                message: "this idempotency-key was used in the last 24 hours with another body"
            )
        }
    }

    /// The instances `target` selects: kept from an earlier call with the same target while the registry
    /// has not changed (``RegistryCache``), read from the store otherwise. Gateways sharing a store read
    /// each time: another gateway's registration reaches this one's cache only with its notification, and a
    /// call through this gateway just after that registration's answer must see it (decision 0087).
    static func targets(of target: ReloadTarget, app: App, door: GatewayDoor) async throws -> RegistryCache.Targets {
        guard door.partitioning == nil else { return try await door.reader.targetInstances(app: app, target: target) }
        if let kept = door.registryCache.targets(app: app.id, target: target) { return kept }
        // The generation before the read: a registry change during it keeps the read from being kept.
        let generation = door.registryCache.generation
        let found = try await door.reader.targetInstances(app: app, target: target)
        door.registryCache.storeTargets(found, app: app.id, target: target, generation: generation)
        return found
    }

    /// `scheduled 2, merged 1` for a log line.
    static func decisionSummary(_ decisions: [Decision]) -> String {
        var counts: [String: Int] = [:]
        for decision in decisions { counts[decision.kind.rawValue, default: 0] += 1 }
        return counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    /// The `202` body: the request id, the number of widget instances decided, and the count of each
    /// decision kind (all kinds listed, zeros included).
    static func render(_ id: ReloadGateCore.RequestID, _ decisions: [Decision]) -> (status: Int, body: String) {
        let targets = decisions.count { $0.instance != nil }
        return (202, RegistryAPI.ReloadAccepted.jsonText(requestId: id, targets: targets, counts: DecisionCounts(decisions)))
    }

    static func response(status: Int, body: String, replayed: Bool) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if replayed { headers[.idempotentReplayed] = "true" }
        return Response(
            status: HTTPResponse.Status(code: status),
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(string: body))
        )
    }

    /// A Live Activity update's payload, checked by Apple's rules as a push's would be: an update or an
    /// end (a start goes to a push-to-start token, through the APNs listener), at a priority Apple takes.
    static func activityContent(_ payload: Data, of body: WebhookBody) throws -> ActivityContent {
        let descriptor = body.target.pushType.descriptor
        guard payload.count <= PushPayload.limit else {
            throw APIError.invalidField("payload has \(payload.count) bytes, more than Apple's \(PushPayload.limit)")
        }
        let content: ActivityContent
        do {
            content = try ActivityPayload.check(payload)
        } catch {
            throw APIError.invalidField("payload: \(error.detail ?? error.reason.rawValue)")
        }
        guard content.event != .start else {
            throw APIError.invalidField("payload: a start goes to a push-to-start token through the APNs listener; a webhook sends update or end")
        }
        guard descriptor.priorities.contains(body.priority) else {
            throw APIError.invalidField("priority must be \(descriptor.priorities.map { "\($0.rawValue)" }.joined(separator: " or ")) for \(descriptor.pushType.rawValue)")
        }
        return content
    }
}

extension HTTPField.Name {
    /// `reloadgate-signature: t=<unix>,v1=<hex>` (the webhook's signature).
    static let reloadgateSignature = Self("reloadgate-signature")!
    /// `idempotency-key`: makes a webhook call safe to retry.
    static let idempotencyKey = Self("idempotency-key")!
    /// `idempotent-replayed: true` on the answer to a retried call: the first answer, nothing done again.
    static let idempotentReplayed = Self("idempotent-replayed")!
}
