import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The admin socket's file: a stale one (left by a killed gateway) is removed before binding; a live one
/// (another gateway answers on it) is an error, not stolen.
public enum AdminSocket {
    /// Another process answers on the admin socket (`reloadgate serve` exits 1).
    public struct InUse: Error, CustomStringConvertible {
        public let path: String
        public var description: String {
            "another gateway answers on the admin socket \(path) (the same data directory?); stop it, or set admin.socket "
                + "(RELOADGATE_ADMIN_SOCKET)"
        }
    }

    /// The longest path a Unix socket can be bound to (`sun_path` less its terminating zero).
    static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Throws a configuration error when the OS cannot bind a socket at `path` (checked before anything
    /// starts, like the rest of the configuration).
    static func checkLength(of path: String) throws {
        let length = path.utf8.count
        guard length > maximumPathLength else { return }
        throw ConfigurationError.inconsistent(
            key: "admin.socket",
            reason: "the admin socket path \(path) is \(length) bytes long; a Unix socket path holds at most "
                + "\(maximumPathLength): set admin.socket (RELOADGATE_ADMIN_SOCKET) to a shorter path"
        )
    }

    /// Removes a stale socket file at `path`; throws ``InUse`` when something accepts connections there.
    static func removeStale(at path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        if isAccepting(path) { throw InUse(path: path) }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Restricts the socket to its owner (mode 0600).
    static func restrict(_ path: String) {
        _ = chmod(path, 0o600)
    }

    /// Whether a process accepts connections on the Unix socket at `path`.
    static func isAccepting(_ path: String) -> Bool {
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return result == 0
    }
}
