import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/activities/<token>`: a Live Activity's update token (from
/// `activity.pushTokenUpdates`) or a push-to-start token (from `Activity<Attributes>.pushToStartTokenUpdates`),
/// with its attributes type and whether the app asked for frequent updates.
public struct ActivityRegistrationBody: RegistryBody, Sendable {
    /// `sandbox` or `production` when sent; the route checks it against the app's.
    public var environment: String?
    public var activity: ActivityRegistration
    /// The activity's token this one replaces (ActivityKit may hand a new one during an activity).
    public var previousToken: DeviceToken?

    /// The fields a body may have.
    public static let fieldNames: Set<String> = ["attributesType", "attributes", "frequentUpdates", "pushToStart", "environment", "previousToken"]

    public init(_ fields: BodyObject, limits: RegistryLimits) throws(APIError) {
        try fields.refuseUnknownFields(Self.fieldNames)
        environment = try fields.optionalString("environment")
        activity = ActivityRegistration(
            attributesType: try fields.string("attributesType"),
            attributes: try fields.configuration("attributes"),
            frequentUpdates: try fields.bool("frequentUpdates", default: false),
            pushToStart: try fields.bool("pushToStart", default: false)
        )
        if let problem = limits.problem(with: activity) { throw APIError.invalidField(problem) }
        previousToken = try fields.optionalDeviceToken("previousToken")
    }
}
