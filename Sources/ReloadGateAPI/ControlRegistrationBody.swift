import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/controls/<token>`: one control, as the widget extension's
/// `ControlPushHandler` hands it over in `pushTokensDidChange(controls:)` (a `ControlInfo` per control: its
/// kind and its own push token, the path's).
public struct ControlRegistrationBody: RegistryBody, Sendable {
    /// `sandbox` or `production` when sent; the route checks it against the app's.
    public var environment: String?
    public var control: ControlRegistration
    /// The control's token this one replaces (retired: 410 from then on).
    public var previousToken: DeviceToken?

    /// The fields a body may have.
    public static let fieldNames: Set<String> = ["kind", "configuration", "environment", "previousToken"]

    public init(_ fields: BodyObject, limits: RegistryLimits) throws(APIError) {
        try fields.refuseUnknownFields(Self.fieldNames)
        environment = try fields.optionalString("environment")
        control = ControlRegistration(
            kind: try fields.string("kind"),
            configuration: try fields.configuration("configuration")
        )
        if let problem = limits.problem(with: control) { throw APIError.invalidField(problem) }
        previousToken = try fields.optionalDeviceToken("previousToken")
    }
}
