public import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/devices/<token>` (docs/DESIGN.md, Interfaces 2): the device's whole
/// widget set, as WidgetKit hands it over in `pushTokenDidChange(_:widgets:)`.
public struct DeviceRegistrationBody: Sendable {
    /// `sandbox` or `production` when sent; the route checks it against the app's.
    public var environment: String?
    public var widgets: [WidgetRegistration]
    /// The token this one replaces (retired: 410 from then on).
    public var previousToken: DeviceToken?

    /// Parses and checks the body against `limits`.
    public init(json data: Data, limits: RegistryLimits) throws(APIError) {
        let object = try JSONFields.object(data)
        environment = try JSONFields.optionalString(object["environment"], "environment")
        let list = try JSONFields.array(object["widgets"], "widgets")
        guard list.count <= limits.widgetsPerDevice else {
            throw .invalidField("a device has at most \(limits.widgetsPerDevice) widgets, not \(list.count)")
        }
        widgets = []
        for (index, item) in list.enumerated() {
            let path = "widgets[\(index)]"
            let fields = try JSONFields.object(item, path)
            let familyText = try JSONFields.string(fields["family"], "\(path).family")
            guard let family = WidgetFamily(rawValue: familyText) else {
                throw .invalidField("\(path).family must be one of \(WidgetFamily.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            widgets.append(
                WidgetRegistration(
                    id: try JSONFields.string(fields["id"], "\(path).id"),
                    kind: try JSONFields.string(fields["kind"], "\(path).kind"),
                    family: family,
                    configuration: try JSONFields.configuration(fields["configuration"], "\(path).configuration"),
                    pushEnabled: try JSONFields.bool(fields["pushEnabled"], "\(path).pushEnabled", default: true)
                )
            )
        }
        if let problem = limits.problem(with: widgets) { throw .invalidField(problem) }
        if let text = try JSONFields.optionalString(object["previousToken"], "previousToken") {
            do {
                previousToken = try DeviceToken(text)
            } catch {
                throw .invalidField("previousToken: \(error)")
            }
        }
    }
}
