import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// What both of the API listener's frame-level handlers (``APIHTTP1Handler``, ``APIHTTP2Handler``) do
/// with a whole request: call the router, gather its answer, and give the answer the fields every answer
/// carries.
enum RouteAnswer {
    /// The router's answer as a head and a whole body. An error the router lets through is answered as
    /// Hummingbird's server answers it.
    static func answer(
        _ request: Request,
        responder: PathResponder<GatewayRequestContext>,
        channel: any Channel,
        logger: Logger
    ) async -> (head: HTTPResponse, body: ByteBuffer) {
        let context = GatewayRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger))
        var response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch let error as any HTTPResponseError {
            response = (try? error.response(from: request, context: context)) ?? Response(status: .internalServerError)
        } catch {
            response = Response(status: .internalServerError)
        }
        let collected = CollectedBody()
        do {
            try await response.body.write(CollectingBodyWriter(collected: collected))
        } catch {
            logger.debug("a response body could not be written", metadata: ["error": "\(error)"])
        }
        return (response.head, collected.buffer)
    }

    /// Whether an answer with this status carries a `content-length` (RFC 9110 8.6: not a 204 or a 304).
    private static func hasContentLength(_ status: HTTPResponse.Status) -> Bool {
        status.code != 204 && status.code != 304
    }

    /// The fields an answer is written with, each handed to `add`: the route's own but `connection` and
    /// `transfer-encoding` (the listener's to set, and not HTTP/2's at all), then `content-length` (of
    /// `bodyBytes`) and `date` (read only then) where the route gave none. One pass over the route's fields,
    /// noting those two as it goes (a look-up by name is a scan of its own).
    static func fields(
        of head: HTTPResponse, bodyBytes: Int, date: @autoclosure () -> String, _ add: (_ name: String, _ value: String) -> Void
    ) {
        var hasLength = false, hasDate = false
        for field in head.headerFields {
            switch field.name {
            case .connection, .transferEncoding: continue
            case .contentLength: hasLength = true
            case .date: hasDate = true
            default: break
            }
            add(field.name.canonicalName, field.value)
        }
        if !hasLength, hasContentLength(head.status) { add("content-length", String(bodyBytes)) }
        if !hasDate { add("date", date()) }
    }
}

/// The `date` field of every answer (RFC 9110 6.6.1: an origin server with a clock sends it), made once a
/// second and shared by the listener's loops.
enum HTTPDateField {
    private static let cached = Mutex<(second: Int, text: String)>((-1, ""))

    /// Now, as an IMF-fixdate (`Wed, 02 Dec 2026 19:30:00 GMT`).
    static var now: String {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let second = time.tv_sec
        return cached.withLock { cache in
            if cache.second != second { cache = (second, format(second)) }
            return cache.text
        }
    }

    /// `second` (since 1970, UTC) as an IMF-fixdate.
    static func format(_ second: Int) -> String {
        var seconds = time_t(second)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}

/// A response body, gathered whole (the API's answers are small: the largest is the OpenAPI document).
final class CollectedBody: @unchecked Sendable {
    var buffer = ByteBuffer()
}

struct CollectingBodyWriter: ResponseBodyWriter {
    let collected: CollectedBody

    mutating func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        collected.buffer.writeBuffer(&buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
