import FuzzDriver
import Foundation
import ReloadGateAPI

/// The webhook's `reloadgate-signature` header: parsed, then verified against a body at a fixed time.
///
/// Input: the header value, a newline, the body.
@main
struct FuzzWebhookSignature {
    static func main() {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        FuzzDriver.run { bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            let header = text.prefix { $0 != "\n" }
            let body = Data(text.dropFirst(header.count + 1).utf8)
            guard let signature = try? WebhookSignature(header: String(header)) else { return }
            precondition(!signature.signatures.isEmpty && signature.signatures.allSatisfy { $0.count == 32 })
            do {
                try signature.verify(body: body, secret: "rgs_fuzz", now: now)
                // Only a header made with the secret verifies: check it is one.
                let expected = WebhookSignature.header(body: body, timestamp: signature.timestamp, secret: "rgs_fuzz")
                let made = try WebhookSignature(header: expected)
                precondition(signature.signatures.contains(made.signatures[0]))
            } catch {}
        }
    }
}
