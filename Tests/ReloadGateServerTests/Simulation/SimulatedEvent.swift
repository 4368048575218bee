import ReloadGateCore
import ReloadGateHostileInput

/// One step of a cluster simulation: something that happens to one gateway, to the shared store or to
/// the clock. A run is a list of them; a seed makes the list (``generate(seed:count:gateways:)``), and
/// a failing list is shrunk to the shortest that still fails (``ClusterSimulation/shrink(_:seed:)``).
enum SimulatedEvent: Hashable, Sendable, CustomStringConvertible {
    /// A push to a registered device (its widgets' instances), at `gateway`.
    case push(gateway: Int, device: Int, priority: Int)
    /// A push to a token nobody registered: adopted (`ingress.unknownDevices: adopt`), then decided.
    case pushToUnknownDevice(gateway: Int, token: Int)
    /// A webhook call reloading the widgets of several devices (owned by several gateways), at `gateway`,
    /// with an idempotency key when `key` is set (its body: the devices).
    case webhook(gateway: Int, devices: [Int], key: Int?)
    /// A widget added to a device through `gateway`'s registry API.
    case addWidget(gateway: Int, device: Int)
    /// A device's first widget removed through `gateway`'s registry API.
    case removeWidget(gateway: Int, device: Int)
    /// The operator drops the pending reloads of a device's widgets (`reloadgate cancel`) through `gateway`.
    case cancel(gateway: Int, device: Int)
    /// The operator makes the pending reloads of a device's widgets due now (`reloadgate flush`).
    case flush(gateway: Int, device: Int, ignoringBudget: Bool)
    /// `gateway`'s commit loop takes a turn (decides what is queued, settles the commit that ended,
    /// starts the next).
    case turn(gateway: Int)
    /// `gateway`'s commit in flight ends: written (unless fenced or the store fails it), or failed with
    /// nothing written (a connection lost, a deadline passed).
    case endCommit(gateway: Int, fails: Bool)
    /// `gateway`'s heartbeat (renew, take over, hand back).
    case heartbeat(gateway: Int)
    /// `gateway`'s delivery worker sends what it holds (those whose lease it holds by its own clock).
    case send(gateway: Int)
    /// The clock moves on.
    case advance(milliseconds: Int)
    /// The database fails (`down`: nothing answers; `locked`: nothing can be written) or heals (`nil`).
    case storeFault(down: Bool?)
    /// `gateway`'s process is killed: whoever waits for it gets no answer; its commit in flight may or may
    /// not have reached the database.
    case kill(gateway: Int, commitLanded: Bool)
    /// A killed gateway starts again (a new gateway id) from the store.
    case restart(gateway: Int)
    /// `gateway` is paused (SIGSTOP, a VM freeze): it does nothing until resumed, while time passes.
    case pause(gateway: Int)
    case resume(gateway: Int)

    var description: String {
        switch self {
        case .push(let g, let device, let priority): "push(g\(g), device \(device), priority \(priority))"
        case .pushToUnknownDevice(let g, let token): "pushToUnknownDevice(g\(g), token \(token))"
        case .webhook(let g, let devices, let key): "webhook(g\(g), devices \(devices)\(key.map { ", key k\($0)" } ?? ""))"
        case .addWidget(let g, let device): "addWidget(g\(g), device \(device))"
        case .removeWidget(let g, let device): "removeWidget(g\(g), device \(device))"
        case .cancel(let g, let device): "cancel(g\(g), device \(device))"
        case .flush(let g, let device, let ignoring): "flush(g\(g), device \(device)\(ignoring ? ", ignoring the budget" : ""))"
        case .turn(let g): "turn(g\(g))"
        case .endCommit(let g, let fails): "endCommit(g\(g), \(fails ? "fails" : "succeeds"))"
        case .heartbeat(let g): "heartbeat(g\(g))"
        case .send(let g): "send(g\(g))"
        case .advance(let milliseconds): "advance(\(milliseconds) ms)"
        case .storeFault(let down): "storeFault(\(down.map { $0 ? "down" : "locked" } ?? "healed"))"
        case .kill(let g, let landed): "kill(g\(g), commit in flight \(landed ? "landed" : "lost"))"
        case .restart(let g): "restart(g\(g))"
        case .pause(let g): "pause(g\(g))"
        case .resume(let g): "resume(g\(g))"
        }
    }

    /// A seeded random schedule of `count` events over `gateways` gateways and `devices` registered
    /// devices. The same seed gives the same list.
    static func generate(seed: UInt64, count: Int, gateways: Int, devices: Int) -> [SimulatedEvent] {
        var random = SplitMix64(seed: seed)
        var events: [SimulatedEvent] = []
        var faulted = false
        func gateway() -> Int { Int.random(in: 0..<gateways, using: &random) }
        func device() -> Int { Int.random(in: 0..<devices, using: &random) }
        for _ in 0..<count {
            let roll = Int.random(in: 0..<1000, using: &random)
            switch roll {
            case 0..<180: events.append(.push(gateway: gateway(), device: device(), priority: [10, 10, 10, 5, 1].randomElement(using: &random)!))
            case 180..<220: events.append(.pushToUnknownDevice(gateway: gateway(), token: Int.random(in: 0..<6, using: &random)))
            case 220..<280:
                let picked = (0..<Int.random(in: 2...4, using: &random)).map { _ in device() }
                let key = Int.random(in: 0..<10, using: &random) < 4 ? Int.random(in: 0..<3, using: &random) : nil
                events.append(.webhook(gateway: gateway(), devices: Array(Set(picked)).sorted(), key: key))
            case 280..<305: events.append(.addWidget(gateway: gateway(), device: device()))
            case 305..<320: events.append(.removeWidget(gateway: gateway(), device: device()))
            case 320..<330: events.append(.cancel(gateway: gateway(), device: device()))
            case 330..<340: events.append(.flush(gateway: gateway(), device: device(), ignoringBudget: Bool.random(using: &random)))
            case 340..<560: events.append(.turn(gateway: gateway()))
            case 560..<730: events.append(.endCommit(gateway: gateway(), fails: Int.random(in: 0..<100, using: &random) < 12))
            case 730..<820: events.append(.heartbeat(gateway: gateway()))
            case 820..<900: events.append(.send(gateway: gateway()))
            case 900..<960: events.append(.advance(milliseconds: [50, 200, 700, 1500, 3000, 7000].randomElement(using: &random)!))
            case 960..<975:
                if faulted {
                    events.append(.storeFault(down: nil))
                } else {
                    events.append(.storeFault(down: Bool.random(using: &random)))
                }
                faulted.toggle()
            case 975..<982: events.append(.kill(gateway: gateway(), commitLanded: Bool.random(using: &random)))
            case 982..<990: events.append(.restart(gateway: gateway()))
            case 990..<995: events.append(.pause(gateway: gateway()))
            default: events.append(.resume(gateway: gateway()))
            }
        }
        return events
    }
}
