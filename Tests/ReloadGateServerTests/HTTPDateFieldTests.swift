import Foundation
import Testing

@testable import ReloadGateServer

/// The answers' `date` (``HTTPDateField``) is RFC 9110's IMF-fixdate, as Foundation's formatter with that
/// pattern writes it, at instants that test each field's width and the calendar's edges.
struct HTTPDateFieldTests {
    @Test(arguments: [0, 951_782_400, 1_796_240_000, 1_798_761_599, 4_102_444_800])
    func theDateIsAnIMFFixdate(_ second: Int) {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(HTTPDateField.format(second) == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(second))))
    }

    @Test func theFirstInstantIsWrittenInFull() {
        #expect(HTTPDateField.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }
}
