public import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/devices/<token>/widgets/<id>/timeline`: the entry dates and the
/// reload policy the widget's timeline provider returned (`{"entries": [{"date", "relevance"?}],
/// "policy": "atEnd" | "never" | {"after": date}}`).
public enum TimelineBody {
    /// Parses and checks the body: at most `limits.timelineEntries` entries, every date from 1970 to 9999.
    public static func timeline(json data: Data, limits: RegistryLimits) throws(APIError) -> Timeline {
        let object = try JSONFields.object(data)
        let entries = try JSONFields.array(object["entries"], "entries")
        guard entries.count <= limits.timelineEntries else {
            throw .invalidField("a timeline has at most \(limits.timelineEntries) entries, not \(entries.count)")
        }
        var dates: [Timestamp] = []
        dates.reserveCapacity(entries.count)
        for (index, entry) in entries.enumerated() {
            dates.append(try JSONFields.date(JSONFields.object(entry, "entries[\(index)]")["date"], "entries[\(index)].date"))
        }
        let policy: Timeline.Policy
        switch object["policy"] {
        case let text as String where text == "atEnd": policy = .atEnd
        case let text as String where text == "never": policy = .never
        case let after as [String: Any] where after.count == 1 && after["after"] != nil:
            policy = .after(try JSONFields.date(after["after"], "policy.after"))
        default:
            throw .invalidField(#"policy must be "atEnd", "never" or {"after": date}"#)
        }
        return Timeline(entries: dates, policy: policy)
    }
}
