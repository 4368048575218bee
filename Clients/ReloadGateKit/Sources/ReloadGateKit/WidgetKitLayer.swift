// The WidgetKit layer: compiled on Apple platforms only (not on Linux, where this package's tests run).
// It conforms WidgetKit's types to the protocols the mapping takes and hands what WidgetKit gives the app
// to the tested core (RegistryMapping, Reporter, TimelineReport); it holds no logic of its own.
#if canImport(WidgetKit)
import Foundation
import WidgetKit

@available(iOS 14.0, macOS 11.0, watchOS 9.0, visionOS 26.0, *)
extension WidgetInfo: WidgetDescribing {
    /// The family's case name (`systemSmall`); ``WidgetFamilyName/normalized(_:)`` checks it.
    public var familyName: String { String(describing: family) }
}

#if !os(visionOS)
@available(iOS 18.0, macOS 26.0, watchOS 26.0, *)
extension ControlInfo: ControlDescribing {
    public var pushTokenData: Data? { pushInfo?.token }
}
#endif

@available(iOS 14.0, macOS 11.0, watchOS 9.0, visionOS 26.0, *)
extension ReloadPolicy {
    /// WidgetKit's policy of the same meaning.
    public var timelineReloadPolicy: TimelineReloadPolicy {
        switch self {
        case .atEnd: .atEnd
        case .after(let date): .after(date)
        case .never: .never
        }
    }
}

@available(iOS 26.0, macOS 26.0, watchOS 26.0, visionOS 26.0, *)
extension Reporter {
    /// Call from `WidgetPushHandler.pushTokenDidChange(_:widgets:)`:
    /// `try await reporter.pushTokenDidChange(pushInfo, widgets: widgets) { ($0.widgetConfigurationIntent(of: ScoresIntent.self)).map(flat) }`.
    @discardableResult
    public func pushTokenDidChange(
        _ pushInfo: WidgetPushInfo, widgets: [WidgetInfo],
        configuration: @escaping @Sendable (WidgetInfo) -> [String: FlatValue]? = { _ in nil }
    ) async throws -> OfflineQueue.Outcome {
        let device = RegistryMapping<WidgetInfo, NoControl>(widgetConfiguration: configuration).device(widgets: widgets)
        return try await widgetsChanged(token: pushInfo.token, device: device)
    }
}

#if !os(visionOS)
@available(iOS 18.0, macOS 26.0, watchOS 26.0, *)
extension Reporter {
    /// Call from `ControlPushHandler.pushTokensDidChange(controls:)`.
    @discardableResult
    public func pushTokensDidChange(
        controls: [ControlInfo], configuration: @escaping @Sendable (ControlInfo) -> [String: FlatValue]? = { _ in nil }
    ) async throws -> OfflineQueue.Outcome {
        try await controlsChanged(RegistryMapping<NoWidget, ControlInfo>(controlConfiguration: configuration).controls(controls))
    }
}
#endif

@available(iOS 17.0, macOS 14.0, watchOS 10.0, visionOS 26.0, *)
extension Reporter {
    /// Call from a `TimelineProvider`'s `getTimeline` (or `AppIntentTimelineProvider.timeline(for:in:)`):
    /// makes the `Timeline` of `entries` and `policy` to return to WidgetKit, and reports it in a
    /// background `URLSession` (Apple's advice for widget extensions: the system sends it after the
    /// extension is gone). `session` is made once per process with ``BackgroundUpload/session(identifier:appGroup:)``.
    public func timeline<Entry: TimelineEntry>(
        _ entries: [Entry], policy: ReloadPolicy, kind: String, family: WidgetFamily, configuration: [String: FlatValue]?,
        in session: URLSession
    ) -> Timeline<Entry> {
        let report = TimelineReport(entryDates: entries.map(\.date), policy: policy)
        if let call = try? timelineCall(kind: kind, family: String(describing: family), configuration: configuration, report: report) {
            try? BackgroundUpload.start(client.request(call), body: call.body ?? Data(), in: session, directory: uploads)
        }
        return Timeline(entries: entries, policy: policy.timelineReloadPolicy)
    }
}

/// A widget type for a mapping of controls only.
public struct NoWidget: WidgetDescribing {
    public var kind: String { "" }
    public var familyName: String { "" }
}

/// A control type for a mapping of widgets only.
public struct NoControl: ControlDescribing {
    public var kind: String { "" }
    public var pushTokenData: Data? { nil }
}
#endif
