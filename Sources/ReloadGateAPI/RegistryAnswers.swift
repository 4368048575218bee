public import ReloadGateCore

/// The answers of the registry API and the webhook, one type each (the requests are
/// ``DeviceRegistrationBody``, ``ControlRegistrationBody``, ``TimelineBody`` and ``WebhookBody``).
///
/// The three answers of the busiest routes (a registration, a control's registration, the webhook's
/// `202`) are written by hand as well (``DeviceRegistered/jsonText``, ``ControlRegistered/jsonText``,
/// ``ReloadAccepted/jsonText(requestId:targets:counts:)``): `JSONSerialization` took a tenth of a
/// registration's CPU (docs/DECISIONS.md, "Registry writes have a group commit of their own").
/// `BodySchemaTests` checks that the hand-written text is the encoder's, byte for byte.
public enum RegistryAPI {
    /// `PUT /v1/apps/<bundle>/devices/<token>`: the device's widgets now, each with its instance id.
    public struct DeviceRegistered: DocumentedBody {
        public static let schema = "DeviceRegistered"
        public var device: String
        public var widgets: [RegisteredWidget]
        /// Widgets the new set no longer has.
        public var removedWidgets: Int
        public var retiredPreviousToken: Bool

        public init(device: String, widgets: [RegisteredWidget], removedWidgets: Int, retiredPreviousToken: Bool) {
            self.device = device
            self.widgets = widgets
            self.removedWidgets = removedWidgets
            self.retiredPreviousToken = retiredPreviousToken
        }

        /// ``BodyJSON/encode(_:)``'s bytes, written without the encoder into one string: every registration
        /// is answered with it.
        public var jsonText: String {
            var text = #"{"device":"#
            text.reserveCapacity(device.utf8.count + 80 + widgets.count * 40)
            JSONText.append(encoderQuoted: device, to: &text)
            text += #","removedWidgets":"#
            text += String(removedWidgets)
            text += retiredPreviousToken ? #","retiredPreviousToken":true,"widgets":["# : #","retiredPreviousToken":false,"widgets":["#
            for (index, widget) in widgets.enumerated() {
                text += index == 0 ? #"{"id":"# : #",{"id":"#
                JSONText.append(encoderQuoted: widget.id, to: &text)
                text += #","instance":"#
                text += String(widget.instance)
                text += "}"
            }
            text += "]}"
            return text
        }
    }

    public struct RegisteredWidget: Codable, Sendable, Hashable {
        public var id: String
        public var instance: Int64

        public init(id: String, instance: Int64) {
            self.id = id
            self.instance = instance
        }
    }

    /// `PUT /v1/apps/<bundle>/controls/<token>`: the control's instance.
    public struct ControlRegistered: DocumentedBody {
        public static let schema = "ControlRegistered"
        public var control: String
        public var instance: Int64
        public var kind: String
        public var retiredPreviousToken: Bool

        public init(control: String, instance: Int64, kind: String, retiredPreviousToken: Bool) {
            self.control = control
            self.instance = instance
            self.kind = kind
            self.retiredPreviousToken = retiredPreviousToken
        }

        /// ``BodyJSON/encode(_:)``'s bytes, written without the encoder.
        public var jsonText: String {
            #"{"control":\#(JSONText.encoderQuoted(control)),"instance":\#(instance),"kind":\#(JSONText.encoderQuoted(kind)),"#
                + #""retiredPreviousToken":\#(retiredPreviousToken)}"#
        }
    }
    /// `PUT .../activities/<token>`: the activity's (or push-to-start token's) instance.
    public struct ActivityRegistered: DocumentedBody {
        public static let schema = "ActivityRegistered"
        public var activity: String
        public var instance: Int64
        public var attributesType: String
        public var frequentUpdates: Bool
        public var pushToStart: Bool
        public var retiredPreviousToken: Bool

        public init(activity: String, instance: Int64, attributesType: String, frequentUpdates: Bool, pushToStart: Bool, retiredPreviousToken: Bool) {
            self.activity = activity
            self.instance = instance
            self.attributesType = attributesType
            self.frequentUpdates = frequentUpdates
            self.pushToStart = pushToStart
            self.retiredPreviousToken = retiredPreviousToken
        }
    }

    /// `PUT .../widgets/<id>/timeline`: when WidgetKit will reload the widget without a push (`null` for
    /// `never`).
    public struct TimelineRecorded: DocumentedBody {
        public static let schema = "TimelineRecorded"
        @Nullable public var plannedReload: String?

        public init(plannedReload: String?) {
            self.plannedReload = plannedReload
        }
    }

    /// `GET /v1/apps/<bundle>/configurations`: the distinct configurations in use.
    public struct ConfigurationList: DocumentedBody {
        public static let schema = "ConfigurationList"
        public var configurations: [ConfigurationUse]

        public init(configurations: [ConfigurationUse]) {
            self.configurations = configurations
        }
    }

    /// A configuration of a kind and family, and how many widget instances (or controls) use it.
    public struct ConfigurationUse: DocumentedBody {
        public static let schema = "ConfigurationUse"
        public var kind: String
        public var family: String
        public var configuration: JSONValue
        public var count: Int

        public init(kind: String, family: String, configuration: JSONValue, count: Int) {
            self.kind = kind
            self.family = family
            self.configuration = configuration
            self.count = count
        }
    }

    /// The webhook's `202`: the request's id, how many widget instances it decided, and the count of each
    /// decision (every kind, zeros included). Stored as text for an idempotent replay.
    public struct ReloadAccepted: DocumentedBody {
        public static let schema = "ReloadAccepted"
        public var requestId: RequestID
        public var targets: Int
        public var decisions: [String: Int]

        public init(requestId: RequestID, targets: Int, decisions: [String: Int]) {
            self.requestId = requestId
            self.targets = targets
            self.decisions = decisions
        }

        /// The answer to a request whose decisions were counted in `counts`: every kind a request gets on
        /// arrival is listed, zeros included, and any other kind that it got.
        public init(requestId: RequestID, targets: Int, counts: DecisionCounts) {
            var decisions: [String: Int] = [:]
            for listed in Self.listedKinds where listed.always || counts[listed.kind] > 0 {
                decisions[listed.kind.rawValue] = counts[listed.kind]
            }
            self.init(requestId: requestId, targets: targets, decisions: decisions)
        }

        /// ``BodyJSON/encode(_:)``'s bytes of `ReloadAccepted(requestId:targets:counts:)`, written from the
        /// counts without the encoder: the webhook answers every call with it (`reloadgate-bench-bodies`
        /// prints its cost beside the text built through the dictionary).
        public static func jsonText(requestId: RequestID, targets: Int, counts: DecisionCounts) -> String {
            // At most the ten kinds' keys (under 16 bytes each) and counts (20 digits), two more numbers and
            // the punctuation: under 512 bytes.
            String(unsafeUninitializedCapacity: 512) { buffer in
                var end = 0
                func write(_ bytes: some Sequence<UInt8>) {
                    for byte in bytes {
                        buffer[end] = byte
                        end += 1
                    }
                }
                write(#"{"decisions":{"#.utf8)
                var first = true
                for listed in listedKinds where listed.always || counts[listed.kind] > 0 {
                    if !first { write(",".utf8) }
                    first = false
                    write(listed.key)
                    buffer.writeDecimal(UInt64(counts[listed.kind]), at: &end)
                }
                write(#"},"requestId":"#.utf8)
                buffer.writeDecimal(requestId, at: &end)
                write(#","targets":"#.utf8)
                buffer.writeDecimal(UInt64(targets), at: &end)
                write("}".utf8)
                return end
            }
        }

        /// Every kind in the order of its name (the encoder's sorted keys), its key quoted with the colon,
        /// and whether the answer lists it when its count is zero.
        private static let listedKinds: [(kind: DecisionKind, key: [UInt8], always: Bool)] =
            DecisionKind.allCases.sorted { $0.rawValue < $1.rawValue }.map {
                ($0, Array((JSONText.encoderQuoted($0.rawValue) + ":").utf8), DecisionKind.onArrival.contains($0))
            }
    }
}

extension APIError {
    /// Every refusal's body, `{"code": ..., "message": ...}`.
    public struct Body: DocumentedBody {
        public static let schema = "Error"
        public var code: String
        public var message: String

        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }
}
