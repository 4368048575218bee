import Foundation
public import ReloadGateCore

/// A push's body, checked: a JSON object of at most 4096 bytes (Apple's limit for widget, control and Live
/// Activity pushes). A widget's or control's `aps` has `"content-changed": true`, with ReloadGate's
/// optional `"reloadgate": {"kind", "match"}` targeting; a Live Activity's follows ``ActivityPayload``.
public struct PushPayload: Sendable {
    /// The largest body accepted (Apple's limit for these push types).
    public static let limit = 4096

    static let plain = Array(#"{"aps":{"content-changed":true}}"#.utf8)

    /// Only widgets of this kind; `nil`: every widget of the device.
    public var kind: String?
    /// Only widgets whose configuration has these values.
    public var match: [String: WidgetConfiguration.Value]
    /// A Live Activity push's event and timestamp (``ActivityPayload``).
    public var activity: ActivityContent?

    /// Checks a body that was read in full (at most ``limit`` bytes; a larger one never gets here) by its
    /// push type's rule.
    public init(_ body: some Collection<UInt8>, rule: PushTypeDescriptor.PayloadRule = .contentChanged) throws(APNsFailure) {
        guard !body.isEmpty else { throw APNsFailure(.payloadEmpty) }
        guard body.count <= Self.limit else { throw APNsFailure(.payloadTooLarge) }
        if case .liveActivity = rule {
            kind = nil
            match = [:]
            activity = try ActivityPayload.check(body)
            return
        }
        // The body nearly every widget push carries, byte for byte: no JSON parser needed. Compared as
        // contiguous bytes: this initializer is generic across modules, so a generic `elementsEqual`
        // here would run unspecialized, element by element through witness tables.
        let isPlain =
            body.count == Self.plain.count
            && (body.withContiguousStorageIfAvailable { $0.elementsEqual(Self.plain) } ?? body.elementsEqual(Self.plain))
        if isPlain {
            kind = nil
            match = [:]
            return
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            let aps = object["aps"] as? [String: Any],
            let changed = aps["content-changed"] as? NSNumber, Self.isBoolean(changed), changed.boolValue
        else { throw APNsFailure(.invalidPayload) }
        kind = nil
        match = [:]
        guard let extra = object["reloadgate"], !(extra is NSNull) else { return }
        guard let targeting = extra as? [String: Any] else { throw APNsFailure(.invalidPayload) }
        if let kind = targeting["kind"], !(kind is NSNull) {
            guard let text = kind as? String, !text.isEmpty else { throw APNsFailure(.invalidPayload) }
            self.kind = text
        }
        if let values = targeting["match"], !(values is NSNull) {
            guard let values = values as? [String: Any] else { throw APNsFailure(.invalidPayload) }
            for (key, value) in values {
                if let text = value as? String {
                    match[key] = .string(text)
                } else if let number = value as? NSNumber {
                    match[key] = Self.isBoolean(number) ? .bool(number.boolValue) : .number(number.doubleValue)
                } else {
                    throw APNsFailure(.invalidPayload)
                }
            }
        }
    }

    /// JSONSerialization gives booleans and numbers both as NSNumber; a boolean's type code is `c`.
    static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }
}
