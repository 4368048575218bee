import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes files atomically with their final permissions from the first byte.
///
/// Private keys must never exist, even for a moment, with a mode wider than 0600, so the file is created
/// with `open(2)` and that mode, written, synced and renamed into place. A text file ends with a newline
/// (PEM files are joined with `cat cert.pem key.pem`, which needs one between them).
enum SecureFile {
    struct WriteError: Error, CustomStringConvertible {
        let path: String
        let errno: Int32
        var description: String { "cannot write \(path): \(String(cString: strerror(errno)))" }
    }

    static func replace(_ path: String, with text: String, mode: mode_t) throws {
        let temporary = "\(path).tmp-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw WriteError(path: path, errno: errno) }
        var failure: Int32?
        let bytes = Array(text.utf8) + (text.hasSuffix("\n") ? [] : [UInt8(ascii: "\n")])
        var written = 0
        while written < bytes.count {
            let result = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if result < 0 {
                if errno == EINTR { continue }
                failure = errno
                break
            }
            written += result
        }
        if failure == nil, fchmod(descriptor, mode) != 0 || fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        if failure == nil, rename(temporary, path) != 0 { failure = errno }
        if let failure {
            unlink(temporary)
            throw WriteError(path: path, errno: failure)
        }
    }
}
