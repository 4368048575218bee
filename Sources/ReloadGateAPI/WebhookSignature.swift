import Crypto
public import Foundation
import ReloadGateCore

/// The reload webhook's signature (docs/DESIGN.md, Interfaces 3): the header
/// `reloadgate-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, checked against the
/// app's webhook secret and refused outside a 5-minute window around the gateway's clock.
///
/// Several `v1=` values may be sent (while a secret is being rotated); one matching is enough. The
/// comparison is constant-time. `t` is any decimal `Int64` (a longer or non-numeric value is malformed);
/// the window is checked without arithmetic that can overflow, so `t=-9223372036854775808` is stale, not
/// a trap.
public struct WebhookSignature: Sendable, Equatable {
    /// The signed time, UNIX seconds.
    public var timestamp: Int64
    /// The candidate signatures (32 bytes each).
    public var signatures: [Data]

    /// How far the signed time may be from the gateway's clock.
    public static let window: TimeInterval = 300

    /// Why a signature was refused; each maps to `401` with this description.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case missing
        case malformed
        case outsideWindow(signedAt: Int64, now: Int64)
        case mismatch

        public var description: String {
            switch self {
            case .missing: "the reloadgate-signature header is missing"
            case .malformed: "the reloadgate-signature header must read t=<unix seconds>,v1=<hex HMAC-SHA256>"
            case .outsideWindow(let signedAt, let now):
                "the signature's time \(signedAt) is more than 300 s from the gateway's \(now); check the clock or sign anew"
            case .mismatch: "the signature does not match the body and the app's webhook secret"
            }
        }
    }

    /// An app's webhook secret keyed for HMAC-SHA256 once (the key's pads hashed), copied for each message:
    /// the one place the signed message (`<t>.<body>`) is made, for checking and for signing. The gateway
    /// keeps it beside the app so that a call does not key the HMAC again.
    public struct Key: Sendable {
        let keyed: HMAC<SHA256>

        public init(secret: String) {
            keyed = HMAC<SHA256>(key: SymmetricKey(data: Data(secret.utf8)))
        }

        /// The HMAC of `<timestamp>.<body>`, without copying the body into one message.
        func code(timestamp: Int64, body: some DataProtocol) -> HMAC<SHA256>.MAC {
            var mac = keyed
            var prefix = String(timestamp)
            prefix.append(".")
            prefix.withUTF8 { mac.update(data: UnsafeRawBufferPointer($0)) }
            mac.update(data: body)
            return mac.finalize()
        }
    }

    /// Parses the header value.
    public init(header: String?) throws(Failure) {
        guard var header, !header.isEmpty else { throw .missing }
        // Scanned as bytes in place: this runs on every webhook call.
        guard let parsed = header.withUTF8({ Self.parse($0) }) else { throw .malformed }
        self.timestamp = parsed.timestamp
        self.signatures = parsed.signatures
    }

    /// `t=` and the `v1=` values of a header, or nil when it is malformed.
    private static func parse(_ header: UnsafeBufferPointer<UInt8>) -> (timestamp: Int64, signatures: [Data])? {
        var timestamp: Int64?
        var signatures: [Data] = []
        for part in header.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
            guard let equals = part.firstIndex(of: UInt8(ascii: "=")) else { return nil }
            let name = HeaderValue.trimmed(part[..<equals])
            let value = HeaderValue.trimmed(part[part.index(after: equals)...])
            if name.elementsEqual("t".utf8) {
                guard timestamp == nil, let parsed = Int64(String(decoding: value, as: UTF8.self)) else { return nil }
                timestamp = parsed
            } else if name.elementsEqual("v1".utf8) {
                guard value.count == 64, let bytes = hexBytes(value) else { return nil }
                signatures.append(bytes)
            }
            // Unknown schemes are ignored, so a later scheme can be added beside v1.
        }
        guard let timestamp, !signatures.isEmpty else { return nil }
        return (timestamp, signatures)
    }

    /// Checks the signature of `body` with `secret` at `now`: the time first (cheap), then the HMAC.
    public func verify(body: some DataProtocol, secret: String, now: Date) throws(Failure) {
        try verify(body: body, key: Key(secret: secret), now: now)
    }

    /// Checks the signature of `body` with an app's keyed secret at `now`: the time first (cheap), then the
    /// HMAC, computed once and compared with each candidate in constant time.
    public func verify(body: some DataProtocol, key: Key, now: Date) throws(Failure) {
        let nowSeconds = Timestamp(clampingUnixSeconds: now.timeIntervalSince1970).milliseconds / 1000
        guard Self.isWithinWindow(timestamp, of: nowSeconds) else {
            throw .outsideWindow(signedAt: timestamp, now: nowSeconds)
        }
        let code = key.code(timestamp: timestamp, body: body)
        guard signatures.contains(where: { code == $0 }) else { throw .mismatch }
    }

    /// Whether `signed` is at most ``window`` seconds from `now`, for any two `Int64`s.
    static func isWithinWindow(_ signed: Int64, of now: Int64) -> Bool {
        let (difference, overflow) = now.subtractingReportingOverflow(signed)
        return !overflow && difference.magnitude <= UInt64(window)
    }

    /// The header value for `body` signed at `timestamp` (for clients and tests).
    public static func header(body: some DataProtocol, timestamp: Int64, secret: String) -> String {
        let signature = sign(body: body, timestamp: timestamp, secret: secret)
        return "t=\(timestamp),v1=" + signature.map { String(format: "%02x", $0) }.joined()
    }

    static func sign(body: some DataProtocol, timestamp: Int64, secret: String) -> Data {
        Data(Key(secret: secret).code(timestamp: timestamp, body: body))
    }

    /// Hexadecimal digits as bytes (both cases), or nil for an odd count or another character.
    static func hexBytes<Digits: Collection<UInt8>>(_ text: Digits) -> Data? {
        guard text.count % 2 == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: text.count / 2)
        var index = text.startIndex
        for position in bytes.indices {
            let high = text[index]
            index = text.index(after: index)
            let low = text[index]
            index = text.index(after: index)
            guard let h = nibble(high), let l = nibble(low) else { return nil }
            bytes[position] = h << 4 | l
        }
        return Data(bytes)
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
