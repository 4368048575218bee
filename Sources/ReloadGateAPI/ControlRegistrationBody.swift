public import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/controls/<token>`: one control, as the widget extension's
/// `ControlPushHandler` hands it over in `pushTokensDidChange(controls:)` (a `ControlInfo` per control: its
/// kind and its own push token, the path's).
public struct ControlRegistrationBody: Sendable {
    /// `sandbox` or `production` when sent; the route checks it against the app's.
    public var environment: String?
    public var control: ControlRegistration
    /// The control's token this one replaces (retired: 410 from then on).
    public var previousToken: DeviceToken?

    /// The fields a body may have.
    public static let fieldNames: Set<String> = ["kind", "configuration", "environment", "previousToken"]

    /// Parses and checks the body against `limits`.
    public init(json data: Data, limits: RegistryLimits) throws(APIError) {
        let object = try JSONFields.object(data)
        if let unknown = object.keys.sorted().first(where: { !Self.fieldNames.contains($0) }) {
            throw .invalidField("unknown field '\(unknown)'; the fields are \(Self.fieldNames.sorted().joined(separator: ", "))")
        }
        environment = try JSONFields.optionalString(object["environment"], "environment")
        control = ControlRegistration(
            kind: try JSONFields.string(object["kind"], "kind"),
            configuration: try JSONFields.configuration(object["configuration"], "configuration")
        )
        if let problem = limits.problem(with: control) { throw .invalidField(problem) }
        if let text = try JSONFields.optionalString(object["previousToken"], "previousToken") {
            do {
                previousToken = try DeviceToken(text)
            } catch {
                throw .invalidField("previousToken: \(error)")
            }
        }
    }
}
