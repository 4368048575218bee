import Foundation
import Hummingbird
import NIOCore
import ReloadGateAPI
import ReloadGateCore
import ReloadGateStore

/// The registry API (docs/DESIGN.md, Interfaces 2): devices with their widgets, timelines, configurations.
/// Every call carries `authorization: bearer <key>` of the app named in the path: its API key, or its
/// registration key (`rgr_...`), which may only put and delete devices, controls, activities and
/// timelines, within ``RegistrationGuard``'s limits.
struct RegistryRoutes {
    /// Where changes go; the routes read through its ``GatewayDoor/reader``.
    let door: GatewayDoor
    let limits: RegistryLimits
    /// What calls with a registration key may spend.
    var registrationGuard = RegistrationGuard(GatewayConfiguration.Registration())

    /// Bodies larger than this are refused while reading (docs/DESIGN.md, Security: 64 KiB).
    static let bodyLimit = 64 * 1024

    func register(on router: some RouterMethods) {
        let apps = router.group("v1/apps/:bundle")
        apps.put("devices/:token") { request, context in
            try await respond(request, context) { try await putDevice(request, context) }
        }
        apps.delete("devices/:token") { request, context in
            try await respond(request, context) { try await deleteDevice(request, context) }
        }
        apps.put("controls/:token") { request, context in
            try await respond(request, context) { try await putControl(request, context) }
        }
        apps.delete("controls/:token") { request, context in
            try await respond(request, context) { try await deleteDevice(request, context, pushType: .controls) }
        }
        apps.put("activities/:token") { request, context in
            try await respond(request, context) { try await putActivity(request, context) }
        }
        apps.delete("activities/:token") { request, context in
            try await respond(request, context) { try await deleteDevice(request, context, pushType: .liveactivity) }
        }
        apps.put("devices/:token/widgets/:widget/timeline") { request, context in
            try await respond(request, context) { try await putTimeline(request, context) }
        }
        apps.get("configurations") { request, context in
            try await respond(request, context) { try await configurations(request, context) }
        }
    }

    /// Runs a handler, turning registry and store errors into JSON answers.
    private func respond(
        _ request: Request,
        _ context: some RequestContext,
        _ handler: () async throws -> Response
    ) async throws -> Response {
        do {
            return try await handler()
        } catch let error as APIError {
            return error.response
        } catch let error as RegistryError {
            let status: HTTPResponse.Status =
                switch error {
                case .deviceNotFound, .widgetNotFound: .notFound
                case .deviceUnregistered: .gone
                case .otherPushType: .conflict
                }
            let code =
                switch error {
                case .deviceNotFound, .widgetNotFound: "not-found"
                case .deviceUnregistered: "unregistered"
                case .otherPushType: "other-push-type"
                }
            return APIError(status: status, code: code, message: error.description).response
        } catch {
            if let refusal = APIError.refusal(error) { return refusal.response }
            throw error
        }
    }

    /// The app of the call's key, which must be the app in the path. A registration key is accepted only
    /// where `registration` allows it, for the device token the path names (counted against its limits);
    /// with `newDevice`, a token the app does not have yet is also counted as a new device.
    private func authenticate(
        _ request: Request, _ context: some RequestContext, registration: Bool = false, newDevice: Bool = false
    ) async throws -> App {
        let bundle = context.parameters.get("bundle") ?? ""
        guard let credential = HeaderValue.bearerCredential(request.headers[.authorization]) else {
            throw APIError.unauthorized("send the app's API key (or, to register, its registration key) as `authorization: bearer <key>`")
        }
        let key = String(HeaderValue.trimmed(credential))
        guard let (app, scope) = try await door.apps.app(forKey: key) else {
            throw APIError.unauthorized("the key is not valid")
        }
        guard app.bundle.rawValue == bundle else {
            throw APIError.forbidden(
                scope == .registration
                    ? "the registration key belongs to another app than \(bundle): it may only register \(app.bundle)'s devices, controls, activities and timelines"
                    : "the API key belongs to another app than \(bundle)"
            )
        }
        guard scope == .registration else { return app }
        guard registration else { throw KeyScope.registrationOnly }
        let token = try token(context)
        let address = RegistrationGuard.addressKey((context as? any RemoteAddressRequestContext)?.remoteAddress)
        try registrationGuard.admit(token: token, app: app, address: address)
        if newDevice, try await door.reader.deviceStatus(app: app, token: token) == nil {
            try registrationGuard.admitNewDevice(app: app)
        }
        return app
    }

    private func token(_ context: some RequestContext, _ name: String = "token") throws -> DeviceToken {
        do {
            return try DeviceToken(context.parameters.get(name) ?? "")
        } catch {
            throw APIError.invalidField("the device token in the path: \(error)")
        }
    }

    private func putDevice(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let app = try await authenticate(request, context, registration: true, newDevice: true)
        let token = try token(context)
        let body = try DeviceRegistrationBody(json: try await JSONBody.bytes(request, limit: Self.bodyLimit), limits: limits)
        try Self.check(environment: body.environment, of: app)
        let registration = try await door.execute(
            PutDevice(app: app, token: token, widgets: body.widgets, previousToken: body.previousToken)
        )
        let text = RegistryAPI.DeviceRegistered(
            device: token.hex,
            widgets: registration.instances.map { RegistryAPI.RegisteredWidget(id: $0.widget.id, instance: $0.id) },
            removedWidgets: registration.removedInstances.count,
            retiredPreviousToken: registration.retired != nil
        ).jsonText
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text))
        )
    }

    /// A registration's `environment`, when given, must be the app's: another is a conflict with the app
    /// (409), not a malformed field, since the same body is right for an app of the other environment.
    private static func check(environment: String?, of app: App) throws {
        if let environment, environment != app.environment.rawValue {
            throw APIError(
                status: 409, code: "other-environment",
                message: "environment is \(environment) but \(app.bundle) is registered for \(app.environment)"
            )
        }
    }

    /// `PUT .../controls/<token>`: one control's token, kind and configuration.
    private func putControl(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let app = try await authenticate(request, context, registration: true, newDevice: true)
        let token = try token(context)
        let body = try ControlRegistrationBody(json: try await JSONBody.bytes(request, limit: Self.bodyLimit), limits: limits)
        try Self.check(environment: body.environment, of: app)
        let registration = try await door.execute(
            PutRegistry(write: .putControl(app: app, token: token, control: body.control, previousToken: body.previousToken))
        )
        let instance = registration.instances.first?.id ?? 0
        let text = RegistryAPI.ControlRegistered(
            control: token.hex, instance: instance, kind: body.control.kind, retiredPreviousToken: registration.retired != nil
        ).jsonText
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text))
        )
    }

    /// `PUT .../activities/<token>`: a Live Activity's token, or a push-to-start token.
    private func putActivity(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let app = try await authenticate(request, context, registration: true, newDevice: true)
        let token = try token(context)
        let body = try ActivityRegistrationBody(json: try await JSONBody.bytes(request, limit: Self.bodyLimit), limits: limits)
        try Self.check(environment: body.environment, of: app)
        let registration = try await door.execute(
            PutRegistry(write: .putActivity(app: app, token: token, activity: body.activity, previousToken: body.previousToken))
        )
        return try json(RegistryAPI.ActivityRegistered(
            activity: token.hex, instance: registration.instances.first?.id ?? 0, attributesType: body.activity.attributesType,
            frequentUpdates: body.activity.frequentUpdates, pushToStart: body.activity.pushToStart, retiredPreviousToken: registration.retired != nil
        ))
    }

    /// `DELETE .../devices/<token>`, `.../controls/<token>` or `.../activities/<token>` (`pushType`): a token of the other type is
    /// refused (409), so that a path never removes what it does not name.
    private func deleteDevice(_ request: Request, _ context: some RequestContext, pushType: PushType = .widgets) async throws -> Response {
        let app = try await authenticate(request, context, registration: true)
        _ = try await door.execute(DeleteDevice(app: app, token: try token(context), pushType: pushType))
        return Response(status: .noContent)
    }

    private func putTimeline(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let app = try await authenticate(request, context, registration: true)
        let token = try token(context)
        let widgetID = context.parameters.get("widget") ?? ""
        let timeline = try TimelineBody.timeline(json: try await JSONBody.bytes(request, limit: Self.bodyLimit), limits: limits)
        // Answered once the planned reload is written through to the scheduler's state.
        _ = try await door.execute(SetTimeline(app: app, token: token, widgetID: widgetID, timeline: timeline))
        return try json(RegistryAPI.TimelineRecorded(plannedReload: timeline.plannedReload.map { $0.date.formatted(.iso8601) }))
    }

    private func configurations(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let app = try await authenticate(request, context)
        let kind = request.uri.queryParameters.get("kind")
        let usages = try await door.reader.configurations(app: app, kind: kind)
        return try json(RegistryAPI.ConfigurationList(
            configurations: usages.map { usage in
                RegistryAPI.ConfigurationUse(
                    kind: usage.kind,
                    family: usage.family,
                    configuration: .parsedOrText(usage.configuration),
                    count: usage.count
                )
            }
        ))
    }

    private func json(_ body: some Encodable) throws -> Response {
        let data = try BodyJSON.encode(body)
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}
