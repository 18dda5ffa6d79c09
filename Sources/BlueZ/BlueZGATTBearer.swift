// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffLogging
import GATT
import Glibc
import Logging
import Transport

/// An ``ATTBearer`` that talks to a cuff through bluetoothd (`org.bluez` on the system bus)
/// instead of an L2CAP socket: the backend for desktops, where bluetoothd owns the controllers,
/// keeps the bonds and attaches its own GATT client to bonded devices.
///
/// It presents ATT PDUs to the unchanged GATT client and session above it, so they run the same
/// state machine and produce the same records as over the raw L2CAP channel:
/// - after `Device1.Connect` and `ServicesResolved`, bluetoothd's object tree under the device
///   (`serviceXXXX/charYYYY/descZZZZ`, the names carry the handles) is mirrored into an
///   ``AttributeDatabase`` with the same handles, and a ``GATTServer`` over it answers the
///   discovery requests (Exchange MTU, Read By Group Type, Read By Type, Find Information);
/// - Read / Read Blob → `ReadValue`; Write Request / Command → `WriteValue` (type request /
///   command); a write to a CCCD → `StartNotify` / `StopNotify`;
/// - `PropertiesChanged(Value)` on a characteristic → Handle Value Notification, or Indication
///   when the client asked for indications. The client's Handle Value Confirmation is swallowed:
///   **bluetoothd has already confirmed the indication** before cuff sees it, so on this path
///   "stored before confirmed" is weaker than on the raw path;
/// - `Device1.Connected` turning false → the link closed.
///
/// For an event loop (``PollableBearer``) its descriptor is an epoll instance of its own watching
/// the D-Bus socket and a doorbell rung whenever answers are queued or whole D-Bus messages sit
/// in the buffer, so readiness means "``receiveNow()`` has something".
public final class BlueZGATTBearer: SteppedSecurityBearer {
    public let adapter: BluetoothAdapter
    public let peer: BluetoothAddress
    public var peerDescription: String { peer.type == .public ? peer.description : "\(peer)/random" }
    public let devicePath: String
    /// What happened while connecting, and while pairing (for the log).
    public var notes: [String] { connectNotes + pairingNotes.lines }
    private var connectNotes: [String] = []
    private let pairingNotes = LogRecorder()
    /// Warnings during the session (a value skipped): events, never values.
    private let warn: Logger

    private let bus: BlueZBus
    private var server: GATTServer
    private var outgoing: [[UInt8]] = []
    private var closedReason: String?
    private var isClosed = false
    private var weConnected = false
    /// Value handle → characteristic object path, and back.
    private var characteristicPaths: [UInt16: String] = [:]
    private var valueHandles: [String: UInt16] = [:]
    /// Descriptor handle → its path, UUID and characteristic's value handle.
    private var descriptors: [UInt16: (path: String, uuid: BluetoothUUID, valueHandle: UInt16)] = [:]
    /// Value handle → the CCCD value the client wrote (bit 0 notify, bit 1 indicate).
    private var subscriptions: [UInt16: UInt16] = [:]
    /// Values our own ReadValue put into bluetoothd's cache: their PropertiesChanged echo is not a
    /// notification.
    private var readEchoes: [UInt16: [UInt8]] = [:]
    /// Signals read while pairing, handled before new ones.
    private var stashed: [DBusMessage] = []
    /// The whole value of the last Read, for the Read Blobs that follow it.
    private var lastRead: (handle: UInt16, value: [UInt8])?

    /// The epoll instance the event loop watches, and the doorbell's two ends.
    private let epollFD: CInt
    private let bell: (CInt, CInt)
    private var rung = false

    init(
        bus: BlueZBus, adapter: BluetoothAdapter, peer: BluetoothAddress, database: AttributeDatabase,
        warn: Logger = .silent
    ) throws(TransportError) {
        self.bus = bus
        self.warn = warn
        self.adapter = adapter
        self.peer = peer
        devicePath = BlueZPaths.device(peer, on: adapter)
        server = GATTServer(database: database, preferredMTU: 517)
        let ep: CInt
        switch Sys.epollCreate() {
        case .success(let fd): ep = fd
        case .failure(let e): throw TransportError.system("epoll_create1", "bluetoothd bearer", e)
        }
        let pair: (CInt, CInt)
        switch Sys.socketpair(
            domain: AF_UNIX,
            type: CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_CLOEXEC.rawValue) | CInt(SOCK_NONBLOCK.rawValue))
        {
        case .success(let p): pair = p
        case .failure(let e):
            _ = Sys.close(ep)
            throw TransportError.system("socketpair", "bluetoothd bearer doorbell", e)
        }
        epollFD = ep
        bell = pair
        let epollIn: UInt32 = 0x001, add: CInt = 1
        for fd in [bus.connection.fd, pair.1] {
            if case .failure(let e) = Sys.epollControl(ep, add, fd, events: epollIn) {
                _ = Sys.close(ep)
                _ = Sys.close(pair.0)
                _ = Sys.close(pair.1)
                throw TransportError.system("epoll_ctl", "bluetoothd bearer", e)
            }
        }
    }

    /// Rings the doorbell while something is ready that the D-Bus socket's readiness won't show.
    private func updateBell() {
        // While pairing, the loop reads for the pairing only: what waits for the session must not
        // keep the descriptor readable.
        let want =
            pairing == nil
            && (!outgoing.isEmpty || !stashed.isEmpty || bus.connection.hasBufferedMessage
                || (closedReason != nil && !closedReported))
        if want && !rung {
            let one: [UInt8] = [1]
            _ = one.withUnsafeBytes { Sys.send(bell.0, $0, flags: CInt(MSG_NOSIGNAL)) }
            rung = true
        } else if !want && rung {
            var buffer = [UInt8](repeating: 0, count: 16)
            while case .success(let n) = buffer.withUnsafeMutableBytes({
                Sys.recv(bell.1, $0, flags: CInt(MSG_DONTWAIT))
            }), n > 0 {}
            rung = false
        }
    }

    private var closedReported = false

    public var fileDescriptor: CInt? { isClosed ? nil : epollFD }

    /// The next answer or event without waiting; nil when nothing is there.
    public func receiveNow() throws(TransportError) -> BearerEvent? {
        defer { updateBell() }
        if !outgoing.isEmpty { return .pdu(outgoing.removeFirst()) }
        if let closedReason {
            closedReported = true
            return .closed(closedReason)
        }
        // At most this many messages a call: a bus that keeps sending what concerns no link would
        // otherwise keep the event loop here (what is left rings the bell again).
        for _ in 0..<BlueZBus.drainBudget {
            let m: DBusMessage
            if !stashed.isEmpty {
                m = stashed.removeFirst()
            } else {
                guard let message = try bus.next(until: .now) else { return nil }
                m = message
            }
            if let event = event(for: m) {
                if case .closed = event { closedReported = true }
                return event
            }
        }
        return nil
    }

    /// Finds (discovering if bluetoothd does not know it yet), connects and resolves `peer`: the
    /// steps of ``BlueZConnectSteps``, taken one after another, waiting in between.
    ///
    /// `timeout` bounds the whole connect phase (discovery, Connect, service resolution together;
    /// nil: no limit), as `cuff measure --timeout` promises.
    ///
    /// - Throws: bluetoothd absent or refusing, the device not found within `timeout`, Connect
    ///   failing, the link dropping or services not resolved within `timeout`.
    public static func connect(
        adapter: BluetoothAdapter, to peer: BluetoothAddress, bus: BlueZBus, timeout: Duration? = .seconds(30),
        log: Logger = .silent
    ) throws(TransportError) -> BlueZGATTBearer {
        let deadline = ContinuousClock.now + (timeout ?? .seconds(365 * 86_400))
        let limit = timeout.map { "\($0)" } ?? "no limit"
        func left() -> Duration { max(.zero, deadline - .now) }
        let path = BlueZPaths.device(peer, on: adapter)
        try bus.addMatch("type='signal',sender='org.bluez',path_namespace='\(path)'")
        let objects = try bus.managedObjects()
        guard objects[BlueZPaths.adapter(adapter)]?["org.bluez.Adapter1"] != nil else {
            throw TransportError(
                .notConnected, "bluetoothd has no adapter \(adapter) (\(BlueZPaths.adapter(adapter)))", errno: ENODEV)
        }
        let device = objects[path]?["org.bluez.Device1"]
        var steps = BlueZConnectSteps(
            devicePath: path, known: device != nil, connected: device?["Connected"]?.boolValue == true)
        var step = steps.first()
        while true {
            switch step {
            case .discover:
                log.info("bluetoothd does not know \(peer) yet; discovering (LE) on \(adapter)")
                try BlueZDiscovery.find(peer, on: adapter, bus: bus, timeout: left(), log: log)
                let found = try bus.managedObjects()[path]?["org.bluez.Device1"]
                step = steps.found(connected: found?["Connected"]?.boolValue == true)
            case .connect:
                log.info("connecting through bluetoothd (org.bluez.Device1.Connect)")
                steps.connectSent(
                    serial: try bus.connection.send(
                        .call(
                            destination: BlueZBus.service, path: path, interface: "org.bluez.Device1", member: "Connect"
                        )
                    ))
                step = .wait
            case .checkResolved:
                if !steps.weConnected { log.info("\(peer) is connected already (bluetoothd); using that link") }
                steps.checkSent(
                    serial: try bus.connection.send(
                        .call(
                            destination: BlueZBus.service, path: path, interface: "org.freedesktop.DBus.Properties",
                            member: "Get", body: [.string("org.bluez.Device1"), .string("ServicesResolved")])))
                step = .wait
            case .wait:
                guard let m = try bus.next(before: deadline) else {
                    if case .connecting = steps.state {
                        _ = try? bus.connection.send(
                            .call(
                                destination: BlueZBus.service, path: path, interface: "org.bluez.Device1",
                                member: "Disconnect"))
                        throw TransportError(
                            .timedOut,
                            "bluetoothd did not connect to \(peer) on \(adapter) within \(limit) (--timeout)",
                            errno: ETIMEDOUT)
                    }
                    throw TransportError(
                        .timedOut,
                        "bluetoothd connected to \(peer) but did not resolve its services within \(limit) (--timeout)")
                }
                step = steps.receive(m)
            case .done:
                return try resolved(adapter: adapter, peer: peer, bus: bus, weConnected: steps.weConnected, log: log)
            case .fail(let why, _):
                guard let refusal = steps.connectError else {
                    throw TransportError(.notConnected, "\(peer) on \(adapter): \(why)")
                }
                var text = ""
                if case .string(let s)? = refusal.body?.first { text = ": " + s }
                throw TransportError(
                    .notConnected,
                    "bluetoothd could not connect to \(peer) on \(adapter): D-Bus Connect failed: \(refusal.errorName ?? "error")\(text)"
                )
            }
        }
    }

    /// The bearer for `peer`, connected and its services resolved by bluetoothd: mirrors the
    /// object tree (one `GetManagedObjects`) and takes over `bus`. `weConnected`: disconnect on
    /// ``close()``.
    public static func resolved(
        adapter: BluetoothAdapter, peer: BluetoothAddress, bus: BlueZBus, weConnected: Bool, log: Logger = .silent
    ) throws(TransportError) -> BlueZGATTBearer {
        let path = BlueZPaths.device(peer, on: adapter)
        let objects = try bus.managedObjects()
        let name = objects[path]?["org.bluez.Device1"]?["Name"]?.stringValue
        let (database, layout, notes) = mirror(objects, devicePath: path, deviceName: name)
        let bearer = try BlueZGATTBearer(bus: bus, adapter: adapter, peer: peer, database: database, warn: log)
        bearer.weConnected = weConnected
        bearer.connectNotes = notes
        for c in layout.characteristics {
            bearer.characteristicPaths[c.valueHandle] = c.path
            bearer.valueHandles[c.path] = c.valueHandle
        }
        for d in layout.descriptors { bearer.descriptors[d.handle] = (d.path, d.uuid, d.valueHandle) }
        return bearer
    }

    /// Where each characteristic and descriptor of the mirrored database lives on the bus.
    struct Layout {
        var characteristics: [(path: String, valueHandle: UInt16)] = []
        var descriptors: [(path: String, handle: UInt16, uuid: BluetoothUUID, valueHandle: UInt16)] = []
    }

    /// The handle in an object name's last component (`service000a` → 0x000A); nil otherwise.
    static func handle(_ path: Substring, prefix: String) -> UInt16? {
        guard path.hasPrefix(prefix) else { return nil }
        let hex = path.dropFirst(prefix.count)
        guard hex.count == 4, hex.allSatisfy(\.isHexDigit) else { return nil }
        return UInt16(hex, radix: 16)
    }

    static func properties(_ flags: [String]) -> CharacteristicProperties {
        var p: CharacteristicProperties = []
        for f in flags {
            switch f {
            case "broadcast": p.insert(.broadcast)
            case "read": p.insert(.read)
            case "write-without-response": p.insert(.writeWithoutResponse)
            case "write": p.insert(.write)
            case "notify": p.insert(.notify)
            case "indicate": p.insert(.indicate)
            case "authenticated-signed-writes": p.insert(.authenticatedSignedWrites)
            case "extended-properties": p.insert(.extendedProperties)
            default: break
            }
        }
        return p
    }

    /// Mirrors bluetoothd's GATT objects under `devicePath` into a database with the same handles
    /// (pure). Objects whose names or handles don't fit (out of order, overlapping) are skipped
    /// and named in the notes, never trusted to trap.
    ///
    /// bluetoothd keeps the Generic Access service (0x1800) to itself (not exported), but puts the
    /// Device Name it read there into `Device1.Name`: given as `deviceName`, a Generic Access
    /// service with that name takes handles 1–3 when they are free, so a session reads the same
    /// name as on the raw path.
    static func mirror(_ objects: [String: [String: DBusValue]], devicePath: String, deviceName: String? = nil) -> (
        AttributeDatabase, Layout, [String]
    ) {
        struct Char {
            var handle: UInt16; var path: String; var uuid: BluetoothUUID; var props: CharacteristicProperties;
            var descs: [(UInt16, String, BluetoothUUID)]
        }
        struct Service { var handle: UInt16; var uuid: BluetoothUUID; var primary: Bool; var chars: [Char] }
        var services: [String: Service] = [:]
        var notes: [String] = []
        let base = devicePath + "/"
        // A GATT object that cannot be mirrored is named with what was wrong with it, so a session
        // that then finds no Blood Pressure Service says why.
        func uuidOf(_ props: DBusValue, _ path: String, _ interface: String) -> BluetoothUUID? {
            guard let value = props["UUID"] else {
                notes.append("skipped \(path): \(interface) has no UUID (properties of type '\(props.signature)')")
                return nil
            }
            guard let u = value.stringValue.flatMap(BluetoothUUID.init) else {
                notes.append(
                    "skipped \(path): \(interface).UUID is a value of type '\(value.signature)', not a UUID string")
                return nil
            }
            return u
        }
        func named(_ h: UInt16?, _ path: String, _ prefix: String) -> UInt16? {
            if h == nil { notes.append("skipped \(path): its name does not carry a handle (\(prefix)XXXX)") }
            return h
        }
        for (path, interfaces) in objects where path.hasPrefix(base) {
            let parts = path.dropFirst(base.count).split(separator: "/")
            if parts.count == 1, let props = interfaces["org.bluez.GattService1"],
                let h = named(handle(parts[0], prefix: "service"), path, "service"),
                let uuid = uuidOf(props, path, "GattService1")
            {
                let old = services[path]?.chars ?? []
                services[path] = Service(
                    handle: h, uuid: uuid, primary: props["Primary"]?.boolValue ?? true, chars: old)
            }
        }
        for (path, interfaces) in objects where path.hasPrefix(base) {
            let parts = path.dropFirst(base.count).split(separator: "/")
            guard parts.count == 2, let props = interfaces["org.bluez.GattCharacteristic1"],
                let h = named(handle(parts[1], prefix: "char"), path, "char"),
                let uuid = uuidOf(props, path, "GattCharacteristic1")
            else { continue }
            let servicePath = base + parts[0]
            guard services[servicePath] != nil else { continue }
            var descs: [(UInt16, String, BluetoothUUID)] = []
            for (dpath, dinterfaces) in objects where dpath.hasPrefix(path + "/desc") {
                if let dprops = dinterfaces["org.bluez.GattDescriptor1"],
                    let dh = named(handle(dpath.dropFirst(path.count + 1), prefix: "desc"), dpath, "desc"),
                    let duuid = uuidOf(dprops, dpath, "GattDescriptor1")
                {
                    descs.append((dh, dpath, duuid))
                }
            }
            services[servicePath]!.chars.append(
                Char(
                    handle: h, path: path, uuid: uuid, props: properties(props["Flags"]?.stringsValue ?? []),
                    descs: descs.sorted { $0.0 < $1.0 }))
        }
        var b = AttributeDatabase.Builder()
        var layout = Layout()
        var next: UInt32 = 1  // the lowest handle the builder can still give
        let ordered = services.values.sorted { $0.handle < $1.handle }
        if let deviceName, !ordered.contains(where: { $0.uuid == .genericAccess }) {
            if let first = ordered.first?.handle, first < 4 {
                notes.append(
                    "no room below handle 0x\(String(first, radix: 16)) for the Generic Access service bluetoothd keeps: no device name"
                )
            } else {
                b.addService(.genericAccess)
                b.addCharacteristic(
                    .deviceName, properties: .read, permissions: .read, value: Array(deviceName.utf8.prefix(248)))
                if let first = ordered.first?.handle { b.endService(at: first - 1) }
                next = 4
            }
        }
        for (i, s) in ordered.enumerated() {
            guard UInt32(s.handle) >= next else {
                notes.append("skipped service \(s.uuid) at 0x\(String(s.handle, radix: 16)): overlaps"); continue
            }
            b.skip(to: s.handle)
            b.addService(s.uuid, primary: s.primary)
            next = UInt32(s.handle) + 1
            for c in s.chars.sorted(by: { $0.handle < $1.handle }) {
                guard UInt32(c.handle) >= next, c.handle < 0xFFFF else {
                    notes.append("skipped characteristic \(c.uuid) at 0x\(String(c.handle, radix: 16)): out of order")
                    continue
                }
                let descs = c.descs.filter { $0.0 > c.handle + 1 }
                b.addCharacteristic(
                    c.uuid, properties: c.props, permissions: .readWrite, declarationHandle: c.handle,
                    descriptors: descs.map { (handle: $0.0, uuid: $0.2, value: []) })
                next = UInt32(max(c.handle + 1, descs.last?.0 ?? 0)) + 1
                layout.characteristics.append((c.path, c.handle + 1))
                for d in descs { layout.descriptors.append((d.1, d.0, d.2, c.handle + 1)) }
            }
            let nextStart = i + 1 < ordered.count ? UInt32(ordered[i + 1].handle) : 0x10000
            if nextStart - 1 >= next - 1 { b.endService(at: UInt16(nextStart - 1)) }
        }
        return (b.build(), layout, notes)
    }

    // MARK: - ATTBearer

    public func send(_ pdu: [UInt8]) throws(TransportError) {
        guard !isClosed else {
            throw TransportError(.notConnected, "\(peerDescription) (bluetoothd): the bearer is closed")
        }
        defer { updateBell() }
        guard let parsed = try? ATTPDU(parsing: pdu) else { return answerLocally(pdu) }
        // Requests become D-Bus calls whose replies (read in receiveNow) become the responses:
        // the loop never waits for the cuff's radio.
        switch parsed {
        case .readRequest(let h) where characteristicPaths[h] != nil || descriptors[h] != nil:
            try read(h, offset: nil, request: .readRequest)
        case .readBlobRequest(let h, let offset) where characteristicPaths[h] != nil || descriptors[h] != nil:
            if let last = lastRead, last.handle == h {
                outgoing.append(blobResponse(last.value, offset: offset, handle: h))
            } else {
                try read(h, offset: offset, request: .readBlobRequest)
            }
        case .writeRequest(let h, let value) where characteristicPaths[h] != nil || descriptors[h] != nil:
            try write(h, value, request: true)
        case .writeCommand(let h, let value) where characteristicPaths[h] != nil:
            try write(h, value, request: false)
        case .handleValueConfirmation:
            break  // bluetoothd confirmed the indication itself when it arrived
        default:
            answerLocally(pdu)
        }
    }

    /// A D-Bus call under way for an ATT request, by serial.
    private enum Awaiting {
        case read(handle: UInt16, offset: UInt16?, request: ATTOpcode, characteristic: Bool)
        case write(handle: UInt16, request: ATTOpcode)
        /// StartNotify/StopNotify for a CCCD write; `old` is restored if it fails.
        case subscribe(valueHandle: UInt16, cccd: UInt16, old: UInt16, request: Bool)
        /// A Write Command: no response either way.
        case command

        /// The attribute the call is for (0 for a Write Command).
        var handle: UInt16 {
            switch self {
            case .read(let h, _, _, _), .write(let h, _): h
            case .subscribe(_, let cccd, _, _): cccd
            case .command: 0
            }
        }
    }
    private var awaiting: [UInt32: Awaiting] = [:]

    private func call(_ path: String, _ interface: String, _ member: String, _ body: [DBusValue] = [])
        throws(TransportError) -> UInt32
    {
        try bus.connection.send(
            .call(destination: BlueZBus.service, path: path, interface: interface, member: member, body: body))
    }

    /// Discovery and anything else the mirrored database answers.
    private func answerLocally(_ pdu: [UInt8]) {
        for action in server.receive(pdu, now: .zero) {
            if case .send(let bytes) = action { outgoing.append(bytes) }
        }
    }

    private func blobResponse(_ value: [UInt8], offset: UInt16, handle: UInt16) -> [UInt8] {
        guard Int(offset) <= value.count else {
            return ATTPDU.errorResponse(request: .readBlobRequest, handle: handle, error: .invalidOffset).bytes
        }
        return ATTPDU.readBlobResponse(value: Array(value[Int(offset)...].prefix(Int(server.mtu) - 1))).bytes
    }

    private func read(_ handle: UInt16, offset: UInt16?, request: ATTOpcode) throws(TransportError) {
        if let path = characteristicPaths[handle] {
            let serial = try call(path, "org.bluez.GattCharacteristic1", "ReadValue", [.dictionary([])])
            awaiting[serial] = .read(handle: handle, offset: offset, request: request, characteristic: true)
            return
        }
        guard let d = descriptors[handle] else { return }
        if d.uuid == .clientCharacteristicConfiguration {
            let v = subscriptions[d.valueHandle] ?? 0
            return answerRead([UInt8(v & 0xFF), UInt8(v >> 8)], handle: handle, offset: offset)
        }
        let serial = try call(d.path, "org.bluez.GattDescriptor1", "ReadValue", [.dictionary([])])
        awaiting[serial] = .read(handle: handle, offset: offset, request: request, characteristic: false)
    }

    private func answerRead(_ value: [UInt8], handle: UInt16, offset: UInt16?) {
        lastRead = (handle, value)
        if let offset {
            outgoing.append(blobResponse(value, offset: offset, handle: handle))
        } else {
            outgoing.append(ATTPDU.readResponse(value: Array(value.prefix(Int(server.mtu) - 1))).bytes)
        }
    }

    private func write(_ handle: UInt16, _ value: [UInt8], request: Bool) throws(TransportError) {
        let opcode: ATTOpcode = request ? .writeRequest : .writeCommand
        if let path = characteristicPaths[handle] {
            let serial = try call(
                path, "org.bluez.GattCharacteristic1", "WriteValue",
                [.bytes(value), .dictionary([("type", .string(request ? "request" : "command"))])])
            awaiting[serial] = request ? .write(handle: handle, request: opcode) : .command
            return
        }
        guard let d = descriptors[handle] else { return }
        if d.uuid == .clientCharacteristicConfiguration, let path = characteristicPaths[d.valueHandle] {
            let new = UInt16(value.first ?? 0) | UInt16(value.count > 1 ? value[1] : 0) << 8
            let old = subscriptions[d.valueHandle] ?? 0
            // Taken at once: a cuff indicates right after the subscription, maybe before
            // bluetoothd's reply to StartNotify reaches us.
            subscriptions[d.valueHandle] = new
            let member =
                new & 0x3 != 0 && old & 0x3 == 0 ? "StartNotify" : new & 0x3 == 0 && old & 0x3 != 0 ? "StopNotify" : nil
            guard let member else {
                if request { outgoing.append(ATTPDU.writeResponse.bytes) }
                return
            }
            let serial = try call(path, "org.bluez.GattCharacteristic1", member)
            awaiting[serial] = .subscribe(valueHandle: d.valueHandle, cccd: handle, old: old, request: request)
            return
        }
        let serial = try call(d.path, "org.bluez.GattDescriptor1", "WriteValue", [.bytes(value), .dictionary([])])
        awaiting[serial] = request ? .write(handle: handle, request: opcode) : .command
    }

    /// The ATT response to bluetoothd's reply to one of our calls.
    private func answer(_ m: DBusMessage, to what: Awaiting) {
        var failure: TransportError?
        if m.kind == .error {
            var text = ""
            if case .string(let s)? = m.body?.first { text = ": " + s }
            failure = TransportError(.systemCall, "\(m.errorName ?? "error")\(text)", remoteErrorName: m.errorName)
        } else if let bodyError = m.bodyError {
            warn.info(
                "bluetoothd: a reply for handle 0x\(Hex.digits(what.handle, 4)) could not be read (\(bodyError.description)): answered as an ATT error"
            )
            failure = TransportError(.systemCall, bodyError.description)
        }
        switch what {
        case .read(let h, let offset, let request, let characteristic):
            if let failure {
                outgoing.append(ATTPDU.errorResponse(request: request, handle: h, error: Self.attError(failure)).bytes)
                return
            }
            let value = m.body?.first?.bytesValue ?? []
            if characteristic, (subscriptions[h] ?? 0) & 0x3 != 0 { readEchoes[h] = value }
            answerRead(value, handle: h, offset: offset)
        case .write(let h, let request):
            if let failure {
                outgoing.append(ATTPDU.errorResponse(request: request, handle: h, error: Self.attError(failure)).bytes)
            } else {
                outgoing.append(ATTPDU.writeResponse.bytes)
            }
        case .subscribe(let valueHandle, let cccd, let old, let request):
            if let failure {
                subscriptions[valueHandle] = old
                if request {
                    outgoing.append(
                        ATTPDU.errorResponse(request: .writeRequest, handle: cccd, error: Self.attError(failure)).bytes)
                }
            } else if request {
                outgoing.append(ATTPDU.writeResponse.bytes)
            }
        case .command:
            break
        }
    }

    /// The ATT error in a bluetoothd error reply ("… ATT error: 0x80"), else a close match.
    static func attError(_ error: TransportError) -> ATTErrorCode {
        let m = error.message
        let marker = Array("ATT error: 0x".utf8)
        let bytes = Array(m.utf8)
        if bytes.count >= marker.count + 2 {
            for i in 0...(bytes.count - marker.count - 2) where Array(bytes[i..<(i + marker.count)]) == marker {
                let hex = String(decoding: bytes[(i + marker.count)..<(i + marker.count + 2)], as: UTF8.self)
                if let v = UInt8(hex, radix: 16) { return ATTErrorCode(v) }
            }
        }
        switch error.dbusError {
        case .notAuthorized?: return .insufficientAuthorization
        case .notPermitted?: return .writeNotPermitted
        case .invalidOffset?: return .invalidOffset
        case .notSupported?: return .requestNotSupported
        case .invalidValueLength?: return .invalidAttributeValueLength
        default: return .unlikelyError
        }
    }

    public func next(timeout: Duration?) throws(TransportError) -> BearerEvent {
        if !outgoing.isEmpty { return .pdu(outgoing.removeFirst()) }
        if let closedReason { return .closed(closedReason) }
        // Short slices: the D-Bus wait retries on EINTR, and the driver checks signals between.
        let slice: Duration = min(timeout ?? .milliseconds(200), .milliseconds(200))
        let deadline = ContinuousClock.now + slice
        while true {
            let m: DBusMessage
            if !stashed.isEmpty {
                m = stashed.removeFirst()
            } else {
                guard let message = try bus.next(before: deadline) else { return .timeout }
                m = message
            }
            if let event = event(for: m) { return event }
        }
    }

    /// What a message from bluetoothd means for the link, if anything.
    private func event(for m: DBusMessage) -> BearerEvent? {
        if m.kind == .methodReturn || m.kind == .error {
            guard let serial = m.replySerial, let what = awaiting.removeValue(forKey: serial) else { return nil }
            answer(m, to: what)
            return outgoing.isEmpty ? nil : .pdu(outgoing.removeFirst())
        }
        guard m.kind == .signal, m.interface == "org.freedesktop.DBus.Properties", m.member == "PropertiesChanged",
            let path = m.path
        else { return nil }
        guard let body = m.body else {
            // One unreadable message is skipped, not the end of the session: the next value counts.
            if let h = valueHandles[path], (subscriptions[h] ?? 0) & 0x3 != 0 {
                warn.info(
                    "bluetoothd: skipped a change of characteristic 0x\(Hex.digits(h, 4)) that could not be read (\(m.bodyError?.description ?? "no body"))"
                )
            } else if path == devicePath {
                warn.info(
                    "bluetoothd: skipped a change of \(peer) that could not be read (\(m.bodyError?.description ?? "no body"))"
                )
            }
            return nil
        }
        guard body.count >= 2, case .string(let interface) = body[0] else { return nil }
        let changed = body[1]
        if path == devicePath, interface == "org.bluez.Device1", changed["Connected"]?.boolValue == false {
            closedReason = "bluetoothd: \(peer) disconnected"
            return .closed(closedReason)
        }
        if interface == "org.bluez.GattCharacteristic1", let h = valueHandles[path], let property = changed["Value"] {
            // bluetoothd also updates Value after a ReadValue: only subscribed values are
            // notifications, and the echo of our own read is not one.
            let wanted = subscriptions[h] ?? 0
            guard wanted & 0x3 != 0 else { return nil }
            guard let value = property.bytesValue else {
                warn.info(
                    "bluetoothd: skipped a value of characteristic 0x\(Hex.digits(h, 4)) of type '\(property.signature)', not a byte array (ay)"
                )
                return nil
            }
            // One ATT PDU carries at most ATT_MTU - 3 value bytes: no cuff can have sent more.
            guard value.count <= Int(server.mtu) - 3 else {
                warn.info(
                    "bluetoothd: skipped a \(value.count)-byte value of characteristic 0x\(Hex.digits(h, 4)): longer than one notification holds (ATT_MTU \(server.mtu) - 3)"
                )
                return nil
            }
            if let echo = readEchoes[h] {
                readEchoes[h] = nil
                if echo == value { return nil }
            }
            let indicate = wanted & 0x2 != 0 && wanted & 0x1 == 0
            return .pdu(
                indicate
                    ? ATTPDU.handleValueIndication(handle: h, value: value).bytes
                    : ATTPDU.handleValueNotification(handle: h, value: value).bytes)
        }
        return nil
    }

    /// Raises security by bonding through bluetoothd (`Device1.Pair`, cuff's agent for this
    /// device only) when the device is not bonded; bluetoothd encrypts bonded links itself when
    /// an attribute needs it. Blocking; an event loop uses the stepped form instead.
    public func raiseSecurity(to level: SecurityLevel) throws(TransportError) {
        guard level > .low, securityLevel < level else { return }
        var during: [DBusMessage] = []
        defer {
            stashed += during
            updateBell()
        }
        _ = try BlueZPairing.pair(peer, on: adapter, bus: bus, log: pairingNotes.logger(), other: { during.append($0) })
    }

    /// The pairing under way for the stepped raise.
    private var pairing: BlueZPairingAttempt?

    public var securityTimeout: Duration { .seconds(40) }
    public var securityWaitIsReadable: Bool { true }

    public func beginRaisingSecurity(to level: SecurityLevel, lastTry: Bool) throws(TransportError) -> SecurityProgress
    {
        guard level > .low, securityLevel < level else { return .done }
        guard pairing == nil else { return .pending }
        try bus.addMatch(
            "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',path='\(devicePath)'")
        pairing = try BlueZPairingAttempt(peer, on: adapter, bus: bus, log: pairingNotes.logger())
        updateBell()
        return .pending
    }

    /// Reads what bluetoothd sent: the pairing's reply, `Paired`, the agent's questions (answered);
    /// anything else waits for the session (``receiveNow()``).
    public func securityProgressed() throws(TransportError) -> Bool {
        guard let attempt = pairing else { return true }
        var done = false
        defer { updateBell() }
        do {
            while !done, let m = try bus.next(until: .now) {
                done = try attempt.handle(m) { stashed.append($0) }
            }
        } catch {
            pairing = nil
            attempt.end()
            throw error
        }
        if done {
            pairing = nil
            attempt.end()
        }
        return done
    }

    public func finishRaisingSecurity(to level: SecurityLevel, timedOut: Bool) throws(TransportError) {
        if let attempt = pairing {
            pairing = nil
            attempt.end()
            updateBell()
            if timedOut {
                throw TransportError(
                    .timedOut, "bluetoothd did not pair \(peerDescription) within \(securityTimeout)", errno: ETIMEDOUT)
            }
        }
        guard securityLevel >= level else {
            throw TransportError(
                .securityRefused, "\(peerDescription) (bluetoothd): the link is not paired after the pairing")
        }
    }

    /// `.medium` once bluetoothd holds a bond for the device (it encrypts with it), else `.low`.
    public var securityLevel: SecurityLevel {
        (try? bus.property(devicePath, "org.bluez.Device1", "Paired"))??.boolValue == true ? .medium : .low
    }

    /// Stops notifications and, if this bearer made the connection, disconnects. Idempotent.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        if closedReason == nil {
            // Sent without waiting for the replies (closing must not stall an event loop);
            // bluetoothd also ends our notification sessions itself when we leave the bus.
            for (h, v) in subscriptions where v & 0x3 != 0 {
                if let path = characteristicPaths[h] {
                    _ = try? call(path, "org.bluez.GattCharacteristic1", "StopNotify")
                }
            }
            if weConnected { _ = try? call(devicePath, "org.bluez.Device1", "Disconnect") }
        }
        bus.close()
        _ = Sys.close(epollFD)
        _ = Sys.close(bell.0)
        _ = Sys.close(bell.1)
    }
}

/// cuff's part in bluetoothd's discovery on one adapter.
///
/// When the adapter is discovering already (a desktop's Bluetooth settings, another tool), cuff
/// follows that discovery's results and starts no session of its own: bluetoothd's bookkeeping of
/// several clients is fragile (5.66 answers a StartDiscovery whose filter equals the running one
/// without clearing that client's pending state; after our StopDiscovery the other client is not
/// freed, and when our bus connection closes bluetoothd stops discovery for everyone). Only when
/// nobody discovers does cuff run its own session (`SetDiscoveryFilter` + `StartDiscovery`), and
/// ``end(_:)`` stops only that.
struct BlueZDiscoveryParticipation {
    let adapterPath: String
    let filter: [(String, DBusValue)]
    /// Whether the session running is ours (started here, stopped at the end).
    private(set) var own = false

    /// Joins the discovery on `adapterPath`: follows a running one, else starts ours.
    init(
        adapterPath: String, filter: [(String, DBusValue)], objects: [String: [String: DBusValue]], bus: BlueZBus,
        log: Logger
    ) throws(TransportError) {
        self.adapterPath = adapterPath
        self.filter = filter
        if Self.discovering(objects, adapterPath) {
            log.info(
                "\(adapterPath) is discovering already (another program's session): following its results, starting no session of cuff's own"
            )
        } else {
            try start(bus)
        }
    }

    static func discovering(_ objects: [String: [String: DBusValue]], _ adapterPath: String) -> Bool {
        objects[adapterPath]?["org.bluez.Adapter1"]?["Discovering"]?.boolValue == true
    }

    private mutating func start(_ bus: BlueZBus) throws(TransportError) {
        try bus.call(adapterPath, "org.bluez.Adapter1", "SetDiscoveryFilter", [.dictionary(filter)])
        try bus.call(adapterPath, "org.bluez.Adapter1", "StartDiscovery")
        own = true
    }

    /// While following: when the other discovery has ended, starts ours.
    mutating func check(_ objects: [String: [String: DBusValue]], bus: BlueZBus, log: Logger) throws(TransportError) {
        guard !own, !Self.discovering(objects, adapterPath) else { return }
        log.info("the other discovery on \(adapterPath) has ended: starting cuff's own")
        try start(bus)
    }

    /// Stops our session, if we started one; a followed discovery goes on.
    func end(_ bus: BlueZBus) {
        if own { _ = try? bus.call(adapterPath, "org.bluez.Adapter1", "StopDiscovery", timeout: .seconds(2)) }
    }
}

/// bluetoothd discovery for cuff: follows a discovery that runs already, or runs its own session
/// (``BlueZDiscoveryParticipation``).
public enum BlueZDiscovery {
    /// Discovers until bluetoothd knows `device` (a Device1 object), at most `timeout`.
    public static func find(
        _ device: BluetoothAddress, on adapter: BluetoothAdapter, bus: BlueZBus, timeout: Duration,
        log: Logger = .silent
    ) throws(TransportError) {
        let adapterPath = BlueZPaths.adapter(adapter)
        let path = BlueZPaths.device(device, on: adapter)
        var objects = try bus.managedObjects()
        var discovery = try BlueZDiscoveryParticipation(
            adapterPath: adapterPath, filter: [("Transport", .string("le"))], objects: objects, bus: bus, log: log)
        defer { discovery.end(bus) }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if objects[path]?["org.bluez.Device1"] != nil { return }
            try discovery.check(objects, bus: bus, log: log)
            _ = try bus.next(until: min(deadline, .now + .milliseconds(500)))
            objects = try bus.managedObjects()
        }
        throw TransportError(
            .timedOut,
            "bluetoothd discovery on \(adapter) did not find \(device) within \(timeout): is the cuff advertising?",
            errno: ETIMEDOUT)
    }
}

extension BlueZDiscovery {
    /// An advertising report rebuilt from what bluetoothd caches about a device (`Device1`:
    /// AdvertisingFlags, Name, UUIDs, ManufacturerData, ServiceData, TxPower, RSSI), so the scan
    /// prints the same fields on both backends. The AD bytes are in a fixed order (flags, 16-bit
    /// UUIDs, name, TX power, manufacturer data, 16-bit service data), not the device's own; the
    /// kind is `adv_ind`. nil without an address, and for a paired device not heard in this
    /// discovery (no RSSI).
    ///
    /// bluetoothd hands over values of any length; one AD structure holds 254 bytes. A UUID list
    /// longer than that becomes several lists (nothing lost); a longer manufacturer or service
    /// data value, which no single advertisement can have carried, is cut to fit and the report
    /// marked ``AdvertisingReport/truncated``.
    public static func report(_ device: DBusValue) -> AdvertisingReport? {
        guard let text = device["Address"]?.stringValue else { return nil }
        let rssi: Int16? = device["RSSI"].flatMap { v -> Int16? in
            if case .int16(let n) = v { return n }
            return nil
        }
        // Not heard in this discovery: still a device bluetoothd saw within its temporary-device
        // timeout (30 s by default) when it keeps no bond for it; a paired device's object stays
        // forever, so it counts only when heard now.
        guard rssi != nil || device["Paired"]?.boolValue == false else { return nil }
        let type: BluetoothAddress.AddressType = device["AddressType"]?.stringValue == "random" ? .random : .public
        guard let address = BluetoothAddress(text, type: type) else { return nil }
        var ad: [ADStructure] = []
        var truncated = false
        /// One structure of `head` + `value`, the value cut to what fits.
        func add(_ type: UInt8, _ head: [UInt8], _ value: [UInt8]) {
            let room = ADStructure.maxDataBytes - head.count
            if value.count > room { truncated = true }
            ad.append(ADStructure(type: type, data: head + value.prefix(room)))
        }
        if let flags = device["AdvertisingFlags"]?.bytesValue, !flags.isEmpty { add(0x01, [], flags) }
        var uuids: [UInt8] = []
        for u in device["UUIDs"]?.stringsValue ?? [] {
            if let v = BluetoothUUID(u)?.uuid16 { uuids += [UInt8(v & 0xFF), UInt8(v >> 8)] }
        }
        // 127 UUIDs per list.
        for start in stride(from: 0, to: uuids.count, by: ADStructure.maxDataBytes) {
            ad.append(
                ADStructure(type: 0x03, data: Array(uuids[start..<min(uuids.count, start + ADStructure.maxDataBytes)])))
        }
        if let name = device["Name"]?.stringValue {
            ad.append(ADStructure(type: 0x09, data: Array(name.utf8.prefix(29))))
        }
        if case .int16(let p)? = device["TxPower"] {
            ad.append(ADStructure(type: 0x0A, data: [UInt8(bitPattern: Int8(clamping: p))]))
        }
        if case .array(_, let items)? = device["ManufacturerData"] {
            for case .dictEntry(.uint16(let company), let v) in items {
                if let bytes = v.unwrapped.bytesValue {
                    add(0xFF, [UInt8(company & 0xFF), UInt8(company >> 8)], bytes)
                }
            }
        }
        for (uuid, value) in device["ServiceData"]?.entries ?? [] {
            if let v = BluetoothUUID(uuid)?.uuid16, let bytes = value.unwrapped.bytesValue {
                add(0x16, [UInt8(v & 0xFF), UInt8(v >> 8)], bytes)
            }
        }
        let data = ad.flatMap(\.encoded)
        // 127: "not available", as the raw path reads it from HCI.
        var r = AdvertisingReport(
            address: address, kind: .advInd, connectable: true,
            rssi: rssi.flatMap { $0 == 127 ? nil : Int8(clamping: $0) }, data: data)
        r.truncated = truncated
        return r
    }

    /// Discovers on `adapter` for `duration` and calls `found` for every device bluetoothd
    /// reports (again whenever its data changes). Follows a discovery another program runs
    /// already, else runs our own LE session and stops only that at the end
    /// (``BlueZDiscoveryParticipation``). Never touches the controller directly, so other
    /// clients' discovery goes on.
    public static func scan(
        adapter: BluetoothAdapter, bus: BlueZBus, duration: Duration, uuids: [String] = [], stop: () -> Bool,
        log: Logger = .silent, found: (AdvertisingReport) throws -> Void
    ) throws {
        let adapterPath = BlueZPaths.adapter(adapter)
        try bus.addMatch("type='signal',sender='org.bluez',path_namespace='\(adapterPath)'")
        var filter: [(String, DBusValue)] = [("Transport", .string("le"))]
        if !uuids.isEmpty { filter.append(("UUIDs", .array(element: "s", uuids.map(DBusValue.string)))) }
        var discovery = try BlueZDiscoveryParticipation(
            adapterPath: adapterPath, filter: filter, objects: try bus.managedObjects(), bus: bus, log: log)
        defer { discovery.end(bus) }
        let deadline = ContinuousClock.now + duration
        var last: [String: AdvertisingReport] = [:]
        func check(_ path: String, _ device: DBusValue) throws {
            guard path.hasPrefix(adapterPath + "/dev_"), let r = report(device) else { return }
            if let old = last[path], old.data == r.data { return }
            last[path] = r
            try found(r)
        }
        while ContinuousClock.now < deadline, !stop() {
            let objects = try bus.managedObjects()
            for (path, interfaces) in objects {
                if let d = interfaces["org.bluez.Device1"] { try check(path, d) }
            }
            try discovery.check(objects, bus: bus, log: log)
            _ = try bus.next(until: min(deadline, .now + .milliseconds(500)))
            // (Changes show in the next GetManagedObjects; a bus that keeps sending ends the drain.)
            for _ in 0..<BlueZBus.drainBudget { if try bus.next(until: .now) == nil { break } }
        }
    }
}
