import NIOCore
public import NIOSSL
import NIOHPACK

/// An HTTP/2 peer that writes frames byte by byte, for what no well-behaved client library sends: a
/// thousand streams opened and reset at once, CONTINUATION frames that never end, a header block that
/// references one large table entry thousands of times, more streams than the server allows, a zero window.
/// It reads the server's frames back (header blocks decoded with NIOHPACK) to say how the server answered.
public final class RawHTTP2Peer: Sendable {
    /// One frame, as on the wire (RFC 9113, section 4.1).
    public struct Frame: Sendable {
        public var type: FrameType
        public var flags: UInt8
        public var stream: UInt32
        public var payload: [UInt8]

        public init(_ type: FrameType, flags: UInt8 = 0, stream: UInt32, payload: [UInt8] = []) {
            self.type = type
            self.flags = flags
            self.stream = stream
            self.payload = payload
        }

        public var bytes: [UInt8] {
            let length = Self.bigEndian(UInt32(payload.count))
            var bytes: [UInt8] = Array(length.suffix(3))
            bytes.append(type.rawValue)
            bytes.append(flags)
            bytes += Self.bigEndian(stream & 0x7fff_ffff)
            bytes += payload
            return bytes
        }

        static func bigEndian(_ value: UInt32) -> [UInt8] {
            [UInt8(value >> 24 & 0xff), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
        }

        static func uint32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
            bytes.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
        }
    }

    public enum FrameType: UInt8, Sendable {
        case data = 0, headers, priority, rstStream, settings, pushPromise, ping, goAway, windowUpdate, continuation
    }

    public static let endStream: UInt8 = 0x1
    public static let endHeaders: UInt8 = 0x4
    public static let ack: UInt8 = 0x1

    /// HTTP/2 error codes the tests look for.
    public enum ErrorCode: UInt32, Sendable {
        case noError = 0, protocolError, internalError, flowControlError, settingsTimeout, streamClosed, frameSizeError
        case refusedStream, cancel, compressionError, connectError, enhanceYourCalm, inadequateSecurity, http11Required
    }

    private let connection: RawConnection

    private init(connection: RawConnection) { self.connection = connection }

    /// Connects with TLS offering only `h2`, sends the preface and `settings` (identifier, value), waits for
    /// the server's SETTINGS (at most `timeout`) and acknowledges them.
    public static func connect(
        port: Int,
        tls: TLSConfiguration,
        settings: [(UInt16, UInt32)] = [],
        timeout: Duration = .seconds(30)
    ) async throws -> RawHTTP2Peer {
        let connection = try await RawConnection.connect(port: port, tls: tls, alpn: ["h2"])
        let peer = RawHTTP2Peer(connection: connection)
        let payload = settings.flatMap { [UInt8($0.0 >> 8), UInt8($0.0 & 0xff)] + Frame.bigEndian($0.1) }
        try await connection.send(bytes: Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Frame(.settings, stream: 0, payload: payload).bytes)
        guard await peer.wait(timeout: timeout, until: { $0.contains { $0.type == .settings && $0.flags & ack == 0 } }) else {
            await connection.close()
            throw PeerError.noSettings
        }
        try await peer.send([Frame(.settings, flags: ack, stream: 0)])
        return peer
    }

    public enum PeerError: Error { case noSettings }

    /// Writes the frames, in one write.
    public func send(_ frames: [Frame]) async throws {
        try await connection.send(bytes: frames.flatMap(\.bytes))
    }

    /// A header block of literal fields, never indexed (RFC 7541, section 6.2.3), no Huffman coding.
    public static func block(_ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block.append(0x10)
            block += string(name)
            block += string(value)
        }
        return block
    }

    /// An HPACK string literal without Huffman coding (RFC 7541, section 5.2).
    public static func string(_ text: String) -> [UInt8] {
        integer(text.utf8.count, prefix: 7, flags: 0) + Array(text.utf8)
    }

    /// A request's pseudo-header fields and `fields`.
    public static func request(_ method: String, _ path: String, _ fields: [(String, String)] = []) -> [(String, String)] {
        [(":method", method), (":scheme", "https"), (":path", path), (":authority", "localhost")] + fields
    }

    /// An HPACK integer with an N-bit prefix (RFC 7541, section 5.1).
    public static func integer(_ value: Int, prefix: Int, flags: UInt8) -> [UInt8] {
        let limit = (1 << prefix) - 1
        if value < limit { return [flags | UInt8(value)] }
        var bytes = [flags | UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            bytes.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        bytes.append(UInt8(rest))
        return bytes
    }

    public static func headers(stream: UInt32, _ block: [UInt8], endStream: Bool = true, endHeaders: Bool = true) -> Frame {
        Frame(.headers, flags: (endStream ? Self.endStream : 0) | (endHeaders ? Self.endHeaders : 0), stream: stream, payload: block)
    }

    public static func resetStream(_ stream: UInt32, _ code: ErrorCode = .cancel) -> Frame {
        Frame(.rstStream, stream: stream, payload: Frame.bigEndian(code.rawValue))
    }

    public static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool = true) -> Frame {
        Frame(.data, flags: endStream ? Self.endStream : 0, stream: stream, payload: bytes)
    }

    // MARK: What the server sent

    /// The server's frames so far, in order.
    public var frames: [Frame] {
        let bytes = connection.receivedBytes
        var frames: [Frame] = []
        var index = 0
        while bytes.count - index >= 9 {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            guard bytes.count - index - 9 >= length else { break }
            if let type = FrameType(rawValue: bytes[index + 3]) {
                let stream = Frame.uint32(bytes[(index + 5)...]) & 0x7fff_ffff
                frames.append(Frame(type, flags: bytes[index + 4], stream: stream, payload: Array(bytes[(index + 9)..<(index + 9 + length)])))
            }
            index += 9 + length
        }
        return frames
    }

    /// The value of a SETTINGS parameter the server announced (the last one wins), if it did.
    public func serverSetting(_ identifier: UInt16) -> UInt32? {
        var value: UInt32?
        for frame in frames where frame.type == .settings && frame.flags & Self.ack == 0 {
            var index = frame.payload.startIndex
            while frame.payload.endIndex - index >= 6 {
                if UInt16(frame.payload[index]) << 8 | UInt16(frame.payload[index + 1]) == identifier {
                    value = Frame.uint32(frame.payload[(index + 2)...])
                }
                index += 6
            }
        }
        return value
    }

    /// Each stream's response status, from the server's header blocks decoded in order.
    public var statuses: [UInt32: Int] {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var statuses: [UInt32: Int] = [:]
        var pending: (stream: UInt32, block: [UInt8])?
        for frame in frames where frame.type == .headers || frame.type == .continuation {
            var block = (pending?.block ?? []) + frame.payload
            let stream = pending?.stream ?? frame.stream
            guard frame.flags & Self.endHeaders != 0 else {
                pending = (stream, block)
                continue
            }
            pending = nil
            var buffer = ByteBuffer(bytes: block)
            block = []
            guard let fields = try? decoder.decodeHeaders(from: &buffer) else { break }
            if statuses[stream] == nil, let status = fields.first(name: ":status").flatMap({ Int($0) }) {
                statuses[stream] = status
            }
        }
        return statuses
    }

    /// The streams the server reset, with their error codes.
    public var resets: [UInt32: UInt32] {
        Dictionary(frames.filter { $0.type == .rstStream }.map { ($0.stream, Frame.uint32($0.payload[...])) }, uniquingKeysWith: { first, _ in first })
    }

    /// The server's GOAWAY (last stream, error code), if it sent one.
    public var goAway: (lastStream: UInt32, code: UInt32)? {
        frames.last { $0.type == .goAway }.map { (Frame.uint32($0.payload[...]) & 0x7fff_ffff, Frame.uint32($0.payload.dropFirst(4))) }
    }

    /// The DATA bytes the server sent on `stream`.
    public func body(of stream: UInt32) -> [UInt8] {
        frames.filter { $0.type == .data && $0.stream == stream }.flatMap(\.payload)
    }

    /// Whether the server has closed the connection.
    public var isClosed: Bool { connection.isClosed }

    /// Waits until `condition` holds for the server's frames, at most `timeout`. - Returns: whether it did.
    public func wait(timeout: Duration, until condition: ([Frame]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(frames) { return true }
            if connection.isClosed { return condition(frames) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition(frames)
    }

    /// Waits until the server closes the connection, at most `timeout`. - Returns: whether it did.
    public func waitForClose(timeout: Duration) async -> Bool {
        await connection.waitForClose(timeout: timeout)
    }

    public func close() async { await connection.close() }
}
