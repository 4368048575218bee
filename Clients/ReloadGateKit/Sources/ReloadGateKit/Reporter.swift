import Foundation

/// What an app's push handlers and timeline providers call: each report goes into the offline queue, then
/// everything queued is sent in order. It remembers the device's widget push token (in `directory`, an
/// app group container the app and its widget extension share), so that a timeline provider, which
/// WidgetKit does not tell the token, reports under it, and a new token names the one it replaces.
public final class Reporter: Sendable {
    public let client: ReloadGateClient
    public let queue: OfflineQueue
    /// Where background uploads keep their bodies (Apple platforms).
    public let uploads: URL
    private let tokenFile: URL

    public init(client: ReloadGateClient, directory: URL) throws {
        self.client = client
        queue = try OfflineQueue(directory: directory.appendingPathComponent("queue"))
        uploads = directory.appendingPathComponent("uploads")
        tokenFile = directory.appendingPathComponent("widget-push-token")
    }

    /// The device's widget push token (hex) as the last push handler call reported it; `nil` before.
    public var deviceToken: String? {
        (try? String(contentsOf: tokenFile, encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A widget push handler's report: the device and its widgets (``RegistryMapping/device(widgets:)``)
    /// under `token`, naming the token it replaces if it changed.
    @discardableResult
    public func widgetsChanged(token: Data, device: DeviceRegistration) async throws -> OfflineQueue.Outcome {
        let hex = token.pushTokenHex
        var device = device
        if let previous = deviceToken, previous != hex { device.previousToken = previous }
        try await queue.enqueue([client.call(registering: device, token: hex)])
        try Data(hex.utf8).write(to: tokenFile, options: .atomic)
        return try await queue.flush(client)
    }

    /// A control push handler's report: every control with its token (``RegistryMapping/controls(_:)``).
    @discardableResult
    public func controlsChanged(_ controls: [(token: String, registration: ControlRegistration)]) async throws -> OfflineQueue.Outcome {
        try await queue.enqueue(controls.map { try client.call(registering: $0.registration, token: $0.token) })
        return try await queue.flush(client)
    }

    /// The call of a timeline provider's report for the widget of `kind`, `family` and `configuration`
    /// (the same id the push handler registered it under), or `nil` before the device has a token (or for a family the gateway does not know).
    public func timelineCall(kind: String, family: String, configuration: [String: FlatValue]?, report: TimelineReport) throws -> RegistryCall? {
        guard let token = deviceToken, let family = WidgetFamilyName.normalized(family) else { return nil }
        let widget = WidgetIdentity.id(kind: kind, family: family, configuration: configuration)
        return try client.call(reporting: report, token: token, widget: widget)
    }

    /// A timeline provider's report, through the queue (on Apple platforms the WidgetKit layer sends it in
    /// a background session instead). Nothing is sent before the device has a token.
    @discardableResult
    public func timeline(kind: String, family: String, configuration: [String: FlatValue]?, report: TimelineReport) async throws -> OfflineQueue.Outcome? {
        guard let call = try timelineCall(kind: kind, family: family, configuration: configuration, report: report) else { return nil }
        try await queue.enqueue([call])
        return try await queue.flush(client)
    }

    /// Sends what is queued (call it when the app becomes active or the network comes back).
    @discardableResult
    public func flush() async throws -> OfflineQueue.Outcome {
        try await queue.flush(client)
    }
}
