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

    public init(_ body: BodyObject, limits: RegistryLimits) throws(APIError) {
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

/// A registry API body: its checks, against the registry's limits, over its object as parsed
/// (``BodyObject``). The routes read it straight from the parser (``init(json:limits:)``); its
/// `init(from:)` decodes the body's `JSONValue` and applies the same checks, with the limits from the
/// decoder's `userInfo` (the tests read the bodies with Foundation's `JSONDecoder` too).
public protocol RegistryBody: Decodable {
    /// Checks the body's object against `limits`.
    init(_ body: BodyObject, limits: RegistryLimits) throws(APIError)
}

extension RegistryBody {
    /// Parses and checks the body against `limits`.
    public init(json data: Data, limits: RegistryLimits) throws(APIError) {
        try self.init(BodyObject(body: BodyJSON.parse(data)), limits: limits)
    }

    /// Reads the body through a `Decoder` (the tests' `JSONDecoder` too): its `JSONValue`, checked against
    /// the limits in the decoder's `userInfo`. (No registry body's fields are `Decodable`, so this is the
    /// conformance, never a synthesized one.)
    public init(from decoder: any Decoder) throws {
        let limits = decoder.userInfo[.registryLimits] as? RegistryLimits ?? RegistryLimits()
        try self.init(BodyObject(body: decoder.singleValueContainer().decode(JSONValue.self)), limits: limits)
    }
}
