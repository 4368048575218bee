import Foundation

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
