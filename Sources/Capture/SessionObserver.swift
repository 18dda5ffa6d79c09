// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import CuffCore
import CuffSession
import GATT

/// Follows one connection's ATT traffic as a third party and drives the same
/// ``CuffSessionMachine`` a live `cuff measure` session uses, in observer mode.
///
/// Pure: feed the PDUs of one connection (with which side sent them) and its end, in capture
/// order, with the capture's time; collect the machine's `.emit` outputs and logs. The machine's
/// own requests are ignored: the capture already holds what the real client did.
///
/// - Requests are paired with responses (one outstanding request at a time, as ATT allows):
///   Exchange MTU; Read By Group Type (primary services), Read By Type 0x2803 (characteristics)
///   and Find Information (descriptors, CCCDs) build the handle → UUID map; Read (and Read Blob)
///   responses become `.readCompleted`, Write Responses `.writeCompleted` or, on a CCCD,
///   `.subscribed`; Error Responses `.requestFailed`.
/// - Discovery is reported (`.discovered`) at the time of the last discovery response, just before
///   the first PDU that is not part of discovery.
/// - `overrides` (`--handle 0x0012=2a35`) name value handles a capture without discovery (a bonded
///   reconnect) does not; they also win over what discovery found.
/// - `inherited`: what discovery on an earlier connection to the same cuff showed (a bonded
///   central reconnects with its GATT cache and discovers nothing). Used only when this
///   connection shows no discovery of its own; the observer then says so with a `.notice`.
/// - Deadlines (settle, stored-record burst) are ticked from the capture's clock by the caller
///   through ``advance(to:into:)``.
public struct SessionObserver: Sendable {
    public typealias Output = ReplayOutput

    public private(set) var machine: CuffSessionMachine
    let overrides: [UInt16: CuffCharacteristic]
    /// An earlier connection's discovery, and the line that says it is used (taken out when
    /// used: ``inheritedValues`` keeps what is read afterwards).
    private(set) var inherited: (handles: DiscoveredHandles, notice: @Sendable () -> String)?
    /// True once a PDU needed the handle map while this connection had shown no discovery and had
    /// no earlier one to use (with or without `--handle`).
    public private(set) var lackedDiscovery = false
    /// An indication that came before this connection's handles were known (no discovery over
    /// yet, no earlier connection's map): held as the live central holds it (``CuffCentral``),
    /// and run once the map is known, or when the link goes down (probe O: the replay dropped
    /// a reading the live session printed).
    var heldEarly: (handle: UInt16, value: [UInt8])?
    /// True when this connection used ``inherited``.
    public private(set) var usedInherited = false
    /// Set when discovery showed a database another registered protocol fits better: that
    /// protocol's observer follows the rest of the connection (``CaptureReplay`` hands it over).
    public private(set) var handOver: (protocolID: CuffProtocolID, profile: GATTProfile)? {
        didSet { handsOver = handOver != nil }
    }
    /// ``handOver`` is set (a flag the replay reads after every PDU, cheaper than the optional).
    public private(set) var handsOver = false
    /// ATT requests the central was seen sending (the end record's `att_requests`).
    public private(set) var attRequests = 0
    /// ``attRequests`` when the first reading arrived.
    var requestsBeforeReading: Int?

    // ATT state
    var clientMTU: UInt16 = 23
    var serverMTU: UInt16 = 23
    var mtu: Int { Int(max(23, min(clientMTU, serverMTU))) }
    var outstanding: ATTPDU?
    var lastWrite: (handle: UInt16, value: [UInt8])?
    var partialRead: (handle: UInt16, value: [UInt8], at: EventTime)?
    /// The values this connection was seen reading (what a later connection that inherits its
    /// discovery also inherits, as a central's GATT cache keeps them), by
    /// ``CuffCharacteristic/ordinal``: empty until the first. (A table, the shape
    /// ``DiscoveredHandles`` keeps: a dictionary, hashed and regrown three times a session, about
    /// 2,500 instructions under callgrind, only to be made this table at the end.)
    var readValues: [[UInt8]?] = []
    /// While set (a connection using ``inherited``), a read the session asks for is answered with
    /// the earlier connection's value, at this time, as the central answered it from its cache.
    var answeringInheritedReadsAt: EventTime?
    /// The values of ``inherited``, by ``CuffCharacteristic/ordinal`` (set with ``answeringInheritedReadsAt``).
    var inheritedValues: [[UInt8]?] = []

    // Discovery
    var services: [GATTProfile.Service] = []
    var characteristics: [GATTProfile.Characteristic] = []
    var descriptors: [UInt16: BluetoothUUID] = [:]
    var sawDiscovery = false
    var lastDiscoveryAt: EventTime?
    var reported = false
    var byHandle = HandleTable()
    var cccdOwner = HandleTable()
    /// The general path's copy of a PDU (its storage is reused from PDU to PDU).
    var scratch: [UInt8] = []
    /// The machine's actions for the event at hand (reused).
    var actions: [CuffSessionMachine.Action] = []
    /// One-entry cache of ``characteristic(_:)``: valid while `byHandle` doesn't change.
    var lastHandle: UInt16?
    var lastCharacteristic: CuffCharacteristic?

    /// Mappings made on earlier connections (``report(_:_:)`` reuses one made from the same
    /// discovery), and the one this connection made when none fitted.
    var knownMappings: [Mapping] = []
    public private(set) var madeMapping: Mapping?

    /// What ``report(_:_:)`` makes of one discovery (with the same overrides). A replay hands the
    /// last few to each new connection: a cuff shows the same attribute table on every
    /// connection, and mapping it again is most of what a short session costs.
    public struct Mapping: Sendable {
        let services: [GATTProfile.Service]
        let characteristics: [GATTProfile.Characteristic]
        let descriptors: [UInt16: BluetoothUUID]
        let overrides: [UInt16: CuffCharacteristic]
        let profile: CuffProfile
        let byHandle: HandleTable
        let cccdOwner: HandleTable

        /// True when it was made from this discovery and these overrides.
        func fits(_ o: SessionObserver) -> Bool {
            services == o.services && characteristics == o.characteristics && descriptors == o.descriptors
                && overrides == o.overrides
        }
    }

    /// Value handles that carried notifications or indications no discovery or override maps
    /// (reported for a connection with no map, or one that used an earlier connection's: values
    /// on handles that map does not cover say it may not be this cuff's table).
    public private(set) var unmappedHandles: [UInt16: CaptureReplay.Unmapped.Counts] = [:]
    /// True once the handle → characteristic map is known (discovery or overrides).
    public var isMapped: Bool { reported && machine.profile != nil }
    // (Always inlined: a call on an observer held in a class field, as the replay's are, would
    // first copy the whole observer.)
    @inline(__always) public var deadline: Timestamp? { machine.isFinished ? nil : machine.nextDeadline }
    public var isFinished: Bool { machine.isFinished }

    public init(
        configuration: CuffSessionConfiguration, overrides: [UInt16: CuffCharacteristic] = [:],
        inherited: (handles: DiscoveredHandles, notice: String)? = nil
    ) {
        self.init(
            configuration: configuration, overrides: overrides,
            inherited: inherited.map { i in (i.handles, { i.notice }) })
    }

    /// - Parameter inherited: the notice is built only if the handles are used (most connections
    ///   discover their own).
    public init(
        configuration: CuffSessionConfiguration, overrides: [UInt16: CuffCharacteristic] = [:],
        inherited: (handles: DiscoveredHandles, notice: @Sendable () -> String)?, mappings: [Mapping] = []
    ) {
        var c = configuration
        c.observer = true
        machine = CuffSessionMachine(configuration: c)
        self.overrides = overrides
        self.inherited = inherited
        knownMappings = mappings
        actions.reserveCapacity(16)  // (once, not grown step by step in every session)
    }

    /// Readies a copy of a fresh observer (one no event reached yet, made with no inherited
    /// handles or mappings) for its own connection: as if made with `inherited` and `mappings`.
    mutating func begin(
        inherited: consuming (handles: DiscoveredHandles, notice: @Sendable () -> String)?, mappings: [Mapping],
        quirkMemo: QuirkProfile.Memo, spareActions: inout [CuffSessionMachine.Action]
    ) {
        self.inherited = inherited
        knownMappings = mappings
        machine.quirkMemo = quirkMemo
        // The action array of a session that ended (emptied, its storage kept), for this one's
        // own: the template's storage is shared, and a new one for every session cost an
        // allocation and its release.
        swap(&actions, &spareActions)
        if actions.capacity < 16 { actions.reserveCapacity(16) }
    }

    /// An ended session gives what the next one can reuse: the machine's quirk memo
    /// (``CuffSessionMachine/quirkMemo``) for `memo`, and its emptied action array for `spare`.
    mutating func handOverSpares(_ memo: inout QuirkProfile.Memo, _ spare: inout [CuffSessionMachine.Action]) {
        swap(&memo, &machine.quirkMemo)
        if actions.isEmpty { swap(&actions, &spare) }
    }

    /// What this connection's own discovery showed, once it showed any (nil otherwise, and for a
    /// connection that only used an earlier one's).
    public func discovered(connectionHandle: UInt16, openedAt: Int64?) -> DiscoveredHandles? {
        guard sawDiscovery, !usedInherited else { return nil }
        return DiscoveredHandles(
            services: services, characteristics: characteristics, descriptors: descriptors,
            valueTable: readValues, connectionHandle: connectionHandle, openedAt: openedAt)
    }

    // MARK: - Events

    /// The link came up (or, for a capture that starts mid-connection, the first PDU was seen).
    public mutating func connected(at: EventTime, into out: inout [Output]) {
        run(.start(at), &out)
        run(.connected(at), &out)
    }

    /// Fires every machine deadline up to `time` (inclusive when `inclusive`).
    public mutating func advance(to time: Timestamp, inclusive: Bool, into out: inout [Output]) {
        while let d = deadline, inclusive ? d <= time : d < time {
            run(.tick(SessionObserver.eventTime(d)), &out)
        }
    }

    /// The link went down.
    public mutating func disconnected(_ why: String?, at: EventTime, into out: inout [Output]) {
        advance(to: at.monotonic, inclusive: true, into: &out)
        flushRead(&out)
        ensureReported(at, &out)
        if let h = heldEarly {  // (no map came: said as an unmapped value)
            heldEarly = nil
            value(h.handle, h.value, indication: true, at, &out)
        }
        run(.disconnected(why, at), &out)
    }

    /// One ATT PDU; `fromCentral` says which side sent it.
    public mutating func pdu(_ bytes: [UInt8], fromCentral: Bool, at: EventTime, into out: inout [Output]) {
        bytes.withUnsafeBytes { pdu($0, fromCentral: fromCentral, at: at, into: &out) }
    }

    /// One ATT PDU; `fromCentral` says which side sent it.
    ///
    /// A cuff-pressure notification on a known handle (most of a session) takes a short path that
    /// neither parses a ``ATTPDU`` nor builds a machine event; it ends in the same machine code and
    /// gives the same output as the general path.
    public mutating func pdu(_ raw: UnsafeRawBufferPointer, fromCentral: Bool, at: EventTime, into out: inout [Output])
    {
        if let d = deadline, d < at.monotonic { advance(to: at.monotonic, inclusive: false, into: &out) }
        pduAfterDeadlines(raw, fromCentral: fromCentral, at: at, into: &out)
    }

    /// ``pdu(_:fromCentral:at:into:)`` once no deadline is before `at` (the caller fired them):
    /// a replay knows that from its earliest deadline, and asking the machine again cost about
    /// 60 instructions a PDU. (Always inlined, the cuff-pressure short path with it: the rest is
    /// ``otherPDU(_:fromCentral:at:into:)``.) `progress`: where a progress record goes when `out`
    /// is empty (see ``CaptureReplay/replayRecords(_:into:before:batch:progress:deliver:)``).
    /// Returns false when ``deadline`` is as it was before the PDU (a cuff pressure mid-measurement,
    /// most PDUs: see ``CuffSessionMachine/progressKeepsDeadline``, or a finished session).
    @inline(__always) @discardableResult
    mutating func pduAfterDeadlines(
        _ raw: UnsafeRawBufferPointer, fromCentral: Bool, at: EventTime,
        progress: (any ProgressRecordSink)? = nil, into out: inout [Output]
    ) -> Bool {
        guard !machine.isFinished else { return false }
        // Handle Value Notification (a literal: the named constant is a lazily initialised global)
        if !fromCentral, reported, raw.count >= 3, raw[0] == 0x1B {
            let h = UInt16(raw[1]) | UInt16(raw[2]) << 8
            let kept = machine.progressKeepsDeadline
            if let c = cachedCharacteristic(h),
                let p = machine.progress(notified: c, UnsafeRawBufferPointer(rebasing: raw[3...]), at: at)
            {
                // (Called through the optional in place: binding it first retained and released the
                // sink around every call.)
                if progress != nil, out.isEmpty { progress?.take(progress: p) } else { out.append(.emit(.progress(p))) }
                return !kept
            }
        }
        otherPDU(raw, fromCentral: fromCentral, at: at, into: &out)
        return true
    }

    /// A PDU that is not a cuff-pressure notification the short path takes.
    @inline(never)
    mutating func otherPDU(_ raw: UnsafeRawBufferPointer, fromCentral: Bool, at: EventTime, into out: inout [Output]) {
        // Only the cuff's half of the conversation: the central's requests, the peripheral's
        // answers and pushes. A peripheral may run a GATT client of its own against the central
        // (bluetoothd does, right after connecting); its requests and the central's answers would
        // otherwise be taken for the session's (a read's value lost, a discovery cut short).
        if let first = raw.first, let client = CaptureReplay.isClientOpcode(first) {
            if client != fromCentral { return }
            // A request: a client opcode that is not a command (0x52, 0xD2) or a confirmation (0x1E).
            if client, first & 0x40 == 0, first != 0x1E { attRequests += 1 }
        }
        if let pdu = ATTPDU(wellFormed: raw) {  // most of the rest: read straight from the bytes
            if fromCentral { request(pdu, at, &out) } else { response(pdu, at, &out) }
            return
        }
        if !fromCentral, discoveryResponse(raw, at) { return }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: raw.assumingMemoryBound(to: UInt8.self))
        let bytes = scratch
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(parsing: bytes)
        } catch {
            if machine.configuration.logs {
                out.append(.log("ignored a malformed ATT PDU \(Hex.encode(bytes)): \(error)"))
            }
            return
        }
        if fromCentral { request(pdu, at, &out) } else { response(pdu, at, &out) }
    }

    // MARK: - Client → server

    mutating func request(_ pdu: ATTPDU, _ at: EventTime, _ out: inout [Output]) {
        if case let .readBlobRequest(h, _) = pdu, partialRead?.handle == h {
            outstanding = pdu
            return
        }
        flushRead(&out)
        switch pdu {
        case let .exchangeMTURequest(m):
            clientMTU = m
            outstanding = pdu
        case .readByGroupTypeRequest, .readByTypeRequest, .findInformationRequest, .findByTypeValueRequest:
            sawDiscovery = true
            outstanding = pdu
        case .readRequest, .readBlobRequest:
            ensureReported(at, &out)
            outstanding = pdu
        case let .writeRequest(h, v):
            ensureReported(at, &out)
            outstanding = pdu
            lastWrite = (h, v)
        case .writeCommand, .handleValueConfirmation:
            ensureReported(at, &out)
        default:
            outstanding = pdu
        }
    }

    // MARK: - Server → client

    mutating func response(_ pdu: ATTPDU, _ at: EventTime, _ out: inout [Output]) {
        switch pdu {
        case let .handleValueNotification(h, v):
            ensureReported(at, &out)
            value(h, v, indication: false, at, &out)
            return
        case let .handleValueIndication(h, v):
            if !reported, heldEarly == nil, inherited == nil, overrides.isEmpty {
                heldEarly = (h, v)
                return
            }
            ensureReported(at, &out)
            value(h, v, indication: true, at, &out)
            return
        default:
            break
        }
        let asked = outstanding
        outstanding = nil
        switch (asked, pdu) {
        case let (_, .exchangeMTUResponse(m)):
            serverMTU = m
        case let (.readByGroupTypeRequest(_, _, type)?, .readByGroupTypeResponse(groups)) where type == .primaryService:
            for g in groups {
                if let uuid = BluetoothUUID(littleEndian: g.value[...]) {
                    if services.isEmpty { services.reserveCapacity(8) }
                    services.append(GATTProfile.Service(uuid: uuid, handle: g.handle, endHandle: g.endGroupHandle))
                }
            }
            lastDiscoveryAt = at
        case let (.readByTypeRequest(_, _, type)?, .readByTypeResponse(entries)) where type == .characteristic:
            for e in entries {
                var r = ByteReader(e.value)
                guard let props = r.readUInt8(), let vh = r.readUInt16(),
                    let uuid = BluetoothUUID(littleEndian: r.readRemaining())
                else { continue }
                if characteristics.isEmpty { characteristics.reserveCapacity(16) }
                characteristics.append(
                    GATTProfile.Characteristic(
                        uuid: uuid, properties: CharacteristicProperties(rawValue: props), declarationHandle: e.handle,
                        valueHandle: vh))
            }
            lastDiscoveryAt = at
        case let (.findInformationRequest?, .findInformationResponse(list)):
            if descriptors.isEmpty { descriptors.reserveCapacity(16) }
            for d in list { descriptors[d.handle] = d.uuid }
            lastDiscoveryAt = at
        case (.findByTypeValueRequest?, _), (.readByGroupTypeRequest?, .errorResponse),
            (.readByTypeRequest?, .errorResponse),
            (.findInformationRequest?, .errorResponse):
            lastDiscoveryAt = at
        case let (.readRequest(h)?, .readResponse(v)):
            if v.count >= mtu - 1 {
                partialRead = (h, v, at)
            } else {
                readDone(h, v, at, &out)
            }
        case let (.readBlobRequest(h, _)?, .readBlobResponse(v)):
            if var p = partialRead, p.handle == h {
                p.value += v
                p.at = at
                partialRead = p
                if v.count < mtu - 1 { flushRead(&out) }
            }
        case let (.readBlobRequest(h, _)?, .errorResponse):
            if partialRead?.handle == h { flushRead(&out) }
        case let (.readRequest(h)?, .errorResponse(_, _, error)):
            if let c = characteristic(h) {
                run(.requestFailed(c, "\(error) at \(Hex.handle(h)) for \(ATTOpcode.readRequest)", at), &out)
            }
        case let (.writeRequest(h, v)?, .writeResponse):
            if let c = cccdOwner[h] {
                if v.first.map({ $0 & 0x03 != 0 }) == true { run(.subscribed(c, at), &out) }
            } else if let c = characteristic(h) {
                if c == .recordAccessControlPoint { run(.requestWritten(c, v, at), &out) }
                run(.writeCompleted(c, at), &out)
            }
        case let (.writeRequest(h, _)?, .errorResponse(_, _, error)):
            if let c = cccdOwner[h] ?? characteristic(h) {
                run(.requestFailed(c, "\(error) at \(Hex.handle(h)) for \(ATTOpcode.writeRequest)", at), &out)
            }
        default:
            break
        }
    }

    /// A well-formed discovery response (Read By Group Type, Read By Type, Find Information: most
    /// of a short session's PDUs), read in place, field by field: what parsing it into an
    /// ``ATTPDU`` and ``response(_:_:_:)`` would do, without an array per entry. Returns false,
    /// changing nothing, for any other PDU or a malformed one (the general path reports it).
    mutating func discoveryResponse(_ raw: UnsafeRawBufferPointer, _ at: EventTime) -> Bool {
        // (Straight from the PDU's bytes: no copy into an array, no slice per entry.)
        guard raw.count >= 2 else { return false }
        let opcode = raw[0]
        let size: Int
        switch opcode {
        // Read By Group Type, Read By Type Response (literals: the named constants are lazily initialised globals)
        case 0x11, 0x09:
            size = Int(raw[1])
            guard size >= (opcode == 0x11 ? 4 : 2) else { return false }
        case 0x05:  // Find Information Response
            guard raw[1] == 1 || raw[1] == 2 else { return false }
            size = raw[1] == 1 ? 4 : 18
        default:
            return false
        }
        let entries = raw.count - 2
        guard entries > 0, entries % size == 0 else { return false }
        func u16(_ i: Int) -> UInt16 { UInt16(raw[i]) | UInt16(raw[i + 1]) << 8 }
        /// ``BluetoothUUID/init(littleEndian:)`` of `count` bytes at `i`.
        func uuid(_ i: Int, _ count: Int) -> BluetoothUUID? {
            func u64(_ i: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(raw[i + $1]) << (8 * $1) } }
            switch count {
            case 2: return BluetoothUUID(u16(i))
            case 16: return BluetoothUUID(high: u64(i + 8), low: u64(i))
            default: return nil
            }
        }
        let asked = outstanding
        outstanding = nil
        switch (opcode, asked) {
        case (0x11, .readByGroupTypeRequest(_, _, .primaryService)?):
            for e in stride(from: 2, to: raw.count, by: size) {
                if let uuid = uuid(e + 4, size - 4) {
                    if services.isEmpty { services.reserveCapacity(8) }
                    services.append(GATTProfile.Service(uuid: uuid, handle: u16(e), endHandle: u16(e + 2)))
                }
            }
        case (0x09, .readByTypeRequest(_, _, .characteristic)?):
            for e in stride(from: 2, to: raw.count, by: size) where size >= 5 {  // properties and value handle
                guard let uuid = uuid(e + 5, size - 5) else { continue }
                if characteristics.isEmpty { characteristics.reserveCapacity(16) }
                characteristics.append(
                    GATTProfile.Characteristic(
                        uuid: uuid, properties: CharacteristicProperties(rawValue: raw[e + 2]),
                        declarationHandle: u16(e), valueHandle: u16(e + 3)))
            }
        case (0x05, .findInformationRequest?):
            if descriptors.isEmpty { descriptors.reserveCapacity(16) }
            for e in stride(from: 2, to: raw.count, by: size) {
                descriptors[u16(e)] = uuid(e + 2, size - 2)!
            }
        case (_, .findByTypeValueRequest?):
            break  // any answer ends that discovery step
        default:
            return true  // an answer to something else: nothing to learn from it
        }
        lastDiscoveryAt = at
        return true
    }

    mutating func value(_ h: UInt16, _ v: [UInt8], indication: Bool, _ at: EventTime, _ out: inout [Output]) {
        guard let c = characteristic(h) else {
            unmappedHandles[h, default: .init()].add(v, indication: indication)
            let u = unmappedHandles[h]!
            if !isMapped || usedInherited, u.notifications + u.indications == 1, machine.configuration.logs {
                out.append(
                    .log(
                        usedInherited
                            ? "\(indication ? "indication" : "notification") from handle \(Hex.handle(h)), which the handles inherited from an earlier connection do not map (has the cuff's table changed?)"
                            : "\(indication ? "indication" : "notification") from handle \(Hex.handle(h)), which no discovery in the capture and no --handle maps"
                    ))
            }
            return
        }
        run(indication ? .indication(c, v, at) : .notification(c, v, at), &out)
    }

    @inline(__always) func characteristic(_ h: UInt16) -> CuffCharacteristic? {
        // (An empty dictionary still hashes the key: most replays have no --handle.)
        (overrides.isEmpty ? nil : overrides[h]) ?? byHandle[h]
    }

    /// ``characteristic(_:)``, remembering the last value handle looked up while the map stays as
    /// it is (`report` clears it): the cuff-pressure short path asks for the same handle each time.
    @inline(__always) mutating func cachedCharacteristic(_ h: UInt16) -> CuffCharacteristic? {
        if h == lastHandle { return lastCharacteristic }
        return lookUpCharacteristic(h)
    }

    /// ``cachedCharacteristic(_:)`` for another handle than the last (out of line: rare).
    @inline(never) mutating func lookUpCharacteristic(_ h: UInt16) -> CuffCharacteristic? {
        let c = characteristic(h)
        lastHandle = h
        lastCharacteristic = c
        return c
    }

    mutating func readDone(_ h: UInt16, _ v: [UInt8], _ at: EventTime, _ out: inout [Output]) {
        guard let c = characteristic(h) else { return }
        if !usedInherited { DiscoveredHandles.set(v, for: c, in: &readValues) }
        run(.readCompleted(c, v, at), &out)
    }

    mutating func flushRead(_ out: inout [Output]) {
        guard let p = partialRead else { return }
        partialRead = nil
        readDone(p.handle, p.value, p.at, &out)
    }

    // MARK: - Discovery

    mutating func ensureReported(_ at: EventTime, _ out: inout [Output]) {
        guard !reported else { return }
        reportIfKnown(at, &out)
        if reported, let h = heldEarly {
            heldEarly = nil
            value(h.handle, h.value, indication: true, at, &out)
        }
    }

    /// ``ensureReported(_:_:)``'s work: the map reported when this connection has one.
    mutating func reportIfKnown(_ at: EventTime, _ out: inout [Output]) {
        if !sawDiscovery {
            // (Taken out, not copied: nothing reads it after this; `if let` copied it through
            // the tuple's generic value witnesses.)
            if let inherited = inherited.take() {
                // A bonded reconnect: the handles an earlier connection to this cuff discovered.
                services = inherited.handles.services
                characteristics = inherited.handles.characteristics
                descriptors = inherited.handles.descriptors
                usedInherited = true
                out.append(.notice(inherited.notice()))
                // A central that kept the handles kept the values it read once too (Device
                // Information, features): it asks the cuff for none of them again.
                answeringInheritedReadsAt = inherited.handles.values.isEmpty ? nil : at
                inheritedValues = inherited.handles.values
                report(at, &out)
                answeringInheritedReadsAt = nil
                return
            }
            lackedDiscovery = true
            if overrides.isEmpty { return }
        }
        report(lastDiscoveryAt ?? at, &out)
    }

    /// Builds the profile from what discovery showed (plus overrides) and hands it to the machine.
    mutating func report(_ at: EventTime, _ out: inout [Output]) {
        reported = true
        lastHandle = nil
        lastCharacteristic = nil
        // (By index: the mapping is not copied out whole.)
        if let i = knownMappings.firstIndex(where: { $0.fits(self) }) {
            byHandle = knownMappings[i].byHandle
            cccdOwner = knownMappings[i].cccdOwner
            let profile = knownMappings[i].profile
            knownMappings = []
            return run(.discovered(profile, at), &out)
        }
        knownMappings = []
        var svc = services.sorted { $0.handle < $1.handle }
        let chars = characteristics.sorted { $0.valueHandle < $1.valueHandle }
        // Descriptors in handle order: each characteristic takes those between its value and the
        // next declaration (a walk over what discovery found, not over the handle range, which
        // for the last service runs to 0xFFFF).
        let found = descriptors.sorted { $0.key < $1.key }
        for (i, s) in svc.enumerated() {
            var list = chars.filter { $0.declarationHandle > s.handle && $0.valueHandle <= s.endHandle }
            for j in list.indices {
                let upper = j + 1 < list.count ? Int(list[j + 1].declarationHandle) - 1 : Int(s.endHandle)
                let lower = Int(list[j].valueHandle) + 1
                guard lower <= upper else { continue }
                // Only the CCCD matters here (the profile's descriptor lists go unread: what the
                // mapping keeps of a characteristic is its CCCD).
                for (h, u) in found where Int(h) >= lower && Int(h) <= upper && u == .clientCharacteristicConfiguration
                {
                    list[j].cccdHandle = h
                    break
                }
            }
            svc[i].characteristics = list
        }
        let configuration = machine.configuration
        if let forced = configuration.forcedProtocol {
            // `--protocol` names another protocol whose observer needs the database (it maps
            // its characteristics by UUID): it follows the rest.
            if forced != .bps, configuration.protocols[forced] != nil {
                handOver = (forced, GATTProfile(services: svc))
                return
            }
        } else if configuration.protocols.protocols.count > 1 {
            // Another registered protocol may fit this database better: it follows the rest.
            var offer = configuration.offer
            offer.profile = GATTProfile(services: svc)
            if let next = configuration.protocols.handOver(from: .bps, offer) {
                handOver = (next.id, GATTProfile(services: svc))
                return
            }
        }
        let mapped = CuffCentral.map(GATTProfile(services: svc))
        var profile = mapped.profile
        // (Built as dictionaries, kept as tables.)
        var byHandle = mapped.byHandle
        var cccdOwner: [UInt16: CuffCharacteristic] = [:]
        for (c, ch) in mapped.byCharacteristic {
            if let cccd = ch.cccdHandle { cccdOwner[cccd] = c }
        }
        // Characteristics outside any discovered service (a partial discovery) still count.
        // (A capture that lost a discovery response: the service declaration or part of it.)
        for (i, ch) in chars.enumerated() where byHandle[ch.valueHandle] == nil {
            let c: CuffCharacteristic? =
                ch.uuid == CuffCentral.controlPointUUID
                ? .cuffControl : ch.uuid.uuid16.flatMap { CuffCharacteristic(uuid16: $0) }
            guard let c, profile[c] == nil else { continue }
            profile[c] = CuffProperties(rawValue: ch.properties.rawValue)
            byHandle[ch.valueHandle] = c
            let upper = i + 1 < chars.count ? Int(chars[i + 1].declarationHandle) - 1 : 0xFFFF
            if Int(ch.valueHandle) < upper,
                let cccd = descriptors.filter({
                    Int($0.key) > Int(ch.valueHandle) && Int($0.key) <= upper
                        && $0.value == .clientCharacteristicConfiguration
                }).keys.min()
            {
                cccdOwner[cccd] = c
            }
            if [.bloodPressureMeasurement, .enhancedBloodPressureMeasurement].contains(c) {
                profile.hasBloodPressureService = true
            }
        }
        for (h, c) in overrides {
            byHandle[h] = c
            if profile[c] == nil { profile[c] = SessionObserver.assumedProperties(c) }
            if cccdOwner.values.contains(c) == false { cccdOwner[h &+ 1] = c }
            if [
                .bloodPressureMeasurement, .enhancedBloodPressureMeasurement, .intermediateCuffPressure,
                .enhancedIntermediateCuffPressure, .bloodPressureRecord, .recordAccessControlPoint,
                .bloodPressureFeature,
            ].contains(c) {
                profile.hasBloodPressureService = true
            }
        }
        self.byHandle = HandleTable(byHandle)
        self.cccdOwner = HandleTable(cccdOwner)
        madeMapping = Mapping(
            services: services, characteristics: characteristics, descriptors: descriptors, overrides: overrides,
            profile: profile, byHandle: self.byHandle, cccdOwner: self.cccdOwner)
        run(.discovered(profile, at), &out)
    }

    /// Properties assumed for a characteristic known only from `--handle`.
    static func assumedProperties(_ c: CuffCharacteristic) -> CuffProperties {
        switch c {
        case .bloodPressureMeasurement, .enhancedBloodPressureMeasurement, .bloodPressureRecord: .indicate
        case .intermediateCuffPressure, .enhancedIntermediateCuffPressure: .notify
        case .recordAccessControlPoint: [.write, .indicate]
        case .cuffControl: .write
        case .currentTime: [.read, .write]
        default: .read
        }
    }

    // MARK: - Machine

    mutating func run(_ event: CuffSessionMachine.Event, _ out: inout [Output]) {
        // One array for the machine's actions, emptied (capacity kept) for every event; by
        // popLast: removeAll(keepingCapacity:) goes through a generic replaceSubrange (~160
        // instructions a call, most of them for an array that is already empty).
        while actions.popLast() != nil {}
        let wasFinished = machine.isFinished
        machine.handle(event, into: &actions)
        if requestsBeforeReading == nil, machine.resultsReceived > 0 { requestsBeforeReading = attRequests }
        var fromInherited: (CuffCharacteristic, [UInt8])?
        // The end record comes in the actions of the event that finished the session, and is
        // the only session record there (it is the only one patched: the records are not taken
        // out of their boxes to look, which copied each whole, its device's every string
        // retained, and boxed them anew).
        let ending = machine.isFinished && !wasFinished
        // Each action moved out, in order (reversed, then popped): `for a in actions` copied each
        // one, a record's every string retained and released again (a session's start and end
        // records hold two dozen).
        if actions.count > 1 { actions.reverse() }  // (most events give one action or none)
        while let a = actions.popLast() {
            switch a {
            case let .read(c) where answeringInheritedReadsAt != nil:
                // (The session asks for one read at a time.)
                let i = Int(c.ordinal)
                if i < inheritedValues.count, let v = inheritedValues[i] { fromInherited = (c, v) }
            case let .emit(o):
                if ending, case .session = o { out.append(.emit(withRequestCounts(o))) } else { out.append(.emit(o)) }
            case let .log(s): out.append(.log(s))  // (only when the configuration wants logs)
            default: break  // the capture already holds what the real client did
            }
        }
        if let (c, v) = fromInherited, let at = answeringInheritedReadsAt { run(.readCompleted(c, v, at), &out) }
    }

    /// The end record with the ATT requests the central was seen sending.
    func withRequestCounts(_ o: SessionOutput) -> SessionOutput {
        guard case var .session(s) = o, s.event == .end else { return o }
        s.attRequests = attRequests
        s.attRequestsBeforeReading = requestsBeforeReading
        return .session(s)
    }

    /// Capture time as the machine's time: monotonic = wall = the capture's timestamp.
    /// Any timestamp will do: the wall time is the µs at or before it (no arithmetic that can overflow).
    public static func eventTime(_ t: Timestamp) -> EventTime {
        EventTime(monotonic: t, wallMicros: t.flooredMicroseconds)
    }
}

/// Value or CCCD handle → characteristic, for the dozen or so handles a cuff session maps (at
/// most one per characteristic, plus `--handle` ones): searched, not hashed, since most PDUs of a
/// session look one up.
struct HandleTable: Sendable {
    private var handles: [UInt16] = []
    private var characteristics: [CuffCharacteristic] = []

    init() {}

    init(_ map: [UInt16: CuffCharacteristic]) {
        handles.reserveCapacity(map.count)
        characteristics.reserveCapacity(map.count)
        for (h, c) in map {
            handles.append(h)
            characteristics.append(c)
        }
    }

    subscript(_ h: UInt16) -> CuffCharacteristic? {
        guard let i = handles.firstIndex(of: h) else { return nil }
        return characteristics[i]
    }
}

/// The handles discovery on one connection showed: what a later connection to the same cuff on
/// the same controller uses when it discovers nothing (a bonded reconnect with a GATT cache).
public struct DiscoveredHandles: Sendable, Hashable {
    var services: [GATTProfile.Service]
    var characteristics: [GATTProfile.Characteristic]
    var descriptors: [UInt16: BluetoothUUID]
    /// The values that connection read (Device Information, features).
    /// By ``CuffCharacteristic/ordinal``, not a dictionary: every reconnect that uses these
    /// handles looks up half a dozen, and hashing a key cost about 200 instructions a lookup.
    /// (Empty when it read none.)
    var values: [[UInt8]?]
    /// The connection that discovered them.
    public var connectionHandle: UInt16
    /// File offset of that connection's connection event, when the capture has one.
    public var openedAt: Int64?

    init(
        services: [GATTProfile.Service], characteristics: [GATTProfile.Characteristic],
        descriptors: [UInt16: BluetoothUUID], values: [CuffCharacteristic: [UInt8]] = [:], connectionHandle: UInt16,
        openedAt: Int64?
    ) {
        self.init(
            services: services, characteristics: characteristics, descriptors: descriptors,
            valueTable: DiscoveredHandles.table(values), connectionHandle: connectionHandle, openedAt: openedAt)
    }

    /// With the values already a table by ordinal (empty: none), as ``SessionObserver`` keeps them.
    init(
        services: [GATTProfile.Service], characteristics: [GATTProfile.Characteristic],
        descriptors: [UInt16: BluetoothUUID], valueTable: [[UInt8]?], connectionHandle: UInt16, openedAt: Int64?
    ) {
        self.services = services
        self.characteristics = characteristics
        self.descriptors = descriptors
        values = valueTable
        self.connectionHandle = connectionHandle
        self.openedAt = openedAt
    }

    /// The same handles and values, wherever they were discovered: a connection that uses one
    /// behaves as with the other, but for the notice that names the connection they came from.
    public func sameHandles(as other: DiscoveredHandles) -> Bool {
        services == other.services && characteristics == other.characteristics && descriptors == other.descriptors
            && values == other.values
    }

    private static func table(_ values: [CuffCharacteristic: [UInt8]]) -> [[UInt8]?] {
        var t: [[UInt8]?] = []
        for (c, v) in values { set(v, for: c, in: &t) }
        return t
    }

    /// Sets `c`'s value in a table of ``values``' shape (an empty one first gets a slot for every
    /// characteristic).
    static func set(_ v: [UInt8], for c: CuffCharacteristic, in t: inout [[UInt8]?]) {
        if t.isEmpty { t = [[UInt8]?](repeating: nil, count: characteristicCount) }
        t[Int(c.ordinal)] = v
    }

    private static let characteristicCount = CuffCharacteristic.allCases.count
}
