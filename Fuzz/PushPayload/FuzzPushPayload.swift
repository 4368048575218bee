import FuzzDriver
import ReloadGateAPNs

/// A push's body: at most 4096 bytes of JSON whose `aps` has `"content-changed": true`, with the optional
/// `reloadgate` targeting. Any bytes are refused or accepted, never a trap.
@main
struct FuzzPushPayload {
    static func main() {
        FuzzDriver.run { bytes in
            guard let payload = try? PushPayload(bytes) else { return }
            precondition(bytes.count <= PushPayload.limit)
            if let kind = payload.kind { precondition(!kind.isEmpty) }
        }
    }
}
