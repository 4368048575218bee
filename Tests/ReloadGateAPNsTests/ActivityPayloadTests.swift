import Foundation
import ReloadGateAPNs
import ReloadGateCore
import Testing

/// A Live Activity's body by Apple's rules, and the merge a delivery makes of several.
struct ActivityPayloadTests {
    static func body(_ aps: String, extra: String = "") -> [UInt8] { Array(#"{"aps":{\#(aps)}\#(extra)}"#.utf8) }

    @Test(arguments: [
        (#""event":"update","timestamp":1685952000,"content-state":{"a":1},"stale-date":1685955600,"relevance-score":0.5,"alert":"Hi""#, ActivityContent.Event.update, true),
        (#""event":"end","timestamp":0,"dismissal-date":253402300799"#, .end, false),
        (#""event":"start","timestamp":1705560370,"attributes-type":"A","attributes":{},"input-push-token":1"#, .start, false),
    ])
    func applesShapesAreAccepted(_ aps: String, _ event: ActivityContent.Event, _ alert: Bool) throws {
        let content = try ActivityPayload.check(Self.body(aps))
        #expect(content.event == event)
        #expect(content.hasAlert == alert)
    }

    @Test(arguments: [
        (#""event":"update""#, "aps.timestamp"),
        (#""event":"update","timestamp":"1685952000""#, "aps.timestamp"),
        (#""event":"update","timestamp":1.5"#, "aps.timestamp"),
        (#""event":"update","timestamp":253402300800"#, "aps.timestamp"),
        (#""event":"update","timestamp":true"#, "aps.timestamp"),
        (#""event":"pause","timestamp":1"#, "aps.event"),
        (#""timestamp":1"#, "aps.event"),
        (#""event":"update","timestamp":1,"content-state":[1]"#, "content-state"),
        (#""event":"update","timestamp":1,"dismissal-date":-1"#, "dismissal-date"),
        (#""event":"update","timestamp":1,"relevance-score":"high""#, "relevance-score"),
        (#""event":"update","timestamp":1,"alert":7"#, "alert"),
        (#""event":"start","timestamp":1,"attributes":{}"#, "attributes-type"),
        (#""event":"start","timestamp":1,"attributes-type":"A""#, "attributes-type"),
    ])
    func whatAppleRefusesIsRefusedSayingWhat(_ aps: String, _ names: String) {
        do {
            _ = try ActivityPayload.check(Self.body(aps))
            Issue.record("accepted: \(aps)")
        } catch {
            #expect(error.reason == .invalidPayload)
            #expect(error.detail?.contains(names) == true, "\(error.detail ?? "")")
        }
    }

    /// The newest content (at one timestamp, the later request), the newest alert of any of them, an end's
    /// event and dismissal date; a webhook's `payload` counts as its push.
    @Test func theMergeTakesTheNewestContentTheNewestAlertAndAnEnd() throws {
        let requests: [(request: RequestID, body: String)] = [
            (1, #"{"aps":{"event":"update","timestamp":10,"content-state":{"n":1},"alert":"first"}}"#),
            (2, #"{"aps":{"event":"update","timestamp":12,"content-state":{"n":2}},"custom":true}"#),
            (3, #"{"pushType":"liveactivity","payload":{"aps":{"event":"end","timestamp":11,"dismissal-date":99,"alert":"late"}}}"#),
            (4, #"{"aps":{"event":"update","timestamp":12,"content-state":{"n":4}}}"#),
            (5, #"{"aps":{"content-changed":true}}"#),
        ]
        let merged = try #require(ActivityPayload.merged(requests))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(merged)) as? [String: Any])
        let aps = try #require(object["aps"] as? [String: Any])
        #expect((aps["content-state"] as? [String: Any])?["n"] as? Int == 4)
        #expect(aps["alert"] as? String == "late")
        #expect(aps["event"] as? String == "end")
        #expect(aps["dismissal-date"] as? Int == 99)
        #expect(object["pushType"] == nil)
        let winners = try #require(ActivityPayload.winners(requests))
        #expect(winners.content.stamp == ContentStamp(timestamp: 12, request: 4))
        #expect(winners.alert?.stamp == ContentStamp(timestamp: 11, request: 3))
        #expect(winners.merged == 4)
        #expect(ActivityPayload.merged([(5, #"{"aps":{"content-changed":true}}"#)]) == nil)
    }

    /// Another request's alert that would make the body larger than Apple's limit is left out.
    @Test func anAlertThatWouldMakeTheBodyTooLargeIsLeftOut() throws {
        let state = String(repeating: "s", count: 3000)
        let alert = String(repeating: "a", count: 2000)
        let merged = try #require(ActivityPayload.merged([
            (1, #"{"aps":{"event":"update","timestamp":1,"alert":"\#(alert)"}}"#),
            (2, #"{"aps":{"event":"update","timestamp":2,"content-state":{"s":"\#(state)"}}}"#),
        ]))
        #expect(merged.count <= PushPayload.limit)
        let aps = try #require((try JSONSerialization.jsonObject(with: Data(merged)) as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["alert"] == nil)
        #expect(((aps["content-state"] as? [String: Any])?["s"] as? String)?.count == 3000)
    }
}
