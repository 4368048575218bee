import Foundation
import Hummingbird
import NIOCore
import ReloadGateAPI

/// Reads a request body within a size limit; a larger body is refused while reading, not after.
enum JSONBody {
    /// The body's bytes (at most `limit`).
    static func bytes(_ request: Request, limit: Int) async throws -> Data {
        do {
            return Data(try await request.body.collect(upTo: limit).readableBytesView)
        } catch is NIOTooManyBytesError {
            throw APIError.tooLarge(limit)
        }
    }

    /// The body as `Body` (at most `limit` bytes), refused as ``BodyJSON/decode(_:from:)`` says.
    // Not inlined: Swift 6.3.1's optimizer crashed (signal 11, splitting the coroutine of the admin API's
    // flush route) with this inlined into the routes, in release builds.
    @inline(never)
    static func decode<Body: Decodable>(_ type: Body.Type, _ request: Request, limit: Int) async throws -> Body {
        try BodyJSON.decode(type, from: try await bytes(request, limit: limit))
    }
}
