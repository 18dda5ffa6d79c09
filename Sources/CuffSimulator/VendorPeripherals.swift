// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// A vendor-protocol cuff (Microlife, Yonker) as a GATT server: the vendor service of the public
/// sources, and ``MicrolifeCuff`` or ``YonkerCuff`` deciding what it sends. Pure: PDUs and time
/// in, PDUs out; any driver of a ``GATTPeripheral`` serves it.
public struct VendorCuffPeripheral: GATTPeripheral {
    public enum Kind: Sendable {
        case microlife(MicrolifeCuff)
        case yonker(YonkerCuff)
    }

    public private(set) var server: GATTServer
    public private(set) var kind: Kind
    /// Where the cuff answers (Microlife fff1, Yonker cdeacd81), and where Microlife takes commands.
    let notifyHandle: UInt16
    let commandHandle: UInt16?
    /// The server's actions for one call, kept between calls (emptied, its capacity kept:
    /// ``ActionMachine``); a call made while another one's actions run gets a new array.
    var serverScratch = ActionBuffer<GATTServerAction>()
    /// The same for the cuff's own actions.
    var microlifeScratch = ActionBuffer<MicrolifeCuff.Action>()
    var yonkerScratch = ActionBuffer<YonkerCuff.Action>()

    public init(_ kind: Kind, name: String) {
        var b = AttributeDatabase.Builder()
        b.addService(.genericAccess)
        b.addCharacteristic(
            BluetoothUUID(BPSUUID.deviceName), properties: .read, permissions: .read, value: Array(name.utf8))
        switch kind {
        case .microlife:
            b.addService(BluetoothUUID(Microlife.serviceUUID16))
            notifyHandle =
                b.addCharacteristic(BluetoothUUID(Microlife.responseUUID16), properties: .notify, permissions: [])
                .valueHandle
            commandHandle =
                b.addCharacteristic(
                    BluetoothUUID(Microlife.commandUUID16), properties: [.write, .writeWithoutResponse],
                    permissions: .write
                ).valueHandle
        case .yonker:
            b.addService(BluetoothUUID(Yonker.serviceUUID)!)
            notifyHandle =
                b.addCharacteristic(BluetoothUUID(Yonker.notifyUUID)!, properties: .notify, permissions: []).valueHandle
            commandHandle = nil
        }
        server = GATTServer(database: b.build())
        self.kind = kind
    }

    public var nextDeadline: Timestamp? { server.nextDeadline }
    public var database: AttributeDatabase { server.database }

    public mutating func connected(now: Timestamp, client: String?, into out: inout [PeripheralOutput]) {
        server.reset()
        out.append(.log("\(label) cuff: client connected"))
    }

    public mutating func disconnected(now: Timestamp, into out: inout [PeripheralOutput]) {
        server.reset()
        if case var .microlife(c) = kind {
            c.subscriptionChanged(false)
            kind = .microlife(c)
        }
    }

    public mutating func linkSecurityChanged(_ level: SecurityLevel) { server.linkSecurityChanged(level: level) }
    public mutating func buttonPressed(now: Timestamp, into out: inout [PeripheralOutput]) {}
    public mutating func tick(now: Timestamp, into out: inout [PeripheralOutput]) {
        serving({ $0.tick(now: now, into: &$1) }, &out)
    }
    public mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [PeripheralOutput]) {
        serving({ $0.receive(pdu, now: now, into: &$1) }, &out)
    }

    var label: String {
        switch kind {
        case .microlife: "Microlife"
        case .yonker: "Yonker"
        }
    }

    /// Calls the server with ``serverScratch`` (emptied; a nested call gets a new array) and runs
    /// what it asks for.
    mutating func serving(_ call: (inout GATTServer, inout [GATTServerAction]) -> Void, _ out: inout [PeripheralOutput])
    {
        var actions = serverScratch.take()
        call(&server, &actions)
        run(actions, &out)
        serverScratch.giveBack(&actions)
    }

    mutating func run(_ actions: [GATTServerAction], _ out: inout [PeripheralOutput]) {
        let notifyHandle = notifyHandle
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .written(handle, _, value, _) where handle == commandHandle:
                guard case var .microlife(c) = kind else { continue }
                var answer = microlifeScratch.take()
                c.written(value, into: &answer)
                kind = .microlife(c)
                for x in answer {
                    switch x {
                    case let .notify(v): serving({ $0.notify(handle: notifyHandle, value: v, into: &$1) }, &out)
                    case let .log(s): out.append(.log(s))
                    case let .disconnect(why): out.append(.disconnect(why))
                    }
                }
                microlifeScratch.giveBack(&answer)
            case let .subscriptionChanged(handle, _, notify, _) where handle == notifyHandle:
                switch kind {
                case var .microlife(c):
                    c.subscriptionChanged(notify)
                    kind = .microlife(c)
                case var .yonker(c):
                    var sent = yonkerScratch.take()
                    c.subscriptionChanged(notify, into: &sent)
                    kind = .yonker(c)
                    for x in sent {
                        switch x {
                        case let .notify(v): serving({ $0.notify(handle: notifyHandle, value: v, into: &$1) }, &out)
                        case let .log(s): out.append(.log(s))
                        }
                    }
                    yonkerScratch.giveBack(&sent)
                }
            case let .protocolViolation(why):
                out.append(.log("client protocol violation: \(why)"))
            default:
                break
            }
        }
    }
}
