import FuzzDriver
import ReloadGateAPNs
import ReloadGateCore

/// A push's body: at most 4096 bytes of JSON whose `aps` has `"content-changed": true`, with the optional
/// `reloadgate` targeting, or a Live Activity's by Apple's rules, merged as a delivery merges it. Any
/// bytes are refused or accepted, never a trap.
@main
struct FuzzPushPayload {
    static func main() {
        FuzzDriver.run { bytes in
            if let payload = try? PushPayload(bytes) {
                precondition(bytes.count <= PushPayload.limit)
                if let kind = payload.kind { precondition(!kind.isEmpty) }
            }
            guard let activity = (try? PushPayload(bytes, rule: .liveActivity))?.activity else { return }
            precondition((0...253_402_300_799).contains(activity.timestamp))
            // An accepted body merges, with itself too, into a body that is accepted again.
            guard let text = String(validating: bytes, as: UTF8.self) else { return }
            let merged = ActivityPayload.merged([(1, text), (2, text)])
            precondition(merged.map { (try? PushPayload($0, rule: .liveActivity)) != nil } ?? false)
        }
    }
}
