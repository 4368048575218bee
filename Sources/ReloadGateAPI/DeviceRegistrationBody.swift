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

    /// Reads the body through a `Decoder` (the tests' `JSONDecoder` too), with the registry's limits from
    /// its `userInfo`: the same checks as ``init(json:limits:)``.
    public init(from decoder: any Decoder) throws {
        let limits = decoder.userInfo[.registryLimits] as? RegistryLimits ?? RegistryLimits()
        try self.init(BodyObject(body: decoder.singleValueContainer().decode(JSONValue.self)), limits: limits)
    }

    /// Parses and checks the body against `limits` (what the route calls).
    public init(json data: Data, limits: RegistryLimits) throws(APIError) {
        try self.init(BodyObject(body: BodyJSON.parse(data)), limits: limits)
    }

    /// The body's checks, over its object as parsed.
    init(_ body: BodyObject, limits: RegistryLimits) throws(APIError) {
        environment = try body.optionalString("environment")
        let items = try body.array("widgets")
        guard items.count <= limits.widgetsPerDevice else {
            throw APIError.invalidField("a device has at most \(limits.widgetsPerDevice) widgets, not \(items.count)")
        }
        widgets = []
        widgets.reserveCapacity(items.count)
        for (index, value) in items.enumerated() {
            let item = try BodyObject(value, item: index, of: body.name("widgets"))
            let familyText = try item.string("family")
            guard let family = WidgetFamily(rawValue: familyText) else {
                throw APIError.invalidField("\(item.name("family")) must be one of \(WidgetFamily.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            widgets.append(
                WidgetRegistration(
                    id: try item.string("id"),
                    kind: try item.string("kind"),
                    family: family,
                    configuration: try item.configuration("configuration"),
                    pushEnabled: try item.bool("pushEnabled", default: true)
                )
            )
        }
        if let problem = limits.problem(with: widgets) { throw APIError.invalidField(problem) }
        previousToken = try body.optionalDeviceToken("previousToken")
    }
}

/// A registry API body: decoded with the registry's limits, which its decoder checks as it reads.
public protocol RegistryBody: Decodable {
    /// Parses and checks the body against `limits`.
    init(json data: Data, limits: RegistryLimits) throws(APIError)
}

extension RegistryBody {
    /// Parses and checks the body against `limits`.
    public init(json data: Data, limits: RegistryLimits) throws(APIError) {
        self = try BodyJSON.decode(Self.self, from: data, userInfo: [.registryLimits: limits])
    }
}
