// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import CuffCore
import CuffSession

/// What a replay gives out, in order.
public enum ReplayOutput: Sendable, Hashable {
    case emit(SessionOutput)
    case log(String)
    /// Something the user should see even with `--quiet`, that is no fault (a connection that
    /// uses the handles an earlier connection discovered).
    case notice(String)
    /// A skipped fragment or frame; the replay goes on.
    indirect case warning(CaptureError)
}

/// Replays a whole capture: records in, the records each cuff session would have given out.
///
/// Pure: feed ``HCIRecord``s in file order to ``consume(_:into:)``, then call ``finish(_:into:)``.
/// Connections are kept apart per (controller index, connection handle); each one where the
/// local controller is the central (from LE (Enhanced) Connection Complete, or, when the capture
/// starts mid-connection, from who sends requests) gets a ``SessionObserver``. A controller that
/// is the peripheral of a connection (the cuff's side, as in a two-controller `btmon` file) is
/// not reported, so each session appears once per central controller. `adapter` keeps one
/// controller only.
///
/// A connection that shows no service discovery (a bonded central reconnecting with its GATT
/// cache) uses the handles the last discovery showed on an earlier connection to the same peer
/// address on the same controller (``learned``), and says so with a `.notice`; `overrides` still
/// win over them. A replay of a stretch of a capture starts from the ``learned`` maps of what came
/// before it (`learned:`), or notes in ``lacking`` the peers whose connections found none.
public struct CaptureReplay: Sendable {
    public typealias Output = ReplayOutput

    /// A connection whose values could not be decoded: no discovery in the capture, no `--handle`.
    public struct Unmapped: Sendable, Hashable {
        public var adapter: UInt16
        public var connectionHandle: UInt16
        public var address: String
        /// Value handle → (notifications, indications) seen.
        public var handles: [UInt16: Counts]
        /// The connection used an earlier connection's handles (it discovered none), and these
        /// are handles that map does not cover; false: it had no map at all.
        public var usedEarlierMap = false
        public struct Counts: Sendable, Hashable {
            public var notifications = 0
            public var indications = 0
            /// The characteristic the handle's first recognisable value looks like
            /// (``ValueShape``), for the hint; nil when none of the values looked like one.
            public var looksLike: CuffCharacteristic?
            /// How many values were looked at (only the first few are).
            var looked = 0
            public init(notifications: Int = 0, indications: Int = 0, looksLike: CuffCharacteristic? = nil) {
                self.notifications = notifications
                self.indications = indications
                self.looksLike = looksLike
            }

            /// Counts `value`, and looks at its shape while none has been recognised (at most
            /// 16 values: a handle's values are all of one characteristic).
            mutating func add(_ value: [UInt8], indication: Bool) {
                if indication { indications += 1 } else { notifications += 1 }
                guard looksLike == nil, looked < 16 else { return }
                looked += 1
                looksLike = ValueShape.characteristic(of: value[...], indication: indication)
            }

            /// `other`'s counts added; the shape already recognised, or else `other`'s.
            public mutating func merge(_ other: Counts) {
                notifications += other.notifications
                indications += other.indications
                looksLike = looksLike ?? other.looksLike
            }
        }
    }

    public let adapter: UInt16?
    public let overrides: [UInt16: CuffCharacteristic]
    public let configuration: CuffSessionConfiguration

    var extractor = ATTExtractor()
    var connections: [Key: Connection] = [:]
    var events: [CaptureEvent] = []
    /// The connection of the last ATT PDU (most PDUs follow one on the same link), held unretained
    /// (no reference counting per PDU): `connections` keeps it alive, and every removal from
    /// `connections` clears it.
    var hotKey: Key?
    var hotConnection: Unmanaged<Connection>?
    var serial = 0
    /// The earliest machine deadline over all open sessions (cached): `armed`'s first's.
    var earliest: Timestamp?
    /// The open connections with a deadline, as a binary min-heap by (deadline, serial): each is
    /// filed under its deadline as of its last change (``Connection/armedDeadline``, at
    /// ``Connection/armedAt``). A PDU changes only its own connection's deadline: refiling that
    /// one costs O(log n), where rescanning every open connection after each PDU cost O(n) (38% of
    /// the reading thread's instructions on a capture that leaves hundreds open).
    var armed: [Connection] = []
    public private(set) var lastTimestamp: Timestamp?
    /// Sessions reported (connections where a reported controller is the central).
    public private(set) var sessions = 0
    /// Measurements emitted, over every session (each machine counts those it emitted).
    public var measurements: Int {
        endedMeasurements + connections.values.reduce(0) { $0 + ($1.central ? $1.measurements : 0) }
    }
    var endedMeasurements = 0
    public private(set) var unmapped: [Unmapped] = []
    /// The handles the last discovery showed, per (controller, peer address): given at the start
    /// (`learned:`), updated as each connection that discovered ends. At most
    /// ``maximumLearnedPeers`` peers (a hostile file cannot make it grow without bound): past that,
    /// a peer not yet known is not remembered.
    public private(set) var learned: [Peer: DiscoveredHandles]
    public static let maximumLearnedPeers = 4096
    /// Peers with a connection that needed an earlier discovery and found none in ``learned``
    /// (a replay that had started with a map for one of them would have given other output).
    public private(set) var lacking: Set<Peer> = []
    /// Peers whose map in ``learned`` this replay set itself (the others are the `learned:` it started from).
    public private(set) var discoveredPeers: Set<Peer> = []
    /// Peers with a connection that used the map `learned:` gave at the start (this replay's
    /// output depends on that map; a connection that was offered it and discovered for itself
    /// does not depend on it), counting the connections still open.
    public var inheritedPeers: Set<Peer> {
        var peers = endedInheritedPeers
        for c in connections.values where c.usedStartMap { peers.insert(c.peer!) }
        return peers
    }
    var endedInheritedPeers: Set<Peer> = []
    /// The peer last put in ``endedInheritedPeers``.
    var lastEndedInheritedPeer: Peer?
    /// A connection that used a map `learned:` gave at the start (see ``inheritedUses``).
    public struct InheritedUse: Hashable, Sendable {
        public var peer: Peer
        public var connectionHandle: UInt16
        public init(peer: Peer, connectionHandle: UInt16) {
            self.peer = peer
            self.connectionHandle = connectionHandle
        }
    }
    /// Keep ``inheritedUses`` (off: a whole capture's replay need not keep one per connection).
    public var recordsInheritedUses = false
    /// With ``recordsInheritedUses``: the connections that used a map `learned:` gave at the
    /// start, counting those still open. Each said so in the notice
    /// ``inheritedNotice(_:from:)`` gives; only the map's origin (the connection that discovered it)
    /// is in that text, so a replay that started from a map that differs from the right one only
    /// in its origin (``DiscoveredHandles/sameHandles(as:)``) differs only in those notices.
    public var inheritedUses: Set<InheritedUse> {
        guard recordsInheritedUses else { return [] }
        var uses = Set<InheritedUse>(minimumCapacity: endedInheritedUses.count + connections.count)
        for u in endedInheritedUses { uses.insert(u) }
        for (key, c) in connections where c.usedStartMap {
            uses.insert(InheritedUse(peer: c.peer!, connectionHandle: key.handle))
        }
        return uses
    }
    /// (Listed as they end, made a set once when asked: inserting each into a set that kept
    /// growing hashed its address twice, about 300 instructions a reconnect.)
    var endedInheritedUses: [InheritedUse] = []
    /// The peer of the last connection event, with its map in ``learned`` and whether that map
    /// was inherited (cleared whenever ``learned`` changes): a capture's connections mostly go to
    /// the peer of the one before, and hashing its address twice cost about 1,200 instructions.
    var lastPeer: Peer?
    /// The peer address of the last connection event and its text (the same string again for
    /// the same address: no new one to write, and equal strings that share storage compare at once).
    var lastAddressBytes: [UInt8] = []
    var lastAddressRandom = false
    var lastAddressText = ""
    var lastKnown: DiscoveredHandles?
    var lastInherited = false
    /// The last few handle → characteristic mappings sessions made, newest first: a new session
    /// whose discovery matches one reuses it (see ``SessionObserver/Mapping``).
    var mappings: [SessionObserver.Mapping] = []
    static let maximumMappings = 8
    /// The quirk matching's memo of the last session that ended, for the next ones (see
    /// ``QuirkProfile/Memo``).
    var quirkMemo = QuirkProfile.Memo()
    /// The emptied action array of the last session that ended, for the next one's (see
    /// ``SessionObserver/begin(inherited:mappings:quirkMemo:spareActions:)``).
    var spareActions: [CuffSessionMachine.Action] = []

    /// A peer device as seen from one controller.
    public struct Peer: Hashable, Sendable {
        public var adapter: UInt16
        /// The peer's address as the session names it (`AA:BB:CC:DD:EE:FF`, `/random` appended for a random one).
        public var address: String
        public init(adapter: UInt16, address: String) {
            self.adapter = adapter
            self.address = address
        }
    }

    struct Key: Hashable, Sendable {
        var adapter: UInt16
        var handle: UInt16
    }

    /// The configuration and the fresh observer of a session to one address. A new session starts
    /// as a copy of them: making the machine and its configuration again for every connection
    /// cost about 6,000 instructions a short session (under callgrind), and a capture's sessions
    /// mostly go to the address of the one before.
    final class Template: Sendable {
        let address: String
        let configuration: CuffSessionConfiguration
        let observer: SessionObserver

        init(address: String, configuration: CuffSessionConfiguration, overrides: [UInt16: CuffCharacteristic]) {
            self.address = address
            var config = configuration
            config.address = address
            self.configuration = config
            observer = SessionObserver(configuration: config, overrides: overrides)
        }
    }
    /// The template of the last new session's address.
    var template: Template?

    /// A class, so the hot path mutates the observer in place instead of copying it in and out of the dictionary.
    final class Connection: @unchecked Sendable {
        let serial: Int
        let address: String
        /// The session options: its template's (held, not copied: a copy retained and released
        /// each of the configuration's references once a session).
        let template: Template
        var configuration: CuffSessionConfiguration { template.configuration }
        /// False: the local controller is the peripheral here (not reported; `session` is unused).
        var central = false
        // Unchecked: a replay runs on one thread and never overlaps accesses; the dynamic checks
        // cost more than the hot path's work.
        @exclusivity(unchecked) var session: SessionObserver
        let sniffed: Bool
        /// The peer, when a connection event named it (a connection that starts mid-capture has none).
        var peer: Peer?
        /// File offset of the connection event.
        var openedAt: Int64?
        /// The connection was offered a map `learned:` gave at the start (not one this replay learned).
        var offeredStartMap = false
        /// It used that map (its output depends on it).
        var usedStartMap: Bool { offeredStartMap && session.usedInherited }
        /// Another protocol's observer, when the user forced that protocol or `session` handed
        /// the connection over after discovery: it then follows the connection instead.
        var other: (any CuffProtocolObserver)? {
            didSet { followed = other != nil }
        }
        /// ``other`` is set: a flag read on every PDU and deadline check, where testing the
        /// existential optional itself copied and destroyed it (about 5,000 instructions a short
        /// session under callgrind).
        private(set) var followed = false
        /// The session's next deadline (the peripheral side's placeholder session never has one).
        @inline(__always) var deadline: Timestamp? { followed ? other!.deadline : session.deadline }
        /// Its index in ``CaptureReplay/armed``; -1: not there (no deadline).
        var armedAt = -1
        /// The deadline it is filed under in ``CaptureReplay/armed`` (while there).
        var armedDeadline = Timestamp.zero
        /// Results handed out so far.
        var measurements: Int { followed ? other!.measurements : session.machine.measurements }

        // The observer's events: the standard session's, or the other protocol's.

        /// ``SessionObserver/handOverSpares(_:_:)`` (in place: a call on `session` from
        /// outside the class copied the whole observer first).
        func handOverSpares(_ memo: inout QuirkProfile.Memo, _ spare: inout [CuffSessionMachine.Action]) {
            session.handOverSpares(&memo, &spare)
        }

        /// ``SessionObserver/discovered(connectionHandle:openedAt:)``, read in place (through an
        /// inout access: a plain call copied the whole observer first and destroyed the copy
        /// after, about 1,800 instructions a session).
        func discovered(connectionHandle: UInt16) -> DiscoveredHandles? {
            Self.discovered(in: &session, connectionHandle: connectionHandle, openedAt: openedAt)
        }

        private static func discovered(in session: inout SessionObserver, connectionHandle: UInt16, openedAt: Int64?)
            -> DiscoveredHandles?
        {
            session.discovered(connectionHandle: connectionHandle, openedAt: openedAt)
        }

        func connected(at: EventTime, into out: inout [Output]) {
            guard followed else { return session.connected(at: at, into: &out) }
            relay(&out) { o, into in o.connected(at: at, into: &into) }
        }

        /// `deadlinesDone`: no deadline of this connection's is before `at` (see
        /// ``SessionObserver/pduAfterDeadlines(_:fromCentral:at:into:)``).
        /// Returns false when ``deadline`` is as it was before the PDU (see
        /// ``SessionObserver/pduAfterDeadlines(_:fromCentral:at:progress:into:)``).
        @inline(__always)
        func pdu(
            _ raw: UnsafeRawBufferPointer, fromCentral: Bool, at: EventTime, deadlinesDone: Bool,
            progress: (any ProgressRecordSink)? = nil, into out: inout [Output]
        ) -> Bool {
            guard followed else {
                var changed = true
                if deadlinesDone {
                    changed = session.pduAfterDeadlines(
                        raw, fromCentral: fromCentral, at: at, progress: progress, into: &out)
                } else {
                    session.pdu(raw, fromCentral: fromCentral, at: at, into: &out)
                }
                if session.handsOver {
                    handOver(at, &out)
                    changed = true
                }
                return changed
            }
            let bytes = [UInt8](raw)
            relay(&out) { o, into in o.pdu(bytes, fromCentral: fromCentral, at: at, into: &into) }
            return true
        }

        func advance(to time: Timestamp, inclusive: Bool, into out: inout [Output]) {
            guard followed else { return session.advance(to: time, inclusive: inclusive, into: &out) }
            relay(&out) { o, into in o.advance(to: time, inclusive: inclusive, into: &into) }
        }

        func disconnected(_ why: String?, at: EventTime, into out: inout [Output]) {
            guard followed else { return session.disconnected(why, at: at, into: &out) }
            relay(&out) { o, into in o.disconnected(why, at: at, into: &into) }
        }

        /// The standard session handed the connection over: the other protocol's observer takes it.
        func handOver(_ at: EventTime, _ out: inout [Output]) {
            guard let (id, profile) = session.handOver, let p = configuration.protocols[id],
                let o = p.makeObserver(configuration: configuration, discovered: profile)
            else { return }
            if configuration.logs {
                out.append(.log("\(address): discovery shows a \(id) device; its observer follows the connection"))
            }
            other = o
            // (The standard session gave the session's start record when the link came up; the
            // live session hands over the same way and gives one.)
            relay(&out, droppingStart: true) { o, into in o.connected(at: at, into: &into) }
        }

        func relay(
            _ out: inout [Output], droppingStart: Bool = false,
            _ body: (inout any CuffProtocolObserver, inout [ObserverOutput]) -> Void
        ) {
            var given: [ObserverOutput] = []
            body(&other!, &given)
            for g in given {
                switch g {
                case let .emit(.session(r)) where droppingStart && r.event == .start: continue
                case let .emit(o): out.append(.emit(o))
                case let .log(s): out.append(.log(s))
                case let .notice(s): out.append(.notice(s))
                }
            }
        }

        /// A connection where the local controller is the central, with its session: a copy of
        /// `template`'s fresh one (what a new session to that address starts as), given the
        /// connection's own inherited handles and mappings.
        init(
            serial: Int, address: String, sniffed: Bool, template: Template,
            inherited: (handles: DiscoveredHandles, notice: @Sendable () -> String)?,
            mappings: [SessionObserver.Mapping], quirkMemo: QuirkProfile.Memo,
            spareActions: inout [CuffSessionMachine.Action]
        ) {
            self.serial = serial
            self.address = address
            self.sniffed = sniffed
            self.template = template
            central = true
            session = template.observer
            session.begin(inherited: inherited, mappings: mappings, quirkMemo: quirkMemo, spareActions: &spareActions)
            // `--protocol`: that protocol's observer follows the connection from the start.
            if let forced = configuration.forcedProtocol, let p = configuration.protocols[forced] {
                other = p.makeObserver(configuration: configuration, discovered: nil)
                followed = other != nil  // (no didSet in an initialiser)
            }
        }

        /// A connection where the local controller is the peripheral (not reported).
        init(serial: Int, address: String, sniffed: Bool) {
            self.serial = serial
            self.address = address
            self.sniffed = sniffed
            template = Template(
                address: address, configuration: CuffSessionConfiguration(address: address), overrides: [:])
            session = template.observer
        }
    }

    /// - Parameters:
    ///   - configuration: the session options; `address` is replaced per connection by the peer's address.
    public init(
        configuration: CuffSessionConfiguration = CuffSessionConfiguration(address: ""), adapter: UInt16? = nil,
        overrides: [UInt16: CuffCharacteristic] = [:], learned: [Peer: DiscoveredHandles] = [:]
    ) {
        self.configuration = configuration
        self.adapter = adapter
        self.overrides = overrides
        self.learned = learned
    }

    /// Feeds one record.
    public mutating func consume(_ record: HCIRecord, into out: inout [Output]) {
        if record.payload.withUnsafeBytes({ take(RecordView(record, payload: $0), &out) }) { return }
        lastTimestamp = record.timestamp
        if let e = earliest, e < record.timestamp { fireDeadlines(before: record.timestamp, &out) }
        while events.popLast() != nil {}  // (cheaper than removeAll(keepingCapacity:), see SessionObserver.run)
        do {
            try extractor.consume(record, into: &events)
        } catch {
            out.append(.warning(error))  // not reached: the extractor is not strict
        }
        for e in events {
            switch e {
            case let .connected(info): connected(info, &out)
            case let .att(p): att(p, &out)
            case let .disconnected(d): disconnected(d, &out)
            case let .warning(w): out.append(.warning(w))
            }
        }
    }

    /// ``consume(_:into:)``'s short path, also for a record lent by a reader: a record of another
    /// controller than `adapter` is skipped, and an ACL fragment holding a whole ATT frame on a
    /// tracked link is replayed from the record's bytes (true); for anything else nothing changes
    /// and the record goes the general way (false).
    mutating func take(_ record: RecordView, _ out: inout [Output], progress: (any ProgressRecordSink)? = nil) -> Bool {
        if let adapter, record.adapterIndex != adapter { return true }  // consume() skips it whole
        if case .event = record.kind {
            // An event the extractor passes over (most of them: completed packets, command
            // completions) changes nothing but the clock.
            guard ATTExtractor.ignores(event: record.payload) else { return false }
            lastTimestamp = record.timestamp
            if let e = earliest, e < record.timestamp { fireDeadlines(before: record.timestamp, &out) }
            return true
        }
        guard case .aclData = record.kind,
            let f = extractor.singleFrame(
                adapter: record.adapterIndex, direction: record.direction, payload: record.payload)
        else {
            return false
        }
        lastTimestamp = record.timestamp
        if let e = earliest, e < record.timestamp { fireDeadlines(before: record.timestamp, &out) }
        // (The deadlines before this record just fired: none is left before it.)
        att(
            adapter: f.adapter, handle: f.connectionHandle, direction: f.direction,
            pdu: UnsafeRawBufferPointer(rebasing: record.payload[f.pdu]), timestamp: record.timestamp,
            accessAddress: nil, deadlinesDone: true, progress: progress, &out)
        return true
    }

    /// Ends every session still open (the capture ends, or breaks off): deadlines up to the last
    /// timestamp fire, then the session sees the link go with `why`.
    public mutating func finish(_ why: String = "the capture ends", into out: inout [Output]) {
        finishSessions(why, &out)
    }

    /// ``finish(_:into:)`` after ``replay(_:into:before:batch:deliver:)``: the capture ends, or,
    /// after `fault`, breaks off.
    public mutating func finish(after fault: CaptureError?, into out: inout [Output]) {
        finishSessions(fault == nil ? "the capture ends" : "the capture breaks off", &out)
    }

    mutating func finishSessions(_ why: String, _ out: inout [Output]) {
        let open = connections.sorted { $0.value.serial < $1.value.serial }
        let at = SessionObserver.eventTime(lastTimestamp ?? .zero)
        for (key, c) in open {
            guard c.central else { continue }
            c.disconnected(why, at: at, into: &out)
            end(key, c)
        }
        connections = [:]
        hotKey = nil
        hotConnection = nil
        for c in armed { c.armedAt = -1 }
        armed.removeAll()
        earliest = nil
    }

    // MARK: - Connections

    mutating func connected(_ info: ConnectionInfo, _ out: inout [Output]) {
        let key = Key(adapter: info.adapter, handle: info.connectionHandle)
        // (Most connection events come with no other connection open: an empty dictionary still
        // hashes the key.)
        if !connections.isEmpty, let old = connections[key] {
            if old.central {
                old.disconnected(
                    "the connection handle was reused without a disconnection",
                    at: SessionObserver.eventTime(info.timestamp), into: &out)
                end(key, old)
            }
            disarm(old)
        }
        serial += 1
        let random = info.peerAddressType.rawValue & 1 == 1
        let address: String
        if random == lastAddressRandom, info.peerAddress.bytes == lastAddressBytes {
            address = lastAddressText
        } else {
            address = info.peerAddress.text(random: random)
            lastAddressBytes = info.peerAddress.bytes
            lastAddressRandom = random
            lastAddressText = address
        }
        let sniffed = info.accessAddress != nil
        let c: Connection
        let peer = Peer(adapter: info.adapter, address: address)
        if info.role == .central {
            let adapter = info.adapter, handle = info.connectionHandle
            let known: DiscoveredHandles?
            if lastPeer == peer {
                known = lastKnown
            } else {
                known = learned[peer]
                lastInherited = known != nil && !discoveredPeers.contains(peer)
                lastPeer = peer
                lastKnown = known
            }
            var inherited: (handles: DiscoveredHandles, notice: @Sendable () -> String)?
            // (Moved on from `known`: `known.map` copied the handles, then destroyed `known`.)
            if let h = consume known {
                // (The closure holds the two numbers it needs, not the handles: capturing those
                // retained and released each of their arrays once more a session.)
                let from = h.connectionHandle, at = h.openedAt
                inherited = (
                    h,
                    { @Sendable in
                        CaptureReplay.inheritedNotice(
                            adapter: adapter, handle: handle, address: address, fromConnection: from, openedAt: at)
                    }
                )
            }
            c = newConnection(address, sniffed: sniffed, inherited: consume inherited)
            c.connected(at: SessionObserver.eventTime(info.timestamp), into: &out)
            c.peer = peer
            c.openedAt = info.fileOffset
            c.offeredStartMap = lastInherited
        } else {
            if configuration.logs {
                out.append(
                    .log(
                        "hci\(info.adapter) connection \(Hex.handle(info.connectionHandle)) to \(address): this controller is the peripheral (the cuff's side); not reported"
                    ))
            }
            c = Connection(serial: serial, address: address, sniffed: sniffed)
        }
        connections[key] = c
        // The link's first PDU comes next, most often: it finds its connection here, not by a
        // lookup (as att() would leave it).
        hotKey = key
        hotConnection = .passUnretained(c)
        rearm(c)
    }

    /// The notice of a connection that used `handles` (see ``inheritedUses``).
    public static func inheritedNotice(_ use: InheritedUse, from handles: DiscoveredHandles) -> String {
        inheritedNotice(
            adapter: use.peer.adapter, handle: use.connectionHandle, address: use.peer.address,
            fromConnection: handles.connectionHandle, openedAt: handles.openedAt)
    }

    /// The line that says a connection uses the handles an earlier one discovered. (Written byte by
    /// byte into the string's own storage: one allocation. Appending pieces to an array, then
    /// making it a string, cost about 3,900 instructions a line under callgrind, and every
    /// reconnect of a short-session capture makes this line.)
    static func inheritedNotice(
        adapter: UInt16, handle: UInt16, address: String, fromConnection: UInt16, openedAt: Int64?
    ) -> String {
        var address = address
        return address.withUTF8 { a in
            String(unsafeUninitializedCapacity: 192 + a.count) { out in
                // (Static helpers over a pointer: nested functions that change a captured count pay
                // for dynamic exclusivity checks on every call.)
                var p = out.baseAddress!
                put(&p, "hci")
                decimal(&p, UInt64(adapter))
                put(&p, " connection 0x")
                hex4(&p, handle)
                put(&p, " to ")
                for c in a { p.pointee = c; p += 1 }
                put(&p, ": no service discovery on this connection; using the handles discovered on connection 0x")
                hex4(&p, fromConnection)
                if let at = openedAt {
                    put(&p, at < 0 ? " (connected at offset -" : " (connected at offset ")
                    decimal(&p, at.magnitude)
                    put(&p, ")")
                }
                return p - out.baseAddress!
            }
        }
    }

    @inline(__always) private static func put(_ p: inout UnsafeMutablePointer<UInt8>, _ s: StaticString) {
        // (withUTF8Buffer: a one-character literal is held as a scalar, with no pointer.)
        let q = s.withUTF8Buffer { b in
            p.update(from: b.baseAddress!, count: b.count)
            return p + b.count
        }
        p = q
    }

    private static func decimal(_ p: inout UnsafeMutablePointer<UInt8>, _ value: UInt64) {
        var v = value
        var digits = 1
        var limit: UInt64 = 10
        while digits < 20, v >= limit { digits += 1; limit = limit &* 10 }
        for i in stride(from: digits - 1, through: 0, by: -1) {
            p[i] = UInt8(truncatingIfNeeded: v % 10) + 0x30
            v /= 10
        }
        p += digits
    }

    @inline(__always) private static func hex4(_ p: inout UnsafeMutablePointer<UInt8>, _ v: UInt16) {
        for i in 0..<4 { p[i] = Hex.digit(UInt8(truncatingIfNeeded: v >> (4 * (3 - i))) & 0xF, uppercase: true) }
        p += 4
    }

    /// A connection where the local controller is the central, with a new session (the caller
    /// then tells it the link is up, in place).
    mutating func newConnection(
        _ address: String, sniffed: Bool,
        inherited: consuming (handles: DiscoveredHandles, notice: @Sendable () -> String)? = nil
    ) -> Connection {
        sessions += 1
        let t: Template
        if let last = template, last.address == address {
            t = last
        } else {
            t = Template(address: address, configuration: configuration, overrides: overrides)
            template = t
        }
        return Connection(
            serial: serial, address: address, sniffed: sniffed, template: t, inherited: inherited, mappings: mappings,
            quirkMemo: quirkMemo, spareActions: &spareActions)
    }

    mutating func att(_ p: ATTPacket, _ out: inout [Output]) {
        p.pdu.withUnsafeBytes { raw in
            att(
                adapter: p.adapter, handle: p.connectionHandle, direction: p.direction, pdu: raw,
                timestamp: p.timestamp,
                accessAddress: p.accessAddress, &out)
        }
    }

    /// One ATT PDU to its connection. `deadlinesDone`: no session deadline is before `timestamp`
    /// (the caller fired them, and ``earliest`` is every open session's earliest, exactly).
    /// (Always inlined: the next PDU on the same link, most of them, then costs no call.)
    @inline(__always)
    mutating func att(
        adapter: UInt16, handle: UInt16, direction: ATTDirection, pdu: UnsafeRawBufferPointer, timestamp: Timestamp,
        accessAddress: UInt32?, deadlinesDone: Bool = false, progress: (any ProgressRecordSink)? = nil,
        _ out: inout [Output]
    ) {
        let key = Key(adapter: adapter, handle: handle)
        guard let opcode = pdu.first else { return }
        if hotKey == key, let hotConnection {
            hotConnection._withUnsafeGuaranteedRef {
                deliver($0, opcode, direction, pdu, timestamp, deadlinesDone: deadlinesDone, progress: progress, &out)
            }
            return
        }
        newAtt(key, opcode, direction, pdu, timestamp, accessAddress, deadlinesDone, &out)
    }

    /// ``att(adapter:handle:direction:pdu:timestamp:accessAddress:deadlinesDone:_:)`` on another
    /// link than the last PDU's (out of line: the same link's next PDU, most of them, does not
    /// pay for this part's stack frame).
    @inline(never)
    mutating func newAtt(
        _ key: Key, _ opcode: UInt8, _ direction: ATTDirection, _ pdu: UnsafeRawBufferPointer, _ timestamp: Timestamp,
        _ accessAddress: UInt32?, _ deadlinesDone: Bool, _ out: inout [Output]
    ) {
        let adapter = key.adapter, handle = key.handle
        var deadlinesDone = deadlinesDone
        let c: Connection
        if let known = connections[key] {
            c = known
        } else {
            // No connection event: decide from who sends requests.
            guard let clientSide = CaptureReplay.isClientOpcode(opcode) else { return }
            serial += 1
            let address = "hci\(adapter)/" + Hex.handle(handle)
            let sniffed = accessAddress != nil
            let localIsCentral: Bool
            switch direction {
            case .fromLocal: localIsCentral = clientSide
            case .toLocal: localIsCentral = !clientSide
            default: localIsCentral = true
            }
            if localIsCentral {
                c = newConnection(address, sniffed: sniffed)
                c.connected(at: SessionObserver.eventTime(timestamp), into: &out)
                deadlinesDone = false  // (its own, just set, are not in `earliest`)
            } else {
                if configuration.logs {
                    out.append(
                        .log(
                            "hci\(adapter) connection \(Hex.handle(handle)): this controller is the peripheral (it answers requests); not reported"
                        ))
                }
                c = Connection(serial: serial, address: address, sniffed: sniffed)
            }
            connections[key] = c
        }
        hotKey = key
        hotConnection = .passUnretained(c)
        deliver(c, opcode, direction, pdu, timestamp, deadlinesDone: deadlinesDone, &out)
    }

    /// One ATT PDU to its connection's session.
    @inline(__always)
    mutating func deliver(
        _ c: Connection, _ opcode: UInt8, _ direction: ATTDirection, _ pdu: UnsafeRawBufferPointer,
        _ timestamp: Timestamp, deadlinesDone: Bool, progress: (any ProgressRecordSink)? = nil,
        _ out: inout [Output]
    ) {
        guard c.central else { return }
        let fromCentral: Bool
        switch direction {
        case .fromLocal, .centralToPeripheral: fromCentral = true
        case .toLocal, .peripheralToCentral: fromCentral = false
        case .unknown: fromCentral = CaptureReplay.isClientOpcode(opcode) ?? false
        }
        // (Filed again only when the PDU may have moved its deadline: most do not.)
        if c.pdu(
            pdu, fromCentral: fromCentral, at: SessionObserver.eventTime(timestamp), deadlinesDone: deadlinesDone,
            progress: progress, into: &out)
        {
            rearm(c)
        }
    }

    mutating func disconnected(_ d: Disconnection, _ out: inout [Output]) {
        let key = Key(adapter: d.adapter, handle: d.connectionHandle)
        hotKey = nil
        hotConnection = nil
        guard let c = connections.removeValue(forKey: key) else { return }
        if c.central {
            c.disconnected(
                d.cause ?? CaptureReplay.reasonText(d.reason), at: SessionObserver.eventTime(d.timestamp), into: &out)
            end(key, c)
        }
        disarm(c)
    }

    /// A connection ends: its measurements are counted, its new mapping kept for the next ones,
    /// and its values no mapping named are noted.
    mutating func end(_ key: Key, _ c: Connection) {
        if c.central { endedMeasurements += c.measurements }
        // (Swapped out in place: reading them through the class copied the whole observer.)
        if c.central { c.handOverSpares(&quirkMemo, &spareActions) }
        if c.central, let m = c.session.madeMapping {
            mappings.insert(m, at: 0)
            if mappings.count > Self.maximumMappings { mappings.removeLast() }
        }
        if c.central, let peer = c.peer {
            if let d = c.discovered(connectionHandle: key.handle) {
                if learned[peer] != nil || learned.count < Self.maximumLearnedPeers {
                    learned[peer] = d
                    discoveredPeers.insert(peer)
                    lastPeer = nil
                    lastKnown = nil
                }
            } else if c.session.lackedDiscovery {
                lacking.insert(peer)
            } else if c.usedStartMap {
                // (Most reconnects are to the peer of the one before: not hashed again.)
                if lastEndedInheritedPeer != peer {
                    endedInheritedPeers.insert(peer)
                    lastEndedInheritedPeer = peer
                }
                if recordsInheritedUses {
                    endedInheritedUses.append(InheritedUse(peer: peer, connectionHandle: key.handle))
                }
            }
        }
        // (The session read in place: a copy of the observer costs more than the rest of this.)
        // (A connection that used an earlier one's map is reported too: its values on handles
        // that map does not cover were lost, not merely of no interest.)
        guard c.central, !c.followed, !c.session.isMapped || c.session.usedInherited,
            !c.session.unmappedHandles.isEmpty
        else { return }
        var u = Unmapped(
            adapter: key.adapter, connectionHandle: key.handle, address: c.address, handles: c.session.unmappedHandles)
        u.usedEarlierMap = c.session.usedInherited
        unmapped.append(u)
    }

    // MARK: - Deadlines

    /// Files `c`'s deadline in ``armed`` after something may have changed it (a PDU, a deadline
    /// fired, the link up), and keeps ``earliest``. (Most PDUs leave it as it was: that costs one comparison.)
    @inline(__always)
    mutating func rearm(_ c: Connection) {
        let d = c.deadline
        if c.armedAt < 0 ? d == nil : d == c.armedDeadline { return }
        refile(c, d)
    }

    /// ``rearm(_:)`` for a changed deadline.
    @inline(never)
    mutating func refile(_ c: Connection, _ d: Timestamp?) {
        if let d {
            let earlier = c.armedAt < 0 || d < c.armedDeadline
            c.armedDeadline = d
            if c.armedAt < 0 {
                c.armedAt = armed.count
                armed.append(c)
            }
            // (Alone there, most often: no order to keep.)
            if armed.count > 1 {
                if earlier { siftUp(c.armedAt) } else { siftDown(c.armedAt) }
            }
        } else {
            unfile(c)
        }
        earliest = armed.first?.armedDeadline
    }

    /// Takes a connection that leaves ``connections`` out of ``armed``.
    mutating func disarm(_ c: Connection) {
        guard c.armedAt >= 0 else { return }
        unfile(c)
        earliest = armed.first?.armedDeadline
    }

    private mutating func unfile(_ c: Connection) {
        let i = c.armedAt
        c.armedAt = -1
        let last = armed.removeLast()
        guard i < armed.count else { return }  // (it was the last)
        armed[i] = last
        last.armedAt = i
        siftDown(i)
        siftUp(last.armedAt)
    }

    /// Whether `a` is due before `b`: the earlier deadline, or on the same one, the connection opened first.
    @inline(__always) private static func before(_ a: Connection, _ b: Connection) -> Bool {
        a.armedDeadline < b.armedDeadline || (a.armedDeadline == b.armedDeadline && a.serial < b.serial)
    }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.before(armed[i], armed[parent]) else { return }
            armed.swapAt(i, parent)
            armed[i].armedAt = i
            armed[parent].armedAt = parent
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let left = 2 * i + 1
            guard left < armed.count else { return }
            var first = left
            if left + 1 < armed.count, Self.before(armed[left + 1], armed[left]) { first = left + 1 }
            guard Self.before(armed[first], armed[i]) else { return }
            armed.swapAt(i, first)
            armed[i].armedAt = i
            armed[first].armedAt = first
            i = first
        }
    }

    /// Fires every session deadline before `t`, earliest first (on the same deadline, the
    /// connection opened first).
    mutating func fireDeadlines(before t: Timestamp, _ out: inout [Output]) {
        while let c = armed.first, c.armedDeadline < t {
            c.advance(to: c.armedDeadline, inclusive: true, into: &out)
            rearm(c)
        }
        earliest = armed.first?.armedDeadline
    }

    // MARK: - Helpers

    /// True for PDUs a client sends, false for a server's, nil for opcodes that don't say.
    static func isClientOpcode(_ op: UInt8) -> Bool? {
        switch op {
        case 0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x1E, 0x20, 0x52, 0xD2: true
        case 0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19, 0x1B, 0x1D, 0x21, 0x23: false
        default: nil
        }
    }

    /// An HCI disconnection reason for the session's end message.
    static func reasonText(_ reason: UInt8) -> String {
        // The commonest whole (literals: every session ends with one).
        switch reason {
        case 0x08: return "connection timeout (0x08)"
        case 0x13: return "remote user terminated connection (0x13)"
        case 0x16: return "connection terminated by local host (0x16)"
        default: break
        }
        let name: String
        switch reason {
        case 0x05: name = "authentication failure"
        case 0x06: name = "PIN or key missing"
        case 0x08: name = "connection timeout"
        case 0x13: name = "remote user terminated connection"
        case 0x14: name = "remote device terminated connection due to low resources"
        case 0x15: name = "remote device terminated connection due to power off"
        case 0x16: name = "connection terminated by local host"
        case 0x22: name = "LL response timeout"
        case 0x3B: name = "unacceptable connection parameters"
        case 0x3D: name = "connection terminated due to MIC failure"
        case 0x3E: name = "connection failed to be established"
        default: name = "reason"
        }
        let hex = String(reason, radix: 16, uppercase: true)
        return "\(name) (0x\(hex.count < 2 ? "0" + hex : hex))"
    }
}

// MARK: - Driving a replay from a reader

extension CaptureReplay {
    /// How ``replay(_:into:before:deliver:)`` ended.
    public enum Ending: Sendable, Equatable {
        /// The records ran out.
        case end
        /// A reader error that ends the capture (a cut, an oversize length): the records before it were replayed.
        case fault(CaptureError)
        /// `deliver` asked to stop.
        case stopped
    }

    /// What a replay gives out for a reader error it goes on after: a `.warning` (the capture is
    /// damaged there), but a `.notice` for a pcapng interface of a link type that is not
    /// Bluetooth (an Ethernet interface captured beside the Bluetooth one): its packets are
    /// skipped, and a whole capture is no damage.
    public static func skipped(_ error: CaptureError) -> Output {
        error.code == .unknownDatalink ? .notice(error.summary) : .warning(error)
    }

    /// Feeds every record `reader` gives, in order, as `cuff replay` does: an error the reader can
    /// go on after becomes a `.warning` output (``skipped(_:)``); any other ends the replay. Once `out` holds at
    /// least `batch` outputs after a record, `deliver` gets them (it may empty the array) and
    /// returns false to stop; what is left in `out` at the end is the caller's, as is
    /// ``finish(_:into:)`` (a stretch of a longer capture is not its end).
    public mutating func replay(
        _ reader: inout CaptureReader<FileByteSource>, into out: inout [Output],
        before: ((HCIRecord) -> Void)? = nil, batch: Int = 1, progress: (any ProgressRecordSink)? = nil,
        deliver: (inout [Output]) -> Bool
    ) -> Ending {
        replayRecords(&reader, into: &out, before: before, batch: batch, progress: progress, deliver: deliver)
    }

    /// ``replay(_:into:before:deliver:)`` for records in memory (a stretch of a file).
    public mutating func replay(
        _ reader: inout CaptureReader<ArrayByteSource>, into out: inout [Output],
        before: ((HCIRecord) -> Void)? = nil, batch: Int = 1, progress: (any ProgressRecordSink)? = nil,
        deliver: (inout [Output]) -> Bool
    ) -> Ending {
        replayRecords(&reader, into: &out, before: before, batch: batch, progress: progress, deliver: deliver)
    }

    /// Generic here, specialised for the two sources above inside this module.
    ///
    /// `progress`: a cuff-pressure progress record the short path makes while `out` is empty goes
    /// there instead of into `out` (no output to store, read back and destroy: most of a
    /// capture's). `deliver` then takes `out` after every record that left something in it, so
    /// that the two keep their order.
    mutating func replayRecords<S: ByteSource>(
        _ reader: inout CaptureReader<S>, into out: inout [Output],
        before: ((HCIRecord) -> Void)?, batch: Int, progress: (any ProgressRecordSink)? = nil,
        deliver: (inout [Output]) -> Bool
    ) -> Ending {
        let batch = progress == nil ? batch : 1
        var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        while true {
            if before == nil {
                // The records whole in the reader's buffer, in one loop (what follows reads the
                // one that stopped it: a cut, a refill, an error to name, the end).
                let goOn = reader.forEachBuffered { header, body, datalink, offset in
                    if !take(
                        RecordView(header: header, body: body, datalink: datalink, fileOffset: offset), &out,
                        progress: progress)
                    {
                        BTSnoop.fill(&record, header: header, body: body, datalink: datalink, fileOffset: offset)
                        consume(record, into: &out)
                    }
                    return !(out.count >= batch && !out.isEmpty && !deliver(&out))
                }
                if !goOn { return .stopped }
            }
            do {
                if let before {
                    guard try reader.next(into: &record) else { return .end }
                    before(record)
                    consume(record, into: &out)
                } else {
                    // A whole ATT frame in the reader's buffer is taken from there, without a copy.
                    switch try reader.next(into: &record, lending: { take($0, &out, progress: progress) }) {
                    case .end: return .end
                    case .record: consume(record, into: &out)
                    case .taken: break
                    }
                }
            } catch {
                guard error.isRecoverable else { return .fault(error) }
                out.append(Self.skipped(error))
            }
            if out.count >= batch, !out.isEmpty, !deliver(&out) { return .stopped }
        }
    }
}
