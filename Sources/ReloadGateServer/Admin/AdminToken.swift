import Crypto
import Foundation
import Hummingbird

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bearer token of the admin API's TLS listener (`admin.tls`): read from `admin.tokenFile`, or made
/// on first start (`rga_` and 256 random bits, mode 0600) so that it never sits in a configuration file.
enum AdminToken {
    struct Unusable: Error, CustomStringConvertible {
        let path: String
        let reason: String
        var description: String { "the admin token file \(path) cannot be used: \(reason)" }
    }

    /// The token in `path`, created first when the file does not exist.
    static func loadOrCreate(at path: String) throws -> String {
        if !FileManager.default.fileExists(atPath: path) {
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let token = "rga_" + Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            if descriptor >= 0 {
                let line = Array((token + "\n").utf8)
                let written = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                _ = fsync(descriptor)
                close(descriptor)
                guard written == line.count else { throw Unusable(path: path, reason: "short write") }
            } else if errno != EEXIST {
                throw Unusable(path: path, reason: String(cString: strerror(errno)))
            }
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw Unusable(path: path, reason: "not readable")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count >= 16 else { throw Unusable(path: path, reason: "the token is shorter than 16 characters") }
        return token
    }
}

/// Lets through only requests with `authorization: bearer <admin token>` (compared in constant time).
struct AdminTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let tokenHash: SHA256.Digest

    init(token: String) {
        tokenHash = SHA256.hash(data: Data(token.utf8))
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
            SHA256.hash(data: Data(header.dropFirst(7).utf8)) == tokenHash
        else {
            throw APIError.unauthorized("the admin API needs authorization: bearer <the token in admin.tokenFile>")
        }
        return try await next(request, context)
    }
}
