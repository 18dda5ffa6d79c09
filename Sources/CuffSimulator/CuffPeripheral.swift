// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// The simulated cuff as a GATT server: the attribute database of a real cuff, a ``GATTServer``
/// for one connection, and the ``CuffSimulatorMachine`` deciding what the cuff does.
///
/// Pure: PDUs and time in, PDUs out. A driver moves them over a bearer (in process, a Unix
/// `SOCK_SEQPACKET` socket, or BlueZ's L2CAP ATT channel).
public struct CuffPeripheral: GATTPeripheral {
    public typealias Output = PeripheralOutput

    public private(set) var server: GATTServer
    public private(set) var machine: CuffSimulatorMachine
    /// Value handle of each characteristic the cuff has.
    public let handles: [CuffCharacteristic: UInt16]
    let characteristicsByHandle: [UInt16: CuffCharacteristic]
    /// Service Changed's value and CCCD handles, when the cuff indicates it on connecting.
    let serviceChangedOnConnect: (value: UInt16, cccd: UInt16)?
    /// The machine's actions for one event, kept between events (emptied, its capacity kept:
    /// ``ActionMachine``); an event handled while another one's actions run gets a new array.
    var machineActions = ActionBuffer<CuffSimulatorMachine.Action>()
    /// The server's actions for one call, kept between calls the same way.
    var serverScratch = ActionBuffer<GATTServerAction>()

    /// - Parameter requireEncryption: the result and cuff-pressure subscriptions need an encrypted
    ///   link (a cuff that must be bonded first); clients get Insufficient Authentication until then.
    public init(configuration: SimulatorConfiguration, requireEncryption: Bool = false) {
        let machine = CuffSimulatorMachine(configuration: configuration)
        let values = machine.initialValues
        var b = AttributeDatabase.Builder()
        var handles: [CuffCharacteristic: UInt16] = [:]
        let cccd: AttributePermissions = requireEncryption ? [.read, .write, .writeEncrypted] : .readWrite
        let habits = machine.habits
        func add(
            _ c: CuffCharacteristic, _ props: GATT.CharacteristicProperties, _ perms: AttributePermissions,
            cccd: AttributePermissions = .readWrite
        ) {
            let control = habits.vendorStart.map(\.characteristicUUID) ?? CuffControl.controlPointUUID
            let uuid = c.uuid16.map { BluetoothUUID($0) } ?? BluetoothUUID(control)!
            handles[c] =
                b.addCharacteristic(
                    uuid, properties: props, permissions: perms, value: values[c] ?? [], cccdPermissions: cccd
                ).valueHandle
        }
        let gattLayout = SimulatedGATTLayout(configuration, &b)
        b.addService(.genericAccess)
        add(.deviceName, .read, .read)
        b.addService(BluetoothUUID(BPSUUID.bloodPressureService))
        add(.bloodPressureMeasurement, .indicate, [], cccd: cccd)
        if habits.hasCuffPressure { add(.intermediateCuffPressure, .notify, [], cccd: cccd) }
        add(.bloodPressureFeature, .read, .read)
        if habits.hasDateTime { add(.dateTime, [.read, .write], .readWrite) }
        // A family's start command lives on its own characteristic beside the results (QardioArm).
        if habits.vendorStart != nil { add(.cuffControl, .write, .write) }
        if configuration.persona == .bps11 {
            add(.enhancedBloodPressureMeasurement, .indicate, [], cccd: cccd)
            add(.enhancedIntermediateCuffPressure, .notify, [], cccd: cccd)
            add(.bloodPressureRecord, .indicate, [], cccd: cccd)
            add(
                .recordAccessControlPoint, [.write, .indicate], requireEncryption ? [.write, .writeEncrypted] : .write,
                cccd: cccd)
        }
        b.addService(BluetoothUUID(BPSUUID.deviceInformationService))
        add(.manufacturerName, .read, .read)
        add(.modelNumber, .read, .read)
        add(.serialNumber, .read, .read)
        add(.firmwareRevision, .read, .read)
        if habits.hasCurrentTime {
            b.addService(BluetoothUUID(BPSUUID.currentTimeService))
            add(.currentTime, [.read, .write, .notify], .readWrite)
        }
        if configuration.quirk == nil {
            // Our own control point: the simulator's, no real family has it.
            b.addService(BluetoothUUID(CuffControl.serviceUUID)!)
            add(.cuffControl, .write, .write)
        }
        var server = GATTServer(database: gattLayout.finish(b.build()))
        server.transactionTimeoutHere = configuration.transactionTimeout
        server.deferredWriteHandles = Set(
            [.cuffControl, .currentTime, .dateTime, .recordAccessControlPoint].compactMap { handles[$0] })
        self.server = server
        self.machine = machine
        self.handles = handles
        self.characteristicsByHandle = Dictionary(uniqueKeysWithValues: handles.map { ($1, $0) })
        serviceChangedOnConnect = gattLayout.serviceChangedOnConnect
    }

    public var nextDeadline: Timestamp? { [server.nextDeadline, machine.nextDeadline].compactMap { $0 }.min() }
    public var database: AttributeDatabase { server.database }

    /// A client connected: a fresh GATT connection state. `client` tells clients apart (a
    /// Bluetooth address); nil when the transport cannot (a Unix socket): then every client is the
    /// same one, so a reading one of them confirmed is not sent to the next spontaneously.
    public mutating func connected(now: Timestamp, client: String? = nil, into out: inout [Output]) {
        server.reset()
        let sc = serviceChangedOnConnect
        serving({ SimulatedGATTLayout.connected(sc, &$0, now: now, into: &$1) }, now, .other, &out)
        var actions = takeActions()
        machine.connect(client: client, now: now, into: &actions)
        run(actions: &actions, now, &out)
    }

    public mutating func disconnected(now: Timestamp, into out: inout [Output]) {
        perform(.disconnected(now), now, &out)
        server.reset()
    }

    public mutating func linkSecurityChanged(_ level: SecurityLevel) { server.linkSecurityChanged(level: level) }

    /// One PDU from the client.
    public mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [Output]) {
        let mtu = server.mtu
        serving({ $0.receive(pdu, now: now, into: &$1) }, now, .other, &out)
        if server.mtu != mtu { perform(.mtuChanged(Int(server.mtu)), now, &out) }
    }

    /// Starts the cuff's own measurement schedule, if it has one.
    public mutating func poweredOn(now: Timestamp) { machine.powerOn(now: now) }

    /// The start button (SIGUSR1).
    public mutating func buttonPressed(now: Timestamp, into out: inout [Output]) {
        perform(.buttonPressed(now), now, &out)
    }

    /// Time passed: indication timeouts, the next cuff-pressure sample, the end of the linger.
    public mutating func tick(now: Timestamp, into out: inout [Output]) {
        serving({ $0.tick(now: now, into: &$1) }, now, .other, &out)
        perform(.tick(now), now, &out)
    }

    /// The machine's actions for `event`, run.
    mutating func perform(
        _ event: CuffSimulatorMachine.Event, _ now: Timestamp, writeResults: Bool = true, _ out: inout [Output]
    ) {
        var actions = takeActions()
        machine.handle(event, into: &actions)
        if !writeResults { actions.removeAll { if case .writeResult = $0 { true } else { false } } }
        run(actions: &actions, now, &out)
    }

    /// ``machineActions``, empty, for one event (``run(actions:_:_:)`` gives it back).
    mutating func takeActions() -> [CuffSimulatorMachine.Action] {
        var actions = machineActions.take()
        return actions
    }

    /// Runs one event's actions, then keeps the emptied array for the next event.
    mutating func run(actions: inout [CuffSimulatorMachine.Action], _ now: Timestamp, _ out: inout [Output]) {
        run(actions, now, &out)
        machineActions.giveBack(&actions)
    }

    /// Calls the server with ``serverScratch`` (emptied; a nested call gets a new array) and runs
    /// what it asks for.
    mutating func serving(
        _ call: (inout GATTServer, inout [GATTServerAction]) -> Void, _ now: Timestamp,
        _ context: ServerCall, _ out: inout [Output]
    ) {
        var actions = serverScratch.take()
        call(&server, &actions)
        serverActions(actions, now, context, &out)
        serverScratch.giveBack(&actions)
    }

    /// What a call of the server was, for what its drops mean.
    enum ServerCall {
        /// A notification of the machine's: a drop is of nothing the machine waits for.
        case notifying
        /// An indication of the machine's, with `behind` more of its indications after it in the
        /// actions being run: a drop is of that one.
        case indicating(behind: Int)
        /// A PDU, time, a connection: a drop is of an indication that waited in the queue.
        case other
    }

    mutating func serverActions(
        _ actions: [GATTServerAction], _ now: Timestamp, _ context: ServerCall, _ out: inout [Output]
    ) {
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .written(handle, _, value, withResponse):
                guard let c = characteristicsByHandle[handle] else { continue }
                perform(.written(c, value, now), now, writeResults: withResponse, &out)
            case let .subscriptionChanged(valueHandle, _, notify, indicate):
                guard let c = characteristicsByHandle[valueHandle] else { continue }
                perform(.subscriptionChanged(c, notify: notify, indicate: indicate, now), now, &out)
            case let .indicationConfirmed(handle):
                // (Service Changed is the server's own: the machine did not ask for it.)
                guard characteristicsByHandle[handle] != nil else { continue }
                perform(.indicationConfirmed(now), now, &out)
            case .indicationTimedOut:
                perform(.indicationTimedOut(now), now, &out)
            case let .dropped(handle, reason):
                // An indication of the machine's will never be confirmed: the machine forgets it
                // (after a confirmation timed out, the link is dropped and the machine with it).
                if characteristicsByHandle[handle] != nil, reason != .transactionTimedOut {
                    switch context {
                    case .notifying: break
                    case let .indicating(behind): perform(.indicationDropped(now, behind: behind), now, &out)
                    case .other: perform(.indicationDropped(now, behind: nil), now, &out)
                    }
                }
                if reason != .notSubscribed {
                    out.append(.log("value for handle 0x\(String(handle, radix: 16)) not sent: \(reason.rawValue)"))
                }
            case let .protocolViolation(why):
                out.append(.log("client protocol violation: \(why)"))
            }
        }
    }

    mutating func run(_ actions: [CuffSimulatorMachine.Action], _ now: Timestamp, _ out: inout [Output]) {
        var indications = actions.count { if case .indicate = $0 { true } else { false } }
        for a in actions {
            switch a {
            case let .notify(c, v):
                guard let h = handles[c] else { continue }
                serving({ $0.notify(handle: h, value: v, into: &$1) }, now, .notifying, &out)
            case let .indicate(c, v):
                indications -= 1
                guard let h = handles[c] else {
                    perform(.indicationDropped(now, behind: indications), now, &out)
                    continue
                }
                serving(
                    { $0.indicate(handle: h, value: v, now: now, into: &$1) }, now, .indicating(behind: indications),
                    &out)
            case let .writeResult(c, error):
                guard let h = handles[c] else { continue }
                serving(
                    { $0.respondToWrite(handle: h, error: error.map(ATTErrorCode.init(rawValue:)), into: &$1) }, now,
                    .other, &out)
            case let .setValue(c, v):
                if let h = handles[c] { _ = server.setValue(handle: h, v) }
            case let .withdrawQueued(cs):
                let taken = server.withdrawQueuedIndications(handles: Set(cs.compactMap { handles[$0] }))
                perform(.indicationsWithdrawn(taken, now), now, &out)
            case let .disconnect(why):
                out.append(.disconnect(why))
            case let .log(s):
                out.append(.log(s))
            }
        }
    }
}
