// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffLogging
import DBus
import GATT
import Glibc
import Logging
import Transport

/// A peripheral served through bluetoothd: its attribute table exported as a GATT application on
/// cuff's own D-Bus connection (`GattManager1.RegisterApplication`) and advertised with
/// `LEAdvertisingManager1.RegisterAdvertisement`. No raw sockets, so no root.
///
/// The peripheral's state machine stays behind it unchanged: each client bluetoothd reports
/// connected (`Device1.Connected` on the adapter) gets a connection of its own, an
/// `AF_UNIX SOCK_SEQPACKET` pair whose other end ``onClient`` hands to the peripheral's driver.
/// bluetoothd's calls become ATT requests on it (ReadValue → Read/Read Blob, WriteValue →
/// Write/Write Command, StartNotify/StopNotify → a CCCD write, Confirm → Handle Value
/// Confirmation); the peripheral's notifications and indications come back as PropertiesChanged
/// on the characteristic's `Value`. An indication counts as confirmed only when bluetoothd calls
/// `Confirm`.
///
/// Runs on an ``EventLoop`` (the D-Bus socket is one of its sources). When bluetoothd goes away
/// (`NameOwnerChanged` for `org.bluez`), the current client's connection ends; when it comes back,
/// the application and the advertisement are registered again.
public final class BlueZGATTApplication {
    public private(set) var layout: BlueZGATTLayout
    public let adapter: BluetoothAdapter
    let connection: DBusConnection
    let loop: EventLoop
    let log: Logger
    let onClient: (UnixSeqpacketBearer, String?) -> Void
    var watching = false

    /// Set when bluetoothd refused the application or the advertisement, or the bus failed.
    public private(set) var failure: String?
    /// How many times the application was registered (bluetoothd answered RegisterApplication).
    public private(set) var registrations = 0
    /// How many client connections were handed to ``onClient``.
    public private(set) var clientsServed = 0
    var registerSerial: UInt32?
    var advertiseSerial: UInt32?
    /// What the running bluetoothd has accepted.
    var applicationRegistered = false
    var advertisementRegistered = false
    /// A registration to try again (bluetoothd just restarted: its adapter may not be there yet).
    var retry: EventLoop.TimerID?
    var retries = 0
    static let retryLimit = 30

    /// One client's connection.
    final class Session {
        let bearer: UnixSeqpacketBearer
        let client: String?
        let devicePath: String?
        var queue: [Request] = []
        var inFlight: Request?
        /// The characteristic path of the indication awaiting bluetoothd's Confirm.
        var indicated: String?
        init(bearer: UnixSeqpacketBearer, client: String?, devicePath: String?) {
            self.bearer = bearer
            self.client = client
            self.devicePath = devicePath
        }
    }

    /// A bluetoothd call turned into an ATT request (the MTU exchange has no call).
    struct Request {
        var call: DBusMessage?
        var pdu: [UInt8]
        /// The ATT response answers with a value (ReadValue) rather than nothing.
        var returnsValue: Bool
    }

    var session: Session?

    /// Connects to the bus at `busPath`. ``start()`` registers.
    public init(
        busPath: String = DBusConnection.systemBusPath(), adapter: BluetoothAdapter, layout: BlueZGATTLayout,
        loop: EventLoop,
        log: Logger, onClient: @escaping (UnixSeqpacketBearer, String?) -> Void
    ) throws(TransportError) {
        self.adapter = adapter
        self.layout = layout
        self.loop = loop
        self.log = log
        self.onClient = onClient
        connection = try DBusConnection(path: busPath)
        do {
            try connection.authenticate()
            try connection.hello()
        } catch {
            connection.close()
            throw error
        }
    }

    deinit { connection.close() }

    var adapterPath: String { BlueZPaths.adapter(adapter) }

    /// cuff's unique name on the bus (where bluetoothd calls the objects).
    public var connectionName: String? { connection.uniqueName }

    /// Watches the bus on the loop, asks for bluetoothd's signals, registers (answered on the loop).
    public func start() throws(TransportError) {
        // (Also bluetoothd's restarts: NameOwnerChanged.)
        try connection.acceptSignals(onlyFromOwnerOf: BlueZBus.service)
        try connection.addMatch(
            "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='org.bluez.Device1'"
        )
        try loop.watch(connection.fd) { [unowned self] _ in self.readable() }
        watching = true
        try register()
        readable()  // what arrived during the AddMatch calls
    }

    /// RegisterApplication and RegisterAdvertisement, sent without waiting: bluetoothd calls
    /// GetManagedObjects on us before it answers.
    func register() throws(TransportError) {
        if !applicationRegistered {
            registerSerial = try connection.send(
                .call(
                    destination: BlueZBus.service, path: adapterPath, interface: "org.bluez.GattManager1",
                    member: "RegisterApplication", body: [.objectPath(layout.root), .dictionary([])]))
        }
        if !advertisementRegistered {
            advertiseSerial = try connection.send(
                .call(
                    destination: BlueZBus.service, path: adapterPath, interface: "org.bluez.LEAdvertisingManager1",
                    member: "RegisterAdvertisement", body: [.objectPath(layout.advertisementPath), .dictionary([])]))
        }
    }

    /// After a restart bluetoothd owns its name before its adapters are set up: try again each
    /// second, at most ``retryLimit`` times.
    func registerLater(_ why: String) {
        guard retry == nil else { return }
        retries += 1
        guard retries <= Self.retryLimit else {
            return fail("bluetoothd still refuses after \(Self.retryLimit) tries: \(why)")
        }
        log.info("\(why); trying again in 1 s")
        retry = loop.schedule(at: MonotonicClock.now() + .seconds(1)) { [unowned self] in
            self.retry = nil
            do throws(TransportError) { try self.register() } catch { self.fail("D-Bus: \(error.message)") }
        }
    }

    /// Ends the client's connection, unregisters and closes the bus (SIGINT/SIGTERM). Idempotent.
    public func stop() {
        endSession(why: "cuff simulate stopped")
        if let retry { loop.cancel(retry) }
        retry = nil
        if watching {
            loop.unwatch(connection.fd)
            watching = false
            _ = try? connection.send(
                .call(
                    destination: BlueZBus.service, path: adapterPath, interface: "org.bluez.LEAdvertisingManager1",
                    member: "UnregisterAdvertisement", body: [.objectPath(layout.advertisementPath)]))
            _ = try? connection.send(
                .call(
                    destination: BlueZBus.service, path: adapterPath, interface: "org.bluez.GattManager1",
                    member: "UnregisterApplication", body: [.objectPath(layout.root)]))
            log.info("unregistered the application and the advertisement")
        }
        connection.close()
    }

    // MARK: - The bus

    func readable() {
        do {
            while let m = try connection.receive(until: .now) { handle(m) }
        } catch {
            fail("D-Bus: \(error.message)")
        }
    }

    func fail(_ why: String) {
        guard failure == nil else { return }
        failure = why
        log.info("\(why)")
        if watching {
            loop.unwatch(connection.fd)
            watching = false
        }
        endSession(why: why)
    }

    func handle(_ m: DBusMessage) {
        switch m.kind {
        case .methodReturn, .error:
            guard let serial = m.replySerial else { return }
            let what = serial == registerSerial ? "application" : serial == advertiseSerial ? "advertisement" : nil
            guard let what else { return }
            if m.kind == .error {
                var text = ""
                if case .string(let s)? = m.body?.first { text = ": " + s }
                let why = "bluetoothd refused the \(what) on \(adapter): \(m.errorName ?? "error")\(text)"
                return registrations > 0 ? registerLater(why) : fail(why)
            }
            if serial == registerSerial {
                registrations += 1
                applicationRegistered = true
            } else {
                advertisementRegistered = true
            }
            retries = 0
            log.info("bluetoothd registered the \(what) on \(adapter)")
        case .signal:
            signal(m)
        case .methodCall:
            call(m)
        }
    }

    func signal(_ m: DBusMessage) {
        guard let body = m.body else { return }
        if m.member == "NameOwnerChanged", body.count == 3, body[0] == .string(BlueZBus.service) {
            if body[2] == .string("") {
                log.info("bluetoothd left the bus; waiting for it to come back")
                applicationRegistered = false
                advertisementRegistered = false
                endSession(why: "bluetoothd stopped")
            } else {
                log.info("bluetoothd is back on the bus; registering again")
                do { try register() } catch { fail("D-Bus: \(error.message)") }
            }
            return
        }
        guard m.member == "PropertiesChanged", body.count >= 2, body[0] == .string("org.bluez.Device1"),
            let path = m.path, path.hasPrefix(adapterPath + "/dev_"), let connected = body[1]["Connected"]?.boolValue
        else { return }
        if connected {
            if session?.devicePath != path { beginSession(devicePath: path) }
        } else if session?.devicePath == path {
            endSession(why: "bluetoothd reports it disconnected")
        }
    }

    /// `AA:BB:CC:DD:EE:FF` from `/org/bluez/hciN/dev_AA_BB_CC_DD_EE_FF`.
    static func address(devicePath: String) -> String? {
        guard let last = devicePath.split(separator: "/").last, last.hasPrefix("dev_") else { return nil }
        let s = String(last.dropFirst(4).map { $0 == "_" ? ":" : $0 })
        return s.count == 17 ? s : nil
    }

    // MARK: - Clients

    @discardableResult
    func beginSession(devicePath: String?) -> Session? {
        if session != nil { endSession(why: "another client connected") }
        let pair: (UnixSeqpacketBearer, UnixSeqpacketBearer)
        do {
            pair = try UnixSeqpacketBearer.pair()
            // bluetoothd enforced the characteristics' encrypt-… flags before calling us.
            try pair.1.raiseSecurity(to: .high)
        } catch {
            fail("cannot make a connection for the client: \(error.message)")
            return nil
        }
        let client = devicePath.flatMap(Self.address(devicePath:))
        let s = Session(bearer: pair.0, client: client, devicePath: devicePath)
        guard let fd = pair.0.fileDescriptor else { return nil }
        do {
            try loop.watch(fd) { [unowned self] _ in self.fromPeripheral(s) }
        } catch {
            fail("cannot watch the client's connection: \(error.message)")
            return nil
        }
        session = s
        clientsServed += 1
        log.info("\(client ?? "a client") connected through bluetoothd")
        onClient(pair.1, client)
        // Values up to 512 bytes in one Read Response: bluetoothd splits for the real link.
        enqueue(Request(call: nil, pdu: [0x02, 0x05, 0x02], returnsValue: false), in: s)
        return s
    }

    func endSession(why: String) {
        guard let s = session else { return }
        session = nil
        if let fd = s.bearer.fileDescriptor { loop.unwatch(fd) }
        s.bearer.close()
        for r in ([s.inFlight].compactMap { $0 } + s.queue) {
            if let call = r.call {
                reply(.errorReply(to: call, name: "org.bluez.Error.Failed", text: "the client disconnected"))
            }
        }
        log.info("\(s.client ?? "the client")'s connection ended: \(why)")
    }

    /// Calls waiting behind the one in flight, at most (ATT has one request at a time).
    static let queueLimit = 64

    func enqueue(_ r: Request, in s: Session) {
        guard s.queue.count < Self.queueLimit else {
            if let call = r.call {
                reply(
                    .errorReply(
                        to: call, name: "org.bluez.Error.InProgress",
                        text: "\(Self.queueLimit) calls are waiting already"))
            }
            return
        }
        s.queue.append(r)
        pump(s)
    }

    func pump(_ s: Session) {
        while s.inFlight == nil, !s.queue.isEmpty, session === s {
            let r = s.queue.removeFirst()
            do {
                try s.bearer.send(r.pdu)
            } catch {
                if let call = r.call {
                    reply(.errorReply(to: call, name: "org.bluez.Error.Failed", text: error.message))
                }
                continue
            }
            if r.pdu.first == 0x52 {  // Write Command: no response
                if let call = r.call { reply(.methodReturn(to: call)) }
                continue
            }
            s.inFlight = r
        }
    }

    /// PDUs from the peripheral: responses to bluetoothd's calls, notifications, indications.
    func fromPeripheral(_ s: Session) {
        while session === s {
            let event: BearerEvent?
            do { event = try s.bearer.receiveNow() } catch { return endSession(why: error.message) }
            guard let event else { return }
            switch event {
            case .closed:
                // The peripheral dropped the link: ask bluetoothd to drop the client too.
                if let device = s.devicePath {
                    _ = try? connection.send(
                        .call(
                            destination: BlueZBus.service, path: device, interface: "org.bluez.Device1",
                            member: "Disconnect"))
                }
                return endSession(why: "the cuff dropped the link")
            case .timeout:
                continue
            case .pdu(let pdu):
                received(pdu, in: s)
            }
        }
    }

    func received(_ pdu: [UInt8], in s: Session) {
        guard let opcode = pdu.first else { return }
        switch opcode {
        case 0x1B, 0x1D:  // Handle Value Notification / Indication
            guard pdu.count >= 3 else { return }
            let handle = UInt16(pdu[1]) | UInt16(pdu[2]) << 8
            guard let o = layout.object(handle: handle), o.kind == .characteristic else { return }
            if opcode == 0x1D { s.indicated = o.path }
            send(
                DBusMessage(
                    kind: .signal, path: o.path, interface: "org.freedesktop.DBus.Properties",
                    member: "PropertiesChanged",
                    body: [
                        .string(o.interface), .dictionary([("Value", .bytes(Array(pdu[3...])))]),
                        .array(element: "s", []),
                    ]))
        default:
            guard let r = s.inFlight else { return }
            s.inFlight = nil
            if let call = r.call {
                if opcode == 0x01, pdu.count >= 5 {
                    let (name, text) = Self.dbusError(ATTErrorCode(pdu[4]))
                    reply(.errorReply(to: call, name: name, text: text))
                } else {
                    reply(.methodReturn(to: call, body: r.returnsValue ? [.bytes(Array(pdu.dropFirst()))] : []))
                }
            }
            pump(s)
        }
    }

    /// The D-Bus error bluetoothd turns back into the same ATT error for the client.
    static func dbusError(_ code: ATTErrorCode) -> (String, String) {
        let name: String
        switch code {
        case .readNotPermitted, .writeNotPermitted: name = "org.bluez.Error.NotPermitted"
        case .insufficientAuthorization: name = "org.bluez.Error.NotAuthorized"
        case .invalidOffset: name = "org.bluez.Error.InvalidOffset"
        case .invalidAttributeValueLength: name = "org.bluez.Error.InvalidValueLength"
        case .requestNotSupported: name = "org.bluez.Error.NotSupported"
        case .procedureAlreadyInProgress: name = "org.bluez.Error.InProgress"
        default: name = "org.bluez.Error.Failed"
        }
        return (name, "0x" + String(code.rawValue, radix: 16, uppercase: false).leftPadded(2) + " \(code)")
    }

    /// Changes what is advertised (an Omron cuff's advertising data says whether it is in pairing
    /// mode and has data): bluetoothd follows the advertisement's PropertiesChanged and sends the
    /// new data to the controller.
    public func changeAdvertisement(name: String, serviceUUIDs16: [UInt16], manufacturerData: [UInt16: [UInt8]]) {
        let (changed, removed) = layout.changeAdvertisement(
            name: name, serviceUUIDs16: serviceUUIDs16, manufacturerData: manufacturerData)
        guard !changed.isEmpty || !removed.isEmpty else { return }
        send(
            DBusMessage(
                kind: .signal, path: layout.advertisementPath, interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                body: [
                    .string("org.bluez.LEAdvertisement1"), .dictionary(changed),
                    .array(element: "s", removed.map { .string($0) }),
                ]))
    }

    // MARK: - Calls on our objects

    func send(_ m: DBusMessage) {
        do { try connection.send(m) } catch { fail("D-Bus: \(error.message)") }
    }

    func reply(_ m: DBusMessage) { send(m) }

    func call(_ m: DBusMessage) {
        let path = m.path ?? "", member = m.member ?? ""
        func answer(_ r: DBusMessage) { if m.flags & DBusMessage.noReplyExpected == 0 { reply(r) } }
        func unknown() {
            answer(
                .errorReply(
                    to: m, name: "org.freedesktop.DBus.Error.UnknownMethod",
                    text: "\(m.interface ?? "").\(member) on \(path)"))
        }
        switch (m.interface ?? "", member) {
        case ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects") where path == layout.root:
            answer(.methodReturn(to: m, body: [layout.managedObjects]))
        case ("org.freedesktop.DBus.Properties", "GetAll"):
            guard case .string(let interface)? = m.body?.first,
                let p = layout.properties(path: path, interface: interface)
            else { return unknown() }
            answer(.methodReturn(to: m, body: [.dictionary(p)]))
        case ("org.freedesktop.DBus.Properties", "Get"):
            guard let b = m.body, b.count == 2, case .string(let interface) = b[0], case .string(let name) = b[1],
                let value = layout.properties(path: path, interface: interface)?.first(where: { $0.0 == name })?.1
            else { return unknown() }
            answer(.methodReturn(to: m, body: [.variant(value)]))
        case ("org.bluez.LEAdvertisement1", "Release") where path == layout.advertisementPath:
            log.info("bluetoothd released the advertisement")
            answer(.methodReturn(to: m))
        case ("org.bluez.GattCharacteristic1", _), ("org.bluez.GattDescriptor1", _):
            guard let o = layout.object(at: path), o.interface == m.interface else { return unknown() }
            gatt(m, member: member, object: o)
        default:
            unknown()
        }
    }

    /// ReadValue, WriteValue, StartNotify, StopNotify, Confirm.
    func gatt(_ m: DBusMessage, member: String, object o: BlueZGATTLayout.Object) {
        let body = m.body ?? []
        let options = body.last.flatMap { $0.signature == "a{sv}" ? $0 : nil }
        let device = options?["device"]?.stringValue
        let h = [UInt8(o.handle & 0xFF), UInt8(o.handle >> 8)]
        // bluetoothd stops notifying and confirms after a client left: nothing to tell the cuff.
        if session == nil, member == "StopNotify" || member == "Confirm" {
            if member == "Confirm" {
                // (Said: the cuff keeps that reading unconfirmed and sends it to the next client.)
                log.info("bluetoothd confirmed an indication of \(o.path) after the client's link ended")
            }
            if m.flags & DBusMessage.noReplyExpected == 0 { reply(.methodReturn(to: m)) }
            return
        }
        // The client: the one bluetoothd names, else the one connected now.
        var s = session
        if let device, device != s?.devicePath { s = beginSession(devicePath: device) }
        if s == nil { s = beginSession(devicePath: nil) }
        guard let s else {
            return reply(.errorReply(to: m, name: "org.bluez.Error.Failed", text: failure ?? "no connection"))
        }
        switch member {
        case "ReadValue":
            let offset = Self.offset(options)
            let pdu = offset == 0 ? [0x0A] + h : [0x0C] + h + [UInt8(offset & 0xFF), UInt8(offset >> 8)]
            enqueue(Request(call: m, pdu: pdu, returnsValue: true), in: s)
        case "WriteValue":
            guard let value = body.first?.bytesValue else {
                return reply(
                    .errorReply(
                        to: m, name: "org.freedesktop.DBus.Error.InvalidArgs", text: "WriteValue takes ay, a{sv}"))
            }
            let offset = Self.offset(options)
            guard offset == 0 else {
                return reply(.errorReply(to: m, name: "org.bluez.Error.NotSupported", text: "writes at an offset"))
            }
            let command = options?["type"]?.stringValue == "command"
            enqueue(Request(call: m, pdu: [command ? 0x52 : 0x12] + h + value, returnsValue: false), in: s)
        case "StartNotify", "StopNotify":
            guard o.kind == .characteristic, let sub = layout.subscriptions[o.handle] else {
                return reply(
                    .errorReply(
                        to: m, name: "org.bluez.Error.NotSupported", text: "\(path(o)) neither notifies nor indicates"))
            }
            let v = member == "StartNotify" ? sub.value : 0
            enqueue(
                Request(
                    call: m, pdu: [0x12, UInt8(sub.cccd & 0xFF), UInt8(sub.cccd >> 8), UInt8(v & 0xFF), UInt8(v >> 8)],
                    returnsValue: false), in: s)
        case "Confirm":
            if s.indicated == o.path {
                s.indicated = nil
                do { try s.bearer.send([0x1E]) } catch { endSession(why: error.message) }
            } else {
                log.info(
                    "bluetoothd confirmed an indication of \(o.path), but \(s.indicated.map { "one of \($0)" } ?? "none") is awaiting confirmation"
                )
            }
            if m.flags & DBusMessage.noReplyExpected == 0 { reply(.methodReturn(to: m)) }
        default:
            reply(.errorReply(to: m, name: "org.freedesktop.DBus.Error.UnknownMethod", text: member))
        }
    }

    func path(_ o: BlueZGATTLayout.Object) -> String { o.path }

    /// The `offset` option (`q`), 0 when absent.
    static func offset(_ options: DBusValue?) -> UInt16 {
        if case .uint16(let v)? = options?["offset"]?.unwrapped { return v }
        return 0
    }
}

extension String {
    func leftPadded(_ n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
