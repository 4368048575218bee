public import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/devices/<token>/widgets/<id>/timeline`: the entry dates and the
/// reload policy the widget's timeline provider returned (`{"entries": [{"date", "relevance"?}],
/// "policy": "atEnd" | "never" | {"after": date}}`).
public struct TimelineBody: RegistryBody, Sendable {
    public var timeline: Timeline

    /// Parses and checks the body: at most `limits.timelineEntries` entries, every date from 1970 to 9999.
    public static func timeline(json data: Data, limits: RegistryLimits) throws(APIError) -> Timeline {
        try TimelineBody(json: data, limits: limits).timeline
    }

    public init(_ fields: BodyObject, limits: RegistryLimits) throws(APIError) {
        let items = try fields.array("entries")
        guard items.count <= limits.timelineEntries else {
            throw APIError.invalidField("a timeline has at most \(limits.timelineEntries) entries, not \(items.count)")
        }
        var dates: [Timestamp] = []
        dates.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            let entry = try BodyObject(item, item: index, of: fields.name("entries"))
            dates.append(try entry.date("date"))
            // WidgetKit's relevance score is a number; the gateway does not use it, but refuses what it is not.
            if !entry.isAbsent("relevance"), entry.number("relevance") == nil {
                throw FieldRule.mustBe("a number", entry.name("relevance"))
            }
        }
        let policy: Timeline.Policy
        switch fields.value("policy") {
        case .string("atEnd")?: policy = .atEnd
        case .string("never")?: policy = .never
        case .object(let after)? where after.count == 1 && after["after"] != nil:
            policy = .after(try FieldRule.date(after["after"], "\(fields.name("policy")).after"))
        default:
            throw APIError.invalidField(#"policy must be "atEnd", "never" or {"after": date}"#)
        }
        timeline = Timeline(entries: dates, policy: policy)
    }
}
