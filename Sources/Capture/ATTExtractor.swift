// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// Turns a stream of ``HCIRecord``s into connections and reassembled ATT PDUs: HCI → ACL → L2CAP → ATT.
///
/// A pure state machine: feed records in file order with ``consume(_:into:)``, collect
/// ``CaptureEvent``s. Connections are tracked per (adapter, handle) from LE Connection Complete
/// (LE Meta 0x3E sub 0x01), LE Enhanced Connection Complete (sub 0x0A, v2 0x29) and Disconnection
/// Complete (0x05). ACL fragments are reassembled per connection and direction (packet boundary
/// 0b00/0b10/0b11 start, 0b01 continuation); frames on CID 0x0004 become ``CaptureEvent/att(_:)``.
/// ATT on a handle with no connection event seen still comes through with
/// ``ATTPacket/connectionKnown`` false.
///
/// ### Bad fragments
/// A continuation without a start, a start while a frame is incomplete (`acl_out_of_order`), an ACL
/// length or L2CAP length that disagrees with the bytes (`l2cap_length_mismatch`) and a cut-short
/// HCI header (`malformed_packet`) produce a ``CaptureEvent/warning(_:)``, drop the affected frame and
/// let the stream go on — a capture that lost one packet still yields every later session. With
/// `strict: true` the same conditions throw instead.
///
/// Memory is bounded: a frame never grows past 4 + 65535 bytes, because the L2CAP length is checked
/// as soon as its header is complete; a handle with no connection event and nothing pending is not
/// remembered; and at most ``maximumTrackedLinks`` links are tracked at once (beyond that an idle
/// link is forgotten, so its later ATT reads as `connectionKnown == false`).
///
/// Sniffer records (``HCIPacketKind/linkLayer``, LINKTYPE 256) are handled per access address:
/// CONNECT_IND on the advertising channel announces the link, unencrypted data-channel PDUs
/// (LLID 2 start, 1 continuation) are reassembled, LL_TERMINATE_IND ends it. Encrypted links
/// (after LL_ENC_REQ, unless the pseudo-header says decrypted) and CRC failures are skipped;
/// an exact retransmission (the SN, LLID and bytes of that side's previous packet, empty ones
/// included) is dropped.
public struct ATTExtractor: Sendable {
    public static let attCID: UInt16 = 0x0004
    /// Most connections (HCI or sniffed) tracked at once.
    public static let maximumTrackedLinks = 512
    public let strict: Bool

    private var links = LinkTable()
    private var sniffed: [UInt32: SniffedLink] = [:]
    private var nextSniffedHandle: UInt16 = 0

    /// What ``singleFrame(_:)`` needs of the last link it looked up; cleared whenever `links` may change.
    struct HotLink: Sendable {
        var key: LinkKey
        var known: Bool
        var txActive: Bool
        var rxActive: Bool
    }
    private var hot: HotLink?

    struct LinkKey: Hashable, Sendable {
        var adapter: UInt16
        var handle: UInt16
    }

    struct Reassembly: Sendable {
        var buffer: [UInt8] = []
        var active = false
        var timestamp = Timestamp.zero
        var fileOffset: Int64 = 0
    }

    struct Link: Sendable {
        var known = false
        var tx = Reassembly()
        var rx = Reassembly()
    }

    /// The tracked links, in the order they came: searched by key, not hashed (a capture has a
    /// handful open at once, at most ``maximumTrackedLinks``, and most records look one up).
    struct LinkTable: Sendable {
        /// `adapter << 16 | handle` of each link, and the link at the same index.
        private var keys: [UInt32] = []
        var links: [Link] = []

        var count: Int { keys.count }

        static func packed(_ key: LinkKey) -> UInt32 { UInt32(key.adapter) << 16 | UInt32(key.handle) }

        func index(of key: LinkKey) -> Int? { keys.firstIndex(of: Self.packed(key)) }

        /// Adds a link (its key not in the table); returns its index.
        mutating func append(_ key: LinkKey, _ link: Link) -> Int {
            keys.append(Self.packed(key))
            links.append(link)
            return keys.count - 1
        }

        /// Sets the link of `key`, adding it when new.
        mutating func set(_ key: LinkKey, _ link: Link) {
            if let i = index(of: key) { links[i] = link } else { _ = append(key, link) }
        }

        mutating func remove(at index: Int) {
            keys.remove(at: index)
            links.remove(at: index)
        }

        mutating func remove(_ key: LinkKey) {
            if let i = index(of: key) { remove(at: i) }
        }

        /// Removes every link whose key satisfies `drop`.
        mutating func removeAll(where drop: (LinkKey) -> Bool) {
            var i = 0
            while i < keys.count {
                if drop(LinkKey(adapter: UInt16(keys[i] >> 16), handle: UInt16(truncatingIfNeeded: keys[i]))) {
                    remove(at: i)
                } else {
                    i += 1
                }
            }
        }
    }

    struct SniffedLink: Sendable {
        var handle: UInt16
        var known: Bool
        var encrypted = false
        var toPeripheral = Reassembly()
        var toCentral = Reassembly()
        var other = Reassembly()
        var lastPDU: [Int: [UInt8]] = [:]
    }

    public init(strict: Bool = false) { self.strict = strict }

    /// Connections currently tracked (HCI and sniffed).
    public var trackedLinkCount: Int { links.count + sniffed.count }

    /// Feeds one record; returns the events it completes.
    public mutating func consume(_ record: HCIRecord) throws(CaptureError) -> [CaptureEvent] {
        var events: [CaptureEvent] = []
        try consume(record, into: &events)
        return events
    }

    /// Where a whole ATT PDU sits inside one ACL record.
    public struct SingleFrame: Sendable, Hashable {
        public var adapter: UInt16
        public var connectionHandle: UInt16
        public var direction: ATTDirection
        public var connectionKnown: Bool
        /// The ATT PDU's bytes: indices into the record's `payload`.
        public var pdu: Range<Int>
    }

    /// The short path of ``consume(_:into:)`` for the commonest record: an ACL fragment that holds a
    /// whole L2CAP frame on the ATT channel, on a tracked link with no frame pending that way.
    ///
    /// For such a record `consume` would change nothing and emit exactly one `.att` event whose
    /// PDU is `record.payload[frame.pdu]`; this returns that without copying. Anything else gives
    /// nil, and the record must go through `consume`.
    public mutating func singleFrame(_ record: HCIRecord) -> SingleFrame? {
        guard case .aclData = record.kind else { return nil }
        return record.payload.withUnsafeBytes {
            singleFrame(adapter: record.adapterIndex, direction: record.direction, payload: $0)
        }
    }

    /// ``singleFrame(_:)`` of an ACL record's parts (a payload lent by a reader). (Always
    /// inlined: the replay asks for nearly every record.)
    @inline(__always)
    mutating func singleFrame(adapter: UInt16, direction: HCIDirection, payload: UnsafeRawBufferPointer) -> SingleFrame?
    {
        guard payload.count >= 8 else { return nil }
        let handleAndFlags = UInt16(payload[0]) | UInt16(payload[1]) << 8
        let aclLength = Int(UInt16(payload[2]) | UInt16(payload[3]) << 8)
        let l2capLength = Int(UInt16(payload[4]) | UInt16(payload[5]) << 8)
        let cid = UInt16(payload[6]) | UInt16(payload[7]) << 8
        guard (handleAndFlags >> 12) & 0x3 != 0b01, aclLength == payload.count - 4, l2capLength == payload.count - 8,
            cid == Self.attCID
        else { return nil }
        let key = LinkKey(adapter: adapter, handle: handleAndFlags & 0x0FFF)
        let sent = direction == .sent
        let state: HotLink
        if let hot, hot.key == key {
            state = hot
        } else {
            guard let index = links.index(of: key) else { return nil }
            let link = links.links[index]
            state = HotLink(key: key, known: link.known, txActive: link.tx.active, rxActive: link.rx.active)
            hot = state
        }
        guard !(sent ? state.txActive : state.rxActive) else { return nil }
        return SingleFrame(
            adapter: key.adapter, connectionHandle: key.handle, direction: sent ? .fromLocal : .toLocal,
            connectionKnown: state.known, pdu: 8..<payload.count)
    }

    /// Feeds one record, appending the events it completes to `events`.
    public mutating func consume(_ record: HCIRecord, into events: inout [CaptureEvent]) throws(CaptureError) {
        // Only this path changes `links`: whatever changes it forgets the hot link (an HCI event
        // that does not touch a link, most of them, keeps it).
        switch record.kind {
        case .event: try handleEvent(record, &events)
        case .aclData:
            hot = nil
            try handleACL(record, &events)
        case .linkLayer: try handleLinkLayer(record, &events)
        case .monitorDeleteIndex:
            // The controller is gone (btmon's Delete Index: unplugged, or its driver unbound): its
            // links end there, as with a Disconnection Complete (probe Q: its session stayed open
            // to the capture's end, and ended there as cut mid-measurement).
            hot = nil
            links.removeAll { key in
                guard key.adapter == record.adapterIndex else { return false }
                events.append(
                    .disconnected(
                        Disconnection(
                            adapter: key.adapter, connectionHandle: key.handle, reason: Self.localHostTerminated,
                            timestamp: record.timestamp, fileOffset: record.fileOffset,
                            cause: "the controller hci\(key.adapter) was removed")))
                return true
            }
        default: break
        }
    }

    /// The HCI reason a link ended by its controller's removal is given (none is sent): the host ended it.
    static let localHostTerminated: UInt8 = 0x16

    /// Forgets one link that has no frame pending when the table is full (any link, if all have).
    private mutating func makeRoom(for key: LinkKey) {
        guard links.index(of: key) == nil, links.count >= Self.maximumTrackedLinks else { return }
        links.remove(at: links.links.firstIndex { !$0.tx.active && !$0.rx.active } ?? 0)
    }

    private mutating func makeRoomSniffed(for aa: UInt32) {
        guard sniffed[aa] == nil, sniffed.count >= Self.maximumTrackedLinks else { return }
        sniffed[sniffed.first!.key] = nil
    }

    // MARK: - Warnings

    private func warn(
        _ code: CaptureError.Code, _ message: String, _ record: HCIRecord,
        _ events: inout [CaptureEvent]
    ) throws(CaptureError) {
        try Self.warn(strict: strict, code, message, record, &events)
    }

    private static func warn(
        strict: Bool, _ code: CaptureError.Code, _ message: String, _ record: HCIRecord,
        _ events: inout [CaptureEvent]
    ) throws(CaptureError) {
        let error = CaptureError(code, message, offset: record.fileOffset, isRecoverable: true)
        if strict { throw error }
        events.append(.warning(error))
    }

    // MARK: - HCI events

    /// True for an HCI event payload that ``consume(_:into:)`` passes over without a change or a
    /// warning: a whole header and parameters, and neither Disconnection Complete nor LE Meta.
    static func ignores(event payload: UnsafeRawBufferPointer) -> Bool {
        guard payload.count >= 2, payload.count - 2 >= Int(payload[1]) else { return false }
        return payload[0] != 0x05 && payload[0] != 0x3E
    }

    private mutating func handleEvent(_ record: HCIRecord, _ events: inout [CaptureEvent]) throws(CaptureError) {
        var r = ByteReader(record.payload)
        guard let code = r.readUInt8(), let plen = r.readUInt8(), let params = r.readBytes(Int(plen)) else {
            return try warn(
                .malformedPacket,
                "expected an HCI event header and its parameters, found \(record.payload.count) bytes", record, &events)
        }
        var p = ByteReader(params)
        switch code {
        case 0x05:  // Disconnection Complete: status, handle, reason
            guard let status = p.readUInt8(), let handle = p.readUInt16(), let reason = p.readUInt8() else {
                return try warn(
                    .malformedPacket, "expected a 4-byte Disconnection Complete, found \(plen) bytes", record, &events)
            }
            guard status == 0 else { return }
            let key = LinkKey(adapter: record.adapterIndex, handle: handle & 0x0FFF)
            hot = nil
            links.remove(key)
            events.append(
                .disconnected(
                    Disconnection(
                        adapter: key.adapter, connectionHandle: key.handle, reason: reason,
                        timestamp: record.timestamp, fileOffset: record.fileOffset)))
        case 0x3E:
            guard let sub = p.readUInt8() else { return }
            guard sub == 0x01 || sub == 0x0A || sub == 0x29 else { return }
            // Common prefix of LE (Enhanced) Connection Complete: status, handle, role, peer type, peer address.
            guard let status = p.readUInt8(), let handle = p.readUInt16(), let role = p.readUInt8(),
                let peerType = p.readUInt8(), let peer = p.readAddress()
            else {
                return try warn(
                    .malformedPacket,
                    "expected an LE Connection Complete with handle, role and peer address, found \(plen) bytes",
                    record, &events)
            }
            guard status == 0 else { return }
            let key = LinkKey(adapter: record.adapterIndex, handle: handle & 0x0FFF)
            hot = nil
            makeRoom(for: key)
            links.set(key, Link(known: true))
            events.append(
                .connected(
                    ConnectionInfo(
                        adapter: key.adapter, connectionHandle: key.handle,
                        role: role == 0 ? .central : .peripheral, peerAddress: peer,
                        peerAddressType: AddressType(rawValue: peerType),
                        timestamp: record.timestamp, fileOffset: record.fileOffset)))
        default:
            break
        }
    }

    // MARK: - ACL

    private mutating func handleACL(_ record: HCIRecord, _ events: inout [CaptureEvent]) throws(CaptureError) {
        var r = ByteReader(record.payload)
        guard let handleAndFlags = r.readUInt16(), let length = r.readUInt16() else {
            return try warn(
                .malformedPacket, "expected a 4-byte ACL header, found \(record.payload.count) bytes", record, &events)
        }
        let key = LinkKey(adapter: record.adapterIndex, handle: handleAndFlags & 0x0FFF)
        let boundary = (handleAndFlags >> 12) & 0x3
        let data = r.readRemaining()
        let index: Int
        if let i = links.index(of: key) {
            index = i
        } else {
            makeRoom(for: key)
            index = links.append(key, Link())
        }
        let strict = self.strict
        // Mutate the entry in place (one search, buffers stay uniquely referenced).
        let keep = try Self.feed(
            &links.links[index], key: key, boundary: boundary, declared: Int(length),
            data: data, record: record, strict: strict, events: &events)
        // A handle with no connection event and nothing pending needs no memory.
        if !keep { links.remove(at: index) }
    }

    private static func feed(
        _ link: inout Link, key: LinkKey, boundary: UInt16, declared: Int, data: ArraySlice<UInt8>,
        record: HCIRecord, strict: Bool, events: inout [CaptureEvent]
    ) throws(CaptureError) -> Bool {
        let known = link.known
        if record.direction == .sent {
            try reassemble(
                &link.tx, boundary: boundary, declared: declared, data: data, record: record, strict: strict,
                events: &events
            ) { pdu, timestamp, offset in
                .att(
                    ATTPacket(
                        adapter: key.adapter, connectionHandle: key.handle, direction: .fromLocal, pdu: pdu,
                        timestamp: timestamp, fileOffset: offset, connectionKnown: known))
            }
        } else {
            try reassemble(
                &link.rx, boundary: boundary, declared: declared, data: data, record: record, strict: strict,
                events: &events
            ) { pdu, timestamp, offset in
                .att(
                    ATTPacket(
                        adapter: key.adapter, connectionHandle: key.handle, direction: .toLocal, pdu: pdu,
                        timestamp: timestamp, fileOffset: offset, connectionKnown: known))
            }
        }
        return link.known || link.tx.active || link.rx.active
    }

    /// One fragment into one direction's buffer; emits the ATT event when a CID-4 frame completes.
    ///
    /// `boundary`: 0b01 continuation, anything else a start. `declared` is the fragment's own length
    /// field (ACL data length, LL PDU length), checked against `data`.
    private static func reassemble(
        _ re: inout Reassembly, boundary: UInt16, declared: Int, data: ArraySlice<UInt8>,
        record: HCIRecord, strict: Bool, events: inout [CaptureEvent],
        make: (_ pdu: [UInt8], _ timestamp: Timestamp, _ fileOffset: Int64) -> CaptureEvent
    ) throws(CaptureError) {
        func warn(_ code: CaptureError.Code, _ message: String) throws(CaptureError) {
            try Self.warn(strict: strict, code, message, record, &events)
        }
        // Fast path: a whole L2CAP frame in one fragment, nothing pending.
        if boundary != 0b01 && !re.active && declared == data.count && data.count >= 4 {
            var h = ByteReader(data.prefix(4))
            let length = Int(h.readUInt16()!)
            let cid = h.readUInt16()!
            if length + 4 == data.count {
                if cid == ATTExtractor.attCID {
                    events.append(make(Array(data.dropFirst(4)), record.timestamp, record.fileOffset))
                }
                return
            }
        }
        guard declared == data.count else {
            let wasActive = re.active
            re = Reassembly()
            return try warn(
                .l2capLengthMismatch,
                "expected \(declared) data bytes as the fragment header says, found \(data.count)"
                    + (wasActive ? "; the pending frame is dropped" : ""))
        }
        if boundary == 0b01 {
            guard re.active else {
                return try warn(
                    .aclOutOfOrder,
                    "expected a start fragment, found a continuation of \(data.count) bytes with no frame pending")
            }
            re.buffer.append(contentsOf: data)
        } else {
            if re.active {
                let pending = re.buffer.count
                re = Reassembly()
                try warn(
                    .aclOutOfOrder,
                    "expected a continuation, found a new start while \(pending) bytes of a frame were pending; the pending frame is dropped"
                )
            }
            re.active = true
            re.buffer.removeAll(keepingCapacity: true)
            re.buffer.append(contentsOf: data)
            re.timestamp = record.timestamp
            re.fileOffset = record.fileOffset
        }
        guard re.buffer.count >= 4 else { return }
        var h = ByteReader(re.buffer[0..<4])
        let l2capLength = Int(h.readUInt16()!)
        let cid = h.readUInt16()!
        let total = 4 + l2capLength
        if re.buffer.count < total { return }
        if re.buffer.count > total {
            let have = re.buffer.count
            re = Reassembly()
            return try warn(
                .l2capLengthMismatch,
                "expected an L2CAP frame of \(total) bytes (length field \(l2capLength)), the fragments carry \(have)")
        }
        re.active = false
        if cid == ATTExtractor.attCID {
            events.append(make(Array(re.buffer[4...]), re.timestamp, re.fileOffset))
        }
        re.buffer.removeAll(keepingCapacity: true)
    }

    // MARK: - Sniffed link layer (LINKTYPE 256)

    private mutating func handleLinkLayer(_ record: HCIRecord, _ events: inout [CaptureEvent]) throws(CaptureError) {
        guard let packet = LinkLayer.Packet(record.payload) else {
            return try warn(
                .malformedPacket,
                "expected a pseudo-header, access address and a PDU as long as its header says, found \(record.payload.count) bytes",
                record, &events)
        }
        if packet.crcChecked && !packet.crcValid { return }
        if packet.accessAddress == LinkLayer.advertisingAccessAddress {
            guard packet.header0 & 0x0F == 0x05, let c = LinkLayer.ConnectIndication(packet) else { return }
            let handle = nextSniffedHandle
            nextSniffedHandle &+= 1
            makeRoomSniffed(for: c.accessAddress)
            sniffed[c.accessAddress] = SniffedLink(handle: handle, known: true)
            events.append(
                .connected(
                    ConnectionInfo(
                        adapter: record.adapterIndex, connectionHandle: handle, role: .central,
                        peerAddress: c.advertiser, peerAddressType: c.advertiserType,
                        accessAddress: c.accessAddress, timestamp: record.timestamp,
                        fileOffset: record.fileOffset)))
            return
        }
        let aa = packet.accessAddress
        var link: SniffedLink
        if let l = sniffed[aa] {
            link = l
        } else {
            makeRoomSniffed(for: aa)
            link = SniffedLink(handle: nextSniffedHandle, known: false)
            nextSniffedHandle &+= 1
        }
        sniffed[aa] = nil
        defer { sniffed[aa] = link }
        let llid = packet.header0 & 0x03
        let sn = Int(packet.header0 >> 3 & 1)
        let directionKey =
            packet.direction == .centralToPeripheral ? 0 : packet.direction == .peripheralToCentral ? 1 : 2
        // An exact retransmission (the SN and bytes of the side's previous packet, same
        // direction) was already taken. Empty packets count: they move the SN on too, so the
        // same bytes again after an odd number of them are a new packet, not a resend.
        let signature = [UInt8(llid), UInt8(sn)] + packet.pdu
        if link.lastPDU[directionKey] == signature { return }
        link.lastPDU[directionKey] = signature
        if link.encrypted && !packet.decrypted { return }
        switch llid {
        case 0b11:  // LL control
            guard let opcode = packet.pdu.first else { return }
            if opcode == 0x03 { link.encrypted = true }  // LL_ENC_REQ
            if opcode == 0x02, packet.pdu.count >= 2 {  // LL_TERMINATE_IND
                events.append(
                    .disconnected(
                        Disconnection(
                            adapter: record.adapterIndex, connectionHandle: link.handle,
                            reason: packet.pdu[1], timestamp: record.timestamp,
                            fileOffset: record.fileOffset)))
                link = SniffedLink(handle: link.handle, known: link.known)
            }
        case 0b01 where packet.pdu.isEmpty:
            return  // empty PDU: keep-alive, not a continuation
        case 0b01, 0b10:
            let handle = link.handle, known = link.known
            let make: (_ pdu: [UInt8], _ timestamp: Timestamp, _ fileOffset: Int64) -> CaptureEvent = {
                pdu, timestamp, offset in
                .att(
                    ATTPacket(
                        adapter: record.adapterIndex, connectionHandle: handle, direction: packet.direction, pdu: pdu,
                        timestamp: timestamp, fileOffset: offset, connectionKnown: known, accessAddress: aa))
            }
            let boundary: UInt16 = llid == 0b01 ? 0b01 : 0b10
            switch directionKey {
            case 0:
                try Self.reassemble(
                    &link.toPeripheral, boundary: boundary, declared: packet.pdu.count, data: packet.pdu[...],
                    record: record, strict: strict, events: &events, make: make)
            case 1:
                try Self.reassemble(
                    &link.toCentral, boundary: boundary, declared: packet.pdu.count, data: packet.pdu[...],
                    record: record, strict: strict, events: &events, make: make)
            default:
                try Self.reassemble(
                    &link.other, boundary: boundary, declared: packet.pdu.count, data: packet.pdu[...], record: record,
                    strict: strict, events: &events, make: make)
            }
        default:
            return
        }
    }
}
