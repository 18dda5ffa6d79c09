// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import GATT

/// The peripheral's side of one connection in a capture: its attribute table as the central
/// discovered it (handles, properties, descriptors), the values it returned to reads, and what it
/// sent (notifications, indications) with their timing and the central's writes that came first.
/// ``CapturedCuffPeripheral`` serves it back.
public struct CapturedCuff: Sendable {
    /// A connection in the capture.
    public struct Connection: Sendable, Hashable {
        /// 1-based, in the order connections first carried ATT.
        public var number: Int
        public var adapter: UInt16
        public var handle: UInt16
        /// The peer, when a connection event named it.
        public var peer: String?
        public var services: Int
        public var hasBloodPressureService: Bool
        /// Notifications and indications the peripheral sent.
        public var pushes: Int
        /// Whether the connection can be served: a Blood Pressure Service, from its own discovery
        /// or an earlier one on the same controller.
        public var servable: Bool
        /// It had no discovery of its own and uses an earlier connection's (a GATT cache).
        public var inheritedDiscovery: Bool
    }

    /// Something the peripheral sent.
    public struct Push: Sendable, Hashable {
        public var handle: UInt16
        public var value: [UInt8]
        public var indication: Bool
        /// Capture time from the previous push or required write to this one (never negative).
        public var gap: Duration
        /// The handles the central had written before it was sent that it waits for: CCCDs and a
        /// Record Access Control Point.
        public var requires: Set<UInt16>
    }

    public var connection: Connection
    public var database: AttributeDatabase
    public var pushes: [Push]
    /// The peripheral dropped the link this long after its last push (a cuff that disconnects
    /// mid-measurement); nil when the central ended the connection or the capture just stops.
    public var dropAfter: Duration?
    /// Characteristic values and descriptors the capture never showed a value for (served empty).
    public var unknownValues: [UInt16]
    /// The device's name, from a Device Name read or the Device Information in the capture.
    public var name: String?
    /// Client Characteristic Configuration descriptors served although the captured central never
    /// discovered descriptors (it wrote them at a handle it knew, as GATT-cached clients do), each
    /// with what placed it there.
    public var inferredDescriptors: [InferredDescriptor] = []

    /// A descriptor the capture proves without showing it in a discovery.
    public struct InferredDescriptor: Sendable, Hashable {
        public var handle: UInt16
        public var valueHandle: UInt16
        /// What proves it: the central's write to it, or the notify/indicate property alone.
        public var written: Bool

        public var description: String {
            written
                ? "served a CCCD at \(Hex.handle(handle)) for \(Hex.handle(valueHandle)): the capture's central wrote a subscription there without discovering descriptors"
                : "served a CCCD at \(Hex.handle(handle)) for \(Hex.handle(valueHandle)): the characteristic notifies or indicates, so it has one (the capture shows no discovery of descriptors); placed right after its value"
        }
    }
}

/// Why a capture cannot be served.
public struct CapturedCuffError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

extension CapturedCuff {
    /// What one connection showed, gathered while reading the capture.
    struct Gathered {
        var number: Int
        var adapter: UInt16
        var handle: UInt16
        var peer: String?
        var observer = SessionObserver(configuration: CuffSessionConfiguration(address: "capture"))
        var reads: [UInt16: [UInt8]] = [:]
        var pendingRead: UInt16?
        var written: Set<UInt16> = []
        /// The last value the central wrote to each handle.
        var writes: [UInt16: [UInt8]] = [:]
        var pushes: [Push] = []
        var lastEvent: Timestamp?
        /// The local controller's role, when a connection event said.
        var localRole: ConnectionRole?
        var dropAfter: Duration?
        var sawDiscovery: Bool { !observer.services.isEmpty || !observer.characteristics.isEmpty }
    }

    /// Reads every connection of the capture at `path`.
    /// The capture's connections with ATT traffic; a fault in the capture ends the reading, and
    /// the connections before it come back with it.
    static func gather(path: String, format: CaptureFormat) throws(CaptureError) -> (
        all: [Gathered], fault: CaptureError?
    ) {
        var reader = try CaptureEventReader(path: path, format: format)
        var open: [UInt32: Int] = [:]
        var all: [Gathered] = []
        var peers: [UInt32: String] = [:]
        var roles: [UInt32: ConnectionRole] = [:]
        func key(_ a: UInt16, _ h: UInt16) -> UInt32 { UInt32(a) << 16 | UInt32(h) }
        while true {
            let event: CaptureEvent
            do {
                guard let e = try reader.next() else { break }
                event = e
            } catch {
                return (all, error)
            }
            switch event {
            case let .connected(info):
                peers[key(info.adapter, info.connectionHandle)] = info.peerAddress.description
                roles[key(info.adapter, info.connectionHandle)] = info.role
                open[key(info.adapter, info.connectionHandle)] = nil
            case let .disconnected(d):
                let k = key(d.adapter, d.connectionHandle)
                if let i = open[k] { all[i].ended(reason: d.reason, at: d.timestamp) }
                open[k] = nil
            case let .att(p):
                let k = key(p.adapter, p.connectionHandle)
                let i: Int
                if let known = open[k] {
                    i = known
                } else {
                    i = all.count
                    all.append(
                        Gathered(
                            number: all.count + 1, adapter: p.adapter, handle: p.connectionHandle, peer: peers[k],
                            localRole: roles[k]))
                    open[k] = i
                }
                all[i].take(p)
            case .warning:
                continue
            }
        }
        return (all, nil)
    }

    /// The connections in the capture at `path`, servable or not (`--list-sessions`), and the
    /// fault that ended the capture early, if one did (the connections are those before it).
    /// `overrides` (`--handle`) stands in for a discovery the capture lacks.
    public static func connections(
        path: String, format: CaptureFormat = .auto, overrides: [UInt16: CuffCharacteristic] = [:]
    ) throws(CaptureError) -> (connections: [Connection], fault: CaptureError?) {
        let (all, fault) = try gather(path: path, format: format)
        return (
            all.map { g in
                describe(g, inherited: g.sawDiscovery ? nil : earlierDiscovery(all, before: g), overrides: overrides)
            }, fault
        )
    }

    /// The peripheral of connection `number` (1-based), or of the first connection with a Blood
    /// Pressure Service.
    /// A connection with no discovery of its own or before it on the same controller is laid out
    /// from `overrides` (`--handle H=UUID`): each value at its handle, its declaration before it
    /// and, for a notifying or indicating one, its CCCD after it, in one Blood Pressure Service.
    public static func load(
        path: String, format: CaptureFormat = .auto, session number: Int? = nil,
        overrides: [UInt16: CuffCharacteristic] = [:]
    ) throws -> CapturedCuff {
        let (all, fault) = try gather(path: path, format: format)
        if let fault { throw fault }
        let candidates = all.map { g in (g, g.sawDiscovery ? nil : earlierDiscovery(all, before: g)) }
        let chosen: (Gathered, Gathered?)
        if let number {
            guard let c = candidates.first(where: { $0.0.number == number }) else {
                throw CapturedCuffError(
                    message:
                        "the capture has \(all.count) connection(s) with ATT traffic; there is no session \(number)")
            }
            chosen = c
        } else {
            guard let c = candidates.first(where: { describe($0.0, inherited: $0.1, overrides: overrides).servable })
            else {
                throw CapturedCuffError(
                    message: all.isEmpty
                        ? "the capture holds no ATT traffic: there is no peripheral to serve"
                        : "no connection in the capture shows a Blood Pressure Service (0x1810) in a discovery: nothing to serve (see --list-sessions; --handle H=UUID maps handles a capture without discovery used)"
                )
            }
            chosen = c
        }
        let connection = describe(chosen.0, inherited: chosen.1, overrides: overrides)
        guard connection.servable else {
            throw CapturedCuffError(
                message:
                    "session \(connection.number) shows no Blood Pressure Service (0x1810) in a discovery (its own or an earlier one): it cannot be served (--handle H=UUID maps handles)"
            )
        }
        let layout = chosen.1 ?? chosen.0
        if !layout.sawDiscovery {
            return build(
                chosen.0, layout: layout, connection: connection,
                database: synthesized(overrides, reads: chosen.0.reads))
        }
        return build(chosen.0, layout: layout, connection: connection)
    }

    /// The latest connection before `g` on the same controller that discovered services.
    static func earlierDiscovery(_ all: [Gathered], before g: Gathered) -> Gathered? {
        all.last { $0.number < g.number && $0.adapter == g.adapter && $0.sawDiscovery }
    }

    static func describe(_ g: Gathered, inherited: Gathered?, overrides: [UInt16: CuffCharacteristic] = [:])
        -> Connection
    {
        let layout = inherited ?? g
        let mapped =
            !layout.sawDiscovery
            && overrides.values.contains {
                [.bloodPressureMeasurement, .enhancedBloodPressureMeasurement].contains($0)
            }
        let bps = mapped || layout.observer.services.contains { $0.uuid == BluetoothUUID(BPSUUID.bloodPressureService) }
        return Connection(
            number: g.number, adapter: g.adapter, handle: g.handle, peer: g.peer,
            services: layout.observer.services.count,
            hasBloodPressureService: bps, pushes: g.pushes.count, servable: bps, inheritedDiscovery: inherited != nil)
    }

    /// A table from `--handle` mappings alone (see ``load(path:format:session:overrides:)``);
    /// a mapping whose declaration would overlap the one before it is left out.
    static func synthesized(_ overrides: [UInt16: CuffCharacteristic], reads: [UInt16: [UInt8]]) -> AttributeDatabase {
        var b = AttributeDatabase.Builder()
        let mapped = overrides.filter { $0.key >= 3 }.sorted { $0.key < $1.key }
        guard let first = mapped.first else { return b.build() }
        b.skip(to: first.key - 2)
        b.addService(BluetoothUUID(BPSUUID.bloodPressureService))
        var last = first.key - 2
        for (i, (h, c)) in mapped.enumerated() where h - 1 > last {
            guard
                let uuid = c.uuid16.map(BluetoothUUID.init) ?? (c == .cuffControl ? CuffCentral.controlPointUUID : nil)
            else { continue }
            let props = CharacteristicProperties(rawValue: SessionObserver.assumedProperties(c).rawValue)
            var perms: AttributePermissions = []
            if props.contains(.read) { perms.insert(.read) }
            if !props.isDisjoint(with: [.write, .writeWithoutResponse]) { perms.insert(.write) }
            let nextDeclaration = i + 1 < mapped.count ? mapped[i + 1].key - 1 : .max
            let cccd: [(handle: UInt16, uuid: BluetoothUUID, value: [UInt8])] =
                !props.isDisjoint(with: [.notify, .indicate]) && h + 1 < nextDeclaration
                ? [(h + 1, .clientCharacteristicConfiguration, [])] : []
            b.addCharacteristic(
                uuid, properties: props, permissions: perms, value: reads[h] ?? [], declarationHandle: h - 1,
                descriptors: cccd)
            last = cccd.isEmpty ? h : h + 1
        }
        b.endService(at: .max)
        return b.build()
    }

    /// The attribute table from `layout`'s discovery (or `database`), the values `g` (and
    /// `layout`) read, and `g`'s pushes.
    static func build(_ g: Gathered, layout: Gathered, connection: Connection, database given: AttributeDatabase? = nil)
        -> CapturedCuff
    {
        let reads = layout.reads.merging(g.reads) { _, new in new }
        let services = layout.observer.services.sorted { $0.handle < $1.handle }
        let chars = layout.observer.characteristics.sorted { $0.declarationHandle < $1.declarationHandle }
        let declarations = Set(chars.map(\.declarationHandle)).union(chars.map(\.valueHandle)).union(
            services.map(\.handle))
        let structural: Set<BluetoothUUID> = [.primaryService, .secondaryService, .include, .characteristic]
        let descriptors = layout.observer.descriptors.filter {
            !declarations.contains($0.key) && !structural.contains($0.value)
        }
        let writes = layout.writes.merging(g.writes) { _, new in new }
        var unknown: [UInt16] = []
        var inferred: [InferredDescriptor] = []
        var b = AttributeDatabase.Builder()
        var lastHandle: UInt16 = 0
        for s in services where s.handle > lastHandle {
            b.skip(to: s.handle)
            b.addService(s.uuid)
            lastHandle = s.handle
            let inService = chars.filter { $0.declarationHandle > s.handle && $0.declarationHandle <= s.endHandle }
            for (j, c) in inService.enumerated()
            where c.declarationHandle > lastHandle && c.valueHandle == c.declarationHandle &+ 1 {
                let upper =
                    j + 1 < inService.count
                    ? inService[j + 1].declarationHandle : (s.endHandle == .max ? .max : s.endHandle &+ 1)
                var own = descriptors.filter { $0.key > c.valueHandle && $0.key < upper }.sorted { $0.key < $1.key }
                if own.isEmpty,
                    let cccd = inferredCCCD(c.valueHandle, properties: c.properties, upper: upper, writes: writes)
                {
                    own = [(key: cccd.handle, value: .clientCharacteristicConfiguration)]
                    inferred.append(cccd)
                }
                var perms: AttributePermissions = []
                if c.properties.contains(.read) { perms.insert(.read) }
                if !c.properties.isDisjoint(with: [.write, .writeWithoutResponse]) { perms.insert(.write) }
                if c.properties.contains(.read), reads[c.valueHandle] == nil { unknown.append(c.valueHandle) }
                let h = b.addCharacteristic(
                    c.uuid, properties: c.properties, permissions: perms, value: reads[c.valueHandle] ?? [],
                    declarationHandle: c.declarationHandle,
                    descriptors: own.map { (handle: $0.key, uuid: $0.value, value: reads[$0.key] ?? []) })
                lastHandle = max(h.valueHandle, own.last?.key ?? h.valueHandle)
            }
            b.endService(at: max(s.endHandle, lastHandle))
            lastHandle = max(lastHandle, s.endHandle)
        }
        let db = given ?? b.build()
        // What a push waits for: the central's subscriptions (CCCD writes) and requests to a
        // Record Access Control Point, as the captured central made them. Other writes (a clock
        // set, a vendor command) do not hold anything back: another client may not make them.
        let gating = Set(db.characteristics.compactMap(\.cccdHandle))
            .union(
                db.characteristics.filter {
                    $0.uuid == BluetoothUUID(BPSCharacteristic.recordAccessControlPoint.rawValue)
                }.map(\.valueHandle))
        var pushes = g.pushes
        for i in pushes.indices { pushes[i].requires.formIntersection(gating) }
        let nameHandle = db.characteristic(.deviceName)?.valueHandle
        let name = nameHandle.flatMap { reads[$0] }.map { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return CapturedCuff(
            connection: connection, database: db, pushes: pushes, dropAfter: g.dropAfter, unknownValues: unknown,
            name: name,
            inferredDescriptors: given == nil ? inferred : [])
    }

    /// The CCCD of a notifying or indicating characteristic whose descriptors the capture never
    /// discovered (every such characteristic has one, Core Vol 3 Part G §3.3.3.3): where the
    /// captured central wrote a subscription value (2 bytes, 0–3) between the value and `upper`
    /// (the next declaration), else right after the value when that handle is free.
    static func inferredCCCD(
        _ valueHandle: UInt16, properties: CharacteristicProperties, upper: UInt16, writes: [UInt16: [UInt8]]
    ) -> InferredDescriptor? {
        guard !properties.isDisjoint(with: [.notify, .indicate]), valueHandle < .max, valueHandle + 1 < upper else {
            return nil
        }
        let subscription = writes.filter { h, v in
            h > valueHandle && h < upper && v.count == 2 && v[1] == 0 && v[0] <= 3
        }.keys.min()
        if let h = subscription { return InferredDescriptor(handle: h, valueHandle: valueHandle, written: true) }
        return InferredDescriptor(handle: valueHandle + 1, valueHandle: valueHandle, written: false)
    }
}

extension CapturedCuff.Gathered {
    /// The connection ended. The peripheral dropped it when a central's capture says the remote
    /// side ended it or the link timed out, or a peripheral's capture says the local host did.
    mutating func ended(reason: UInt8, at t: Timestamp) {
        // supervision timeout, remote user / low resources / power off
        let remoteOrLost: Set<UInt8> = [0x08, 0x13, 0x14, 0x15]
        let byPeripheral: Bool
        switch localRole {
        case .central?: byPeripheral = remoteOrLost.contains(reason)
        case .peripheral?: byPeripheral = reason == 0x16  // connection terminated by the local host
        default: byPeripheral = false
        }
        guard byPeripheral, let last = lastEvent else { return }
        dropAfter = .nanoseconds(max(0, min(Timestamp.difference(t.nanoseconds, last.nanoseconds), 60_000_000_000)))
    }

    /// One ATT PDU of this connection.
    mutating func take(_ p: ATTPacket) {
        guard let opcode = p.pdu.first else { return }
        let isClient = CaptureReplay.isClientOpcode(opcode)
        // Which side sent it: from the capture's direction and the local role when known. Only
        // the cuff's half of the conversation counts: the central's requests, the peripheral's
        // answers and pushes. A peripheral may run a GATT client of its own against the central
        // (bluetoothd does, right after connecting); that traffic is not the cuff's.
        let fromCentral: Bool
        switch (p.direction, localRole) {
        case (.fromLocal, .central?), (.toLocal, .peripheral?), (.centralToPeripheral, _): fromCentral = true
        case (.toLocal, .central?), (.fromLocal, .peripheral?), (.peripheralToCentral, _): fromCentral = false
        default: fromCentral = isClient ?? false
        }
        if let isClient, isClient != fromCentral { return }
        var ignored: [ReplayOutput] = []
        observer.pdu(p.pdu, fromCentral: fromCentral, at: SessionObserver.eventTime(p.timestamp), into: &ignored)
        guard let pdu = try? ATTPDU(parsing: p.pdu) else { return }
        func gap() -> Duration {
            defer { lastEvent = p.timestamp }
            guard let last = lastEvent else { return .zero }
            let d = Timestamp.difference(p.timestamp.nanoseconds, last.nanoseconds)
            return .nanoseconds(max(0, min(d, 60_000_000_000)))  // a capture's clock may jump: at most a minute
        }
        switch pdu {
        case let .readRequest(h), let .readBlobRequest(h, _):
            pendingRead = h
        case let .readResponse(v):
            if let h = pendingRead { reads[h] = v }
        case let .readBlobResponse(v):
            if let h = pendingRead { reads[h, default: []] += v }
        case let .writeRequest(h, v), let .writeCommand(h, v):
            written.insert(h)
            writes[h] = v
            _ = gap()
        case let .handleValueNotification(h, v):
            pushes.append(CapturedCuff.Push(handle: h, value: v, indication: false, gap: gap(), requires: written))
        case let .handleValueIndication(h, v):
            pushes.append(CapturedCuff.Push(handle: h, value: v, indication: true, gap: gap(), requires: written))
        default:
            break
        }
    }
}

/// A captured cuff served back: a GATT server with the captured attribute table that answers
/// discovery and reads as the device did, and sends what it sent, in order, each once the central
/// has made the writes (subscriptions, control-point requests) the captured central made before
/// it, after the captured gap (scaled by the driver's clock). Confirmations pace indications.
public struct CapturedCuffPeripheral: GATTPeripheral {
    public let captured: CapturedCuff
    public private(set) var server: GATTServer
    /// Play the pushes again from the start after the last (`--loop`).
    public var loop: Bool
    var next = 0
    var written: Set<UInt16> = []
    /// When the push at `next` may go (its requirements met, plus its gap).
    var due: Timestamp?
    /// When the current round of pushes began (`--loop`): the next round begins at least
    /// ``shortestRound`` after it.
    var roundStarted: Timestamp?
    var waitingNoted = false
    /// The pushes are done and the captured cuff dropped the link: `due` is when.
    var dropping = false
    /// A value longer than the client's ATT_MTU allows was sent cut on this connection (said once).
    var cutNoted = false
    /// The server's actions for one call, kept between calls (emptied, its capacity kept:
    /// ``ActionMachine``).
    var serverScratch = ActionBuffer<GATTServerAction>()
    public var database: AttributeDatabase { server.database }

    /// The shortest time a round of pushes takes when looping. A capture whose pushes carry no
    /// time between them (one clock reading for all, as some tools write) would otherwise be
    /// played again and again within one call, never returning.
    public static let shortestRound: Duration = .seconds(1)

    public init(_ captured: CapturedCuff, loop: Bool = false) {
        self.captured = captured
        self.loop = loop
        server = GATTServer(database: captured.database)
        // Whatever the captured central wrote to a CCCD, the captured cuff took (and the
        // properties of a database rebuilt from a capture may be guesses).
        server.refusesImproperSubscriptions = false
        server.enforcesWriteProperties = false
    }

    public var nextDeadline: Timestamp? { [server.nextDeadline, due].compactMap { $0 }.min() }

    public mutating func connected(now: Timestamp, client: String?, into out: inout [PeripheralOutput]) {
        server.reset()
        next = 0
        written = []
        due = nil
        roundStarted = nil
        waitingNoted = false
        dropping = false
        cutNoted = false
        if !captured.unknownValues.isEmpty {
            out.append(
                .log(
                    "the capture shows no value for \(captured.unknownValues.map(Hex.handle).joined(separator: ", ")); served empty"
                ))
        }
        for d in captured.inferredDescriptors { out.append(.log(d.description)) }
        schedule(now, &out)
    }

    public mutating func disconnected(now: Timestamp, into out: inout [PeripheralOutput]) {
        due = nil
    }

    public mutating func linkSecurityChanged(_ level: SecurityLevel) { server.linkSecurityChanged(level: level) }

    public mutating func buttonPressed(now: Timestamp, into out: inout [PeripheralOutput]) {}

    public mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [PeripheralOutput]) {
        serving({ $0.receive(pdu, now: now, into: &$1) }, now, &out)
    }

    public mutating func tick(now: Timestamp, into out: inout [PeripheralOutput]) {
        serving({ $0.tick(now: now, into: &$1) }, now, &out)
        if dropping, let d = due, now >= d {
            due = nil
            out.append(.disconnect("the captured cuff dropped the link here"))
            return
        }
        while let d = due, now >= d, next < captured.pushes.count {
            let p = captured.pushes[next]
            if next == 0 { roundStarted = now }
            next += 1
            due = nil
            // ATT sends at most ATT_MTU - 3 bytes of a value: a client that did not raise the MTU
            // as far as the captured central did gets the value cut, as from the real cuff. Said
            // once a connection, so the difference is not a silent one.
            if !cutNoted, p.value.count > Int(server.mtu) - 3 {
                cutNoted = true
                out.append(
                    .log(
                        "a captured value of \(p.value.count) bytes on \(Hex.handle(p.handle)) goes out cut to \(Int(server.mtu) - 3): this client's ATT_MTU is \(server.mtu) (exchange a larger one to get values whole)"
                    ))
            }
            if p.indication {
                serving({ $0.indicate(handle: p.handle, value: p.value, now: now, into: &$1) }, now, &out)
            } else {
                serving({ $0.notify(handle: p.handle, value: p.value, into: &$1) }, now, &out)
            }
            if next == captured.pushes.count && loop {
                next = 0
                out.append(.log("end of the captured session: playing it again (--loop)"))
            }
            schedule(now, &out)
        }
    }

    /// Calls the server with ``serverScratch`` (emptied; a nested call would get a new array) and
    /// runs what it asks for.
    mutating func serving(
        _ call: (inout GATTServer, inout [GATTServerAction]) -> Void, _ now: Timestamp,
        _ out: inout [PeripheralOutput]
    ) {
        var actions = serverScratch.take()
        call(&server, &actions)
        serverActions(actions, now, &out)
        serverScratch.giveBack(&actions)
    }

    /// Sets when the next push may go, if the central has made the writes it needs (or, after the
    /// last, when the captured peripheral dropped the link).
    mutating func schedule(_ now: Timestamp, _ out: inout [PeripheralOutput]) {
        guard due == nil else { return }
        guard next < captured.pushes.count else {
            if let d = captured.dropAfter, !dropping {
                dropping = true
                due = now + d
            }
            return
        }
        let p = captured.pushes[next]
        var missing = p.requires.subtracting(written)
        // And the client must have subscribed to it (a central with a bond may not have written
        // the CCCD in the capture, but a client meeting this cuff for the first time must).
        let sub = server.subscription(valueHandle: p.handle)
        if !(p.indication ? sub.indicate : sub.notify),
            let c = server.database.characteristic(valueHandle: p.handle)?.cccdHandle
        {
            missing.insert(c)
        }
        guard missing.isEmpty else {
            if !waitingNoted {
                waitingNoted = true
                out.append(
                    .log(
                        "waiting for the central to write \(missing.sorted().map(Hex.handle).joined(separator: ", ")), as the captured central did"
                    ))
            }
            return
        }
        waitingNoted = false
        due = now + p.gap
        if next == 0, let r = roundStarted, let d = due { due = max(d, r + Self.shortestRound) }
    }

    mutating func serverActions(_ actions: [GATTServerAction], _ now: Timestamp, _ out: inout [PeripheralOutput]) {
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .written(handle, _, _, _):
                // (The server has answered the write: no handle here defers its response.)
                written.insert(handle)
                schedule(now, &out)
            case let .subscriptionChanged(valueHandle, _, _, _):
                if let c = server.database.characteristic(valueHandle: valueHandle), let cccd = c.cccdHandle {
                    written.insert(cccd)
                }
                schedule(now, &out)
            case .indicationConfirmed:
                break
            case let .indicationTimedOut(handle):
                out.append(
                    .disconnect("the central did not confirm the indication of \(Hex.handle(handle)) within 30 s"))
            case let .dropped(handle, reason):
                out.append(.log("value for \(Hex.handle(handle)) not sent: \(reason.rawValue)"))
            case let .protocolViolation(why):
                out.append(.log("client protocol violation: \(why)"))
            }
        }
    }
}
