import FuzzDriver
import Foundation
import ReloadGateAPI
import ReloadGateCore

/// The registry and webhook bodies: the first byte picks the body (device registration, timeline,
/// webhook, control registration), the rest is the JSON. Accepted bodies hold only values in range; a refusal is a 4xx.
/// The bodies' parser (``JSONParser``) reads as JSON what both Foundation's `JSONDecoder` and
/// `JSONSerialization` read, and more only with a number beyond a double's range (JSONParserTests compares
/// the values).
@main
struct FuzzAPIBodies {
    static func main() {
        let limits = RegistryLimits()
        let received = Timestamp(seconds: 1_790_000_000)
        FuzzDriver.run { bytes in
            guard let selector = bytes.first else { return }
            let data = Data(bytes.dropFirst())
            let parsed = try? JSONParser.parse(data)
            // Foundation reads UTF-16 and UTF-32 too, which a zero byte or a UTF-16 byte-order mark
            // announces; the parser reads UTF-8 only, where neither can be in JSON.
            let utf8 = !data.contains(0) && !data.starts(with: [0xFE, 0xFF]) && !data.starts(with: [0xFF, 0xFE])
            // JSONDecoder traps on a text whose last byte is its 513th opening bracket, whatever comes
            // before it (decision 0102). A text that ends on an opening bracket is never JSON: it is not
            // asked about those.
            let endsOpen = data.last == UInt8(ascii: "[") || data.last == UInt8(ascii: "{")
            let foundation = utf8 && !endsOpen ? try? JSONDecoder().decode(JSONValue.self, from: data) : nil
            // JSONDecoder reads a repeated key's later value never; JSONSerialization reads all of the text.
            if foundation != nil, (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil {
                precondition(parsed != nil, "Foundation reads it as JSON, the parser does not")
            }
            if utf8, let parsed, foundation == nil { precondition(!parsed.numbersAreFinite, "the parser reads it as JSON, Foundation does not") }
            do throws(APIError) {
                switch selector % 4 {
                case 0:
                    let body = try DeviceRegistrationBody(json: data, limits: limits)
                    precondition(body.widgets.count <= limits.widgetsPerDevice)
                    for widget in body.widgets {
                        let text = widget.configuration.canonicalJSON
                        precondition(text.utf8.count <= limits.configurationBytes)
                        precondition((try? JSONSerialization.jsonObject(with: Data(text.utf8))) != nil, "canonical JSON parses")
                    }
                case 1:
                    let timeline = try TimelineBody.timeline(json: data, limits: limits)
                    precondition(timeline.entries.count <= limits.timelineEntries)
                    for entry in timeline.entries { precondition(Timestamp.acceptedRange.contains(entry.milliseconds)) }
                    if let planned = timeline.plannedReload { _ = planned.rfc3339 }
                case 3:
                    let body = try ControlRegistrationBody(json: data, limits: limits)
                    precondition(limits.problem(with: body.control) == nil)
                    let text = body.control.configuration.canonicalJSON
                    precondition((try? JSONSerialization.jsonObject(with: Data(text.utf8))) != nil, "canonical JSON parses")
                default:
                    let body = try WebhookBody(json: data, received: received)
                    if let expiration = body.expiration { precondition(Timestamp.acceptedRange.contains(expiration.milliseconds)) }
                    precondition((body.target.devices?.count ?? 0) <= WebhookBody.deviceLimit)
                }
            } catch {
                precondition((400..<500).contains(error.status), "a refusal is a 4xx")
            }
        }
    }
}
