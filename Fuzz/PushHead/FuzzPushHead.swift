import FuzzDriver
import ReloadGateAPNs
import ReloadGateCore

/// The APNs request-head validator: the RFC 9113 field rules (HTTP2RequestFields), then method and path,
/// then the headers in docs/APNS.md's order (PushHeaders), with and without a client certificate's topics.
///
/// Input: lines; the first is `METHOD PATH`, the others `name: value`.
@main
struct FuzzPushHead {
    static func main() {
        FuzzDriver.run { bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let request = lines.isEmpty ? "" : lines.removeFirst()
            let parts = request.split(separator: " ", maxSplits: 1).map(String.init)
            let method = parts.first ?? ""
            let path = parts.count > 1 ? parts[1] : ""
            var headers: [(name: String, value: String)] = []
            for line in lines {
                guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { continue }
                let name = String(line[..<colon])
                let value = String(line[line.index(after: colon)...].drop(while: { $0 == " " }))
                headers.append((name, value))
            }

            var fields = HTTP2RequestFields()
            var wellFormed = fields.accept(name: ":method", value: method) && fields.accept(name: ":path", value: path)
                && fields.accept(name: ":scheme", value: "https")
            for (name, value) in headers where wellFormed { wellFormed = fields.accept(name: name, value: value) }
            if wellFormed, let length = fields.contentLength { precondition(length >= 0) }
            _ = fields.isComplete

            let regular = headers.filter { !$0.name.hasPrefix(":") }.map { (name: $0.name.lowercased(), value: $0.value) }
            guard let token = try? PushHeaders.deviceTokenText(method: method, path: path) else { return }
            precondition(!token.contains("/"))
            for topics in [nil, ["com.example.scores"], ["com.example.scores", "com.example.news"]] as [[String]?] {
                guard let checked = try? PushHeaders(regular, certificateTopics: topics) else { continue }
                if let expiration = checked.expiration {
                    precondition(Timestamp(unixSeconds: expiration) != nil, "an accepted expiration is a time in range")
                }
                if let id = checked.apnsID { precondition(PushHeaders.isCanonicalUUID(id)) }
                if let collapse = checked.collapseID { precondition(collapse.utf8.count <= 64) }
                precondition(!checked.bundle.rawValue.isEmpty)
            }
        }
    }
}
