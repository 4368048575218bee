import Foundation
import ReloadGateKit
import Testing

/// From what WidgetKit hands the app to the registry's bodies, through stand-ins of `WidgetInfo` and
/// `ControlInfo`.
struct MappingTests {
    let mapping = RegistryMapping<StandInWidget, StandInControl>(
        widgetConfiguration: { widget in widget.team.map { ["team": .string($0)] } },
        controlConfiguration: { control in control.kind == "garage" ? ["door": .number(2)] : nil }
    )

    /// A widget's id is made of its kind, family and configuration: FNV-1a 64 of them, by hand for the
    /// empty ones (one zero byte between kind and family: 0xcbf29ce484222325 xor 0, times the prime).
    @Test func aWidgetsIdIsItsKindFamilyAndConfiguration() {
        #expect(WidgetIdentity.id(kind: "", family: "", configuration: nil) == "waf63bd4c8601b7df")
        let a = WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: ["team": .string("ARS"), "live": .bool(true)])
        // Key order does not matter; every part does.
        #expect(a == WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: ["live": .bool(true), "team": .string("ARS")]))
        #expect(a != WidgetIdentity.id(kind: "scores", family: "systemMedium", configuration: ["team": .string("ARS"), "live": .bool(true)]))
        #expect(a != WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: ["team": .string("ARS"), "live": .bool(false)]))
        #expect(a != WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: ["team": .string("CHE"), "live": .bool(true)]))
        // A number and a string that print alike are different values.
        #expect(
            WidgetIdentity.id(kind: "k", family: "systemSmall", configuration: ["n": .number(1)])
                != WidgetIdentity.id(kind: "k", family: "systemSmall", configuration: ["n": .string("1.0")])
        )
        #expect(a.count == 17 && a.hasPrefix("w"))
    }

    /// Every widget once, in WidgetKit's order, with the app's configuration; two alike are one; a family
    /// the gateway does not know is left out rather than failing the device.
    @Test func widgetsBecomeTheDevicesRegistration() throws {
        let device = mapping.device(widgets: [
            StandInWidget(kind: "scores", familyName: "systemSmall", team: "ARS"),
            StandInWidget(kind: "news", familyName: "WidgetFamily.accessoryRectangular"),
            StandInWidget(kind: "scores", familyName: "systemSmall", team: "ARS"),
            StandInWidget(kind: "scores", familyName: "systemHologram", team: "ARS"),
        ])
        #expect(device.widgets.map(\.kind) == ["scores", "news"])
        #expect(device.widgets.map(\.family) == ["systemSmall", "accessoryRectangular"])
        #expect(device.widgets[0].configuration == ["team": .string("ARS")])
        #expect(device.widgets[1].configuration == nil)
        #expect(device.widgets[0].id == WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: ["team": .string("ARS")]))
        #expect(
            try json(device)
                == #"{"widgets":[{"configuration":{"team":"ARS"},"family":"systemSmall","id":"\#(device.widgets[0].id)","kind":"scores"},"#
                + #"{"family":"accessoryRectangular","id":"\#(device.widgets[1].id)","kind":"news"}]}"#
        )
    }

    /// Each control with a token, by its token in hex; one without a token is not registered.
    @Test func controlsBecomeOneRegistrationEach() throws {
        let controls = mapping.controls([
            StandInControl(kind: "garage", pushTokenData: Data([0x00, 0xab, 0xff])),
            StandInControl(kind: "lights", pushTokenData: nil),
            StandInControl(kind: "lights", pushTokenData: Data()),
            StandInControl(kind: "fan", pushTokenData: Data([0x10])),
        ])
        #expect(controls.map(\.token) == ["00abff", "10"])
        #expect(try json(controls[0].registration) == #"{"configuration":{"door":2},"kind":"garage"}"#)
        #expect(try json(controls[1].registration) == #"{"kind":"fan"}"#)
    }

    /// A timeline's entries and policy as the gateway reads them; past the limit the earliest go, and an
    /// `.atEnd` policy becomes `.after` the last entry of the whole list (when WidgetKit would reload).
    @Test func aTimelineIsItsDatesAndItsPolicy() throws {
        let dates = [Date(timeIntervalSince1970: 1_800_000_120), Date(timeIntervalSince1970: 1_800_000_000), Date(timeIntervalSince1970: 1_800_000_060)]
        #expect(try json(TimelineReport(entryDates: dates, policy: .atEnd)) == #"{"entries":[{"date":1800000000},{"date":1800000060},{"date":1800000120}],"policy":"atEnd"}"#)
        #expect(try json(TimelineReport(entryDates: [], policy: .never)) == #"{"entries":[],"policy":"never"}"#)
        let cut = TimelineReport(entryDates: dates, policy: .atEnd, limit: 2)
        #expect(cut.entries == [dates[1], dates[2]])
        #expect(cut.policy == .after(dates[0]))
        #expect(TimelineReport(entryDates: dates, policy: .never, limit: 2).policy == .never)
        let after = TimelineReport(entryDates: [dates[1]], policy: .after(Date(timeIntervalSince1970: 1_800_001_800)))
        #expect(try json(after) == #"{"entries":[{"date":1800000000}],"policy":{"after":1800001800}}"#)
    }

    /// The bodies read back what the gateway documents (dates as text too), so the contract holds both ways.
    @Test func theBodiesReadWhatTheGatewayDocuments() throws {
        let timeline = try JSONDecoder().decode(
            TimelineReport.self, from: Data(#"{"entries":[{"date":"2027-01-15T08:00:00Z"},{"date":1800000000.5}],"policy":{"after":"2027-01-15T09:00:00.250Z"}}"#.utf8)
        )
        #expect(timeline.entries[0] == ISO8601DateFormatter().date(from: "2027-01-15T08:00:00Z"))
        #expect(timeline.entries[1].timeIntervalSince1970 == 1_800_000_000.5)
        #expect(timeline.policy == .after(ISO8601DateFormatter().date(from: "2027-01-15T09:00:00Z")!.addingTimeInterval(0.25)))
        let device = try JSONDecoder().decode(
            DeviceRegistration.self,
            from: Data(#"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall","configuration":{"team":"ARS","live":true,"n":2}}],"environment":"sandbox"}"#.utf8)
        )
        #expect(device.widgets[0].configuration == ["team": .string("ARS"), "live": .bool(true), "n": .number(2)])
        #expect(device.environment == "sandbox")
    }

    @Test func aTokenIsLowercaseHexTwoDigitsAByte() {
        #expect(Data([0x00, 0x0f, 0xa0, 0xff]).pushTokenHex == "000fa0ff")
        #expect(Data().pushTokenHex == "")
    }
}
