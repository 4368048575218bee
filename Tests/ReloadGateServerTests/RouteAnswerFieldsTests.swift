import HTTPTypes
import Testing

@testable import ReloadGateServer

/// The fields both API handlers write an answer with (``RouteAnswer/fields(of:bodyBytes:_:)``): the route's
/// own but the connection's, and `content-length` and `date` only where the route gave none.
struct RouteAnswerFieldsTests {
    func written(_ head: HTTPResponse, bodyBytes: Int = 5) -> [(String, String)] {
        var fields: [(String, String)] = []
        RouteAnswer.fields(of: head, bodyBytes: bodyBytes, date: HTTPDateField.format(1_796_000_000)) { fields.append(($0, $1)) }
        return fields
    }

    @Test func theRoutesFieldsGoAsTheyAreAndTheMissingOnesAreAdded() {
        let fields = written(HTTPResponse(status: .ok, headerFields: [.contentType: "application/json", .connection: "close", .transferEncoding: "chunked"]))
        #expect(fields.map(\.0) == ["content-type", "content-length", "date"])
        #expect(fields[0].1 == "application/json")
        #expect(fields[1].1 == "5")
        #expect(fields[2].1 == "Mon, 30 Nov 2026 00:53:20 GMT")
    }

    @Test func aRoutesOwnLengthAndDateAreNotWrittenTwice() {
        let fields = written(HTTPResponse(status: .ok, headerFields: [.date: "Thu, 01 Jan 1970 00:00:00 GMT", .contentLength: "0"]))
        #expect(fields.map(\.0) == ["date", "content-length"])
        #expect(fields.map(\.1) == ["Thu, 01 Jan 1970 00:00:00 GMT", "0"])
    }

    @Test(arguments: [204, 304]) func anAnswerWithoutContentHasNoLength(status: Int) {
        #expect(written(HTTPResponse(status: .init(code: status)), bodyBytes: 0).map(\.0) == ["date"])
    }
}
