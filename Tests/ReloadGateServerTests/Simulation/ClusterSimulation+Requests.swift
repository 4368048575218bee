import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting

@testable import ReloadGateServer

/// The simulation's clients: reload requests (pushes, webhook calls, pushes to unknown tokens) and
/// registry changes, handed to a gateway's engine as its listeners and routes hand them, and their answers.
extension ClusterSimulation {
    func newRequest(at g: Int, kind: SimulatedRequest.Kind, targets: [Int64]) -> Int {
        let number = requests.count
        requests.append(
            SimulatedRequest(
                number: number, gateway: g, kind: kind, targets: targets, sentAt: clock.milliseconds,
                answeredBeforeSending: answers.withLock { $0.order.count }
            )
        )
        return number
    }

    func answer(_ number: Int, _ answer: Answer) {
        answers.withLock { $0.add(answer, to: number) }
    }

    func reply(for number: Int) -> SchedulerEngine.Reply {
        let answers = answers
        return { result in
            let answer: Answer
            switch result {
            case .success(.decided(let id, _, _, _)): answer = .accepted(id)
            case .success(.replay): answer = .replayed
            case .success(.conflict): answer = .conflict
            case .failure(let error): answer = .refused("\(error)")
            }
            answers.withLock { $0.add(answer, to: number) }
        }
    }

    func command(_ targets: [(instance: Int64, device: Int64)], number: Int, priority: Priority, source: RecordedRequest.Source)
        -> ReloadCommand
    {
        ReloadCommand(
            app: app, source: source, targets: targets.map(\.instance), targetDevices: targets.map(\.device), priority: priority,
            expiration: nil, collapseID: nil, team: app.teamID, exempt: false, summary: "sim-\(number)",
            received: Timestamp(clock.date), idempotency: nil
        )
    }

    /// A push or webhook call: its targets are the registered instances of `devices`, as the push path
    /// and the webhook's targeting read them from the store.
    func submitReload(
        at g: Int, devices: [Int64], priority: Priority, source: RecordedRequest.Source, idempotency: ReloadCommand.Idempotency? = nil
    ) {
        let targets = devices.flatMap { device in
            store.instances(ofDevice: device).filter { store.isRegistered(instance: $0.id) }.map { (instance: $0.id, device: device) }
        }
        guard !targets.isEmpty else { return }
        let number = newRequest(at: g, kind: .reload, targets: targets.map(\.instance))
        requests[number].idempotency = idempotency
        var command = command(targets, number: number, priority: priority, source: source)
        command.idempotency = idempotency
        gateways[g].engine.enqueue(command, render: Self.render, reply: reply(for: number))
    }

    static let render: SchedulerEngine.Render = { _, _ in (200, "") }

    /// Unknown tokens from this one on are controls' (a controls push adopts them as controls).
    static let firstControlToken = 1003

    /// A push to a token: adopted first when no device has it (then decided like any push). The adoption
    /// is written and registered with the engine as the registry's group commit does it, beside the
    /// commit loop; the push is decided at the gateway's next turn.
    func adoptAndPush(at g: Int, token: Int) async {
        let hex = Self.token(token)
        if let known = devicesByToken[hex] {
            submitReload(at: g, devices: [known], priority: .high, source: .push)
            return
        }
        let number = newRequest(at: g, kind: .reload, targets: [])
        let engine = gateways[g].engine
        let pushType: PushType = token >= Self.firstControlToken ? .controls : .widgets
        let reply = reply(for: number)
        let device: Int64
        do {
            let adopted = try await store.adoptDevice(app: app, token: try DeviceToken(hex), pushType: pushType, pushToStart: false, now: clock.date)
            device = adopted.device
            devicesByToken[hex] = device
            devices.append(device)
            requests[number].targets = store.instances(ofDevice: device).map(\.id)
            requests[number].changed = device
            try await engine.checkAccepting()
            await engine.register(
                adopted: AdoptedDevice(device: device, instance: adopted.instance, created: true, instanceAdded: true), pushType: pushType, pushToStart: false
            )
        } catch {
            return reply(.failure(error))
        }
        var push = command([], number: number, priority: .high, source: .push)
        push.targets = store.instances(ofDevice: device).map(\.id)
        push.targetDevices = push.targets.map { _ in device }
        engine.enqueue(push, render: Self.render, reply: reply)
    }

    /// A registry change through `g`'s API: written to the store, then the engine brings the scheduler
    /// in line (or tells the owner through its inbox), answered once that is committed.
    func changeRegistry(at g: Int, device: Int64, adding: Bool) async {
        let engine = gateways[g].engine
        let number = newRequest(at: g, kind: .registry, targets: [])
        requests[number].changed = device
        do {
            try await engine.checkAccepting()
            if adding {
                // A control's token has its one control: nothing to add (the registry refuses it too).
                if store.pushType(ofDevice: device) == .controls { return answer(number, .registryDone) }
                requests[number].targets = [try store.addWidget(device: device, kind: "scores")]
            } else {
                guard let first = store.instances(ofDevice: device).first else { return answer(number, .registryDone) }
                try store.removeWidget(first.id)
                removed.insert(first.id)
                requests[number].targets = [first.id]
            }
            _ = try await engine.devicesChangedWithoutWaiting([device])
            await answerOnCommit(number, at: engine)
        } catch {
            answer(number, .refused("\(error)"))
        }
    }

    /// An operator's `cancel` (`flush` nil) or `flush` of a device's widgets through `g`'s admin API,
    /// answered once committed.
    func operatorCommand(at g: Int, device: Int64, flush ignoringBudget: Bool?) async {
        let engine = gateways[g].engine
        let instances = store.instances(ofDevice: device).map(\.id)
        let number = newRequest(at: g, kind: .operatorCommand, targets: instances)
        do {
            let waits: Bool
            if let ignoringBudget {
                waits = try await engine.flushWithoutWaiting(instances: instances, ignoringBudget: ignoringBudget).waits
                if ignoringBudget { flushedIgnoringBudget.formUnion(instances) }
            } else {
                waits = try await engine.cancelWithoutWaiting(instances: instances, listing: nil).waits
            }
            guard waits else { return answer(number, .registryDone) }
            await answerOnCommit(number, at: engine)
        } catch {
            answer(number, .refused("\(error)"))
        }
    }

    /// Answers request `number` (done, or refused) once `engine`'s open batch has committed.
    func answerOnCommit(_ number: Int, at engine: SchedulerEngine) async {
        let answers = answers
        await engine.waitForCommit { result in
            let answer: Answer
            switch result {
            case .success: answer = .registryDone
            case .failure(let error): answer = .refused("\(error)")
            }
            answers.withLock { $0.add(answer, to: number) }
        }
    }
}
