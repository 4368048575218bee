public import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/devices/<token>` (docs/DESIGN.md, Interfaces 2): the device's whole
/// widget set, as WidgetKit hands it over in `pushTokenDidChange(_:widgets:)`.
public struct DeviceRegistrationBody: RegistryBody, Sendable {
    /// `sandbox` or `production` when sent; the route checks it against the app's.
    public var environment: String?
    public var widgets: [WidgetRegistration]
    /// The token this one replaces (retired: 410 from then on).
    public var previousToken: DeviceToken?

    private enum Field: String, CodingKey { case environment, widgets, previousToken }
    private enum WidgetField: String, CodingKey { case id, kind, family, configuration, pushEnabled }

    public init(from decoder: any Decoder) throws {
        let limits = decoder.userInfo[.registryLimits] as? RegistryLimits ?? RegistryLimits()
        let fields = try decoder.container(keyedBy: Field.self)
        environment = try fields.optionalString(.environment)
        var list = try fields.array(.widgets)
        let count = list.count ?? 0
        guard count <= limits.widgetsPerDevice else {
            throw APIError.invalidField("a device has at most \(limits.widgetsPerDevice) widgets, not \(count)")
        }
        widgets = []
        widgets.reserveCapacity(count)
        while !list.isAtEnd {
            let index = list.currentIndex
            guard let item = try? list.nestedContainer(keyedBy: WidgetField.self) else { throw APIError.invalidField("widgets[\(index)] must be an object") }
            let familyText = try item.string(.family)
            guard let family = WidgetFamily(rawValue: familyText) else {
                throw APIError.invalidField("widgets[\(index)].family must be one of \(WidgetFamily.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            widgets.append(
                WidgetRegistration(
                    id: try item.string(.id),
                    kind: try item.string(.kind),
                    family: family,
                    configuration: try item.configuration(.configuration),
                    pushEnabled: try item.bool(.pushEnabled, default: true)
                )
            )
        }
        if let problem = limits.problem(with: widgets) { throw APIError.invalidField(problem) }
        previousToken = try fields.optionalDeviceToken(.previousToken)
    }
}

/// A registry API body: decoded with the registry's limits, which its decoder checks as it reads.
public protocol RegistryBody: Decodable {}

extension RegistryBody {
    /// Parses and checks the body against `limits`.
    public init(json data: Data, limits: RegistryLimits) throws(APIError) {
        self = try BodyJSON.decode(Self.self, from: data, userInfo: [.registryLimits: limits])
    }
}
