public import Foundation
public import ReloadGateCore

/// The body of `PUT /v1/apps/<bundle>/devices/<token>/widgets/<id>/timeline`: the entry dates and the
/// reload policy the widget's timeline provider returned (`{"entries": [{"date", "relevance"?}],
/// "policy": "atEnd" | "never" | {"after": date}}`).
public struct TimelineBody: Decodable, Sendable {
    public var timeline: Timeline

    /// Parses and checks the body: at most `limits.timelineEntries` entries, every date from 1970 to 9999.
    public static func timeline(json data: Data, limits: RegistryLimits) throws(APIError) -> Timeline {
        try BodyJSON.decode(Self.self, from: data, userInfo: [.registryLimits: limits]).timeline
    }

    private enum Field: String, CodingKey { case entries, policy }
    private enum EntryField: String, CodingKey { case date, relevance }

    public init(from decoder: any Decoder) throws {
        let limits = decoder.userInfo[.registryLimits] as? RegistryLimits ?? RegistryLimits()
        let fields = try decoder.container(keyedBy: Field.self)
        var entries = try fields.array(.entries)
        let count = entries.count ?? 0
        guard count <= limits.timelineEntries else {
            throw APIError.invalidField("a timeline has at most \(limits.timelineEntries) entries, not \(count)")
        }
        var dates: [Timestamp] = []
        dates.reserveCapacity(count)
        while !entries.isAtEnd {
            let path = "entries[\(entries.currentIndex)]"
            guard let entry = try? entries.nestedContainer(keyedBy: EntryField.self) else { throw APIError.invalidField("\(path) must be an object") }
            dates.append(try entry.date(.date))
            // WidgetKit's relevance score is a number; the gateway does not use it, but refuses what it is not.
            if !entry.isAbsent(.relevance), entry.number(.relevance) == nil {
                throw APIError.invalidField("\(path).relevance must be a number")
            }
        }
        let policy: Timeline.Policy
        switch try? fields.decode(String.self, forKey: .policy) {
        case "atEnd": policy = .atEnd
        case "never": policy = .never
        default:
            guard let after = try? fields.nestedContainer(keyedBy: AnyKey.self, forKey: .policy), after.allKeys.count == 1,
                after.contains(AnyKey("after"))
            else {
                throw APIError.invalidField(#"policy must be "atEnd", "never" or {"after": date}"#)
            }
            policy = .after(try after.date(AnyKey("after")))
        }
        timeline = Timeline(entries: dates, policy: policy)
    }
}
