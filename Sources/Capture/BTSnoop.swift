// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// btsnoop datalink types (BlueZ `src/shared/btsnoop.h`).
public enum BTSnoopDatalink: UInt32, Sendable, CaseIterable {
    /// Un-encapsulated HCI (H1): flags bit 0 is the direction, bit 1 command/event vs data.
    case hci = 1001
    /// HCI UART (H4): the first payload byte is the H4 packet type.
    case uart = 1002
    /// Linux monitor (`btmon -w`): flags = index << 16 | opcode.
    case monitor = 2001
}

/// The btsnoop v1 file format: constants and pure record codecs.
///
/// File header: `"btsnoop\0"`, BE32 version (1), BE32 datalink. Each record: BE32 original length,
/// BE32 included length, BE32 flags, BE32 cumulative drops, BE64 timestamp in µs since
/// 0000-01-01, then the included bytes.
///
/// The epoch: BlueZ writes `(unix_seconds − 946684800) · 10⁶ + µs + 0x00E03AB44A676000`, i.e.
/// 0x00E03AB44A676000 is year 0 → **2000**-01-01, so year 0 → 1970-01-01 is 0x00DCDDB30F2F8000
/// (62 168 256 000 000 000 µs, Wireshark's `KUnixTimeBase`). Checked on the shared btmon sample:
/// its first record decodes to the capture day, and `tshark -T fields -e frame.time_epoch` agrees
/// to the microsecond. Subtracting 0x00E03AB44A676000 alone lands 30 years early.
public enum BTSnoop {
    public static let magic: [UInt8] = Array("btsnoop".utf8) + [0]
    public static let fileHeaderLength = 16
    public static let recordHeaderLength = 24
    /// µs from 0000-01-01 to 1970-01-01 in btsnoop's calendar.
    public static let unixEpochMicroseconds: Int64 = 0x00DC_DDB3_0F2F_8000

    struct RecordHeader {
        var originalLength: UInt32
        var includedLength: UInt32
        var flags: UInt32
        var drops: UInt32
        var timestamp: UInt64

        /// The header at the start of `raw`, which holds at least ``BTSnoop/recordHeaderLength`` bytes.
        init(loading raw: UnsafeRawBufferPointer) {
            func be32(_ at: Int) -> UInt32 { UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
            self.init(
                originalLength: be32(0), includedLength: be32(4), flags: be32(8), drops: be32(12),
                timestamp: UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
        }

        init(originalLength: UInt32, includedLength: UInt32, flags: UInt32, drops: UInt32, timestamp: UInt64) {
            self.originalLength = originalLength
            self.includedLength = includedLength
            self.flags = flags
            self.drops = drops
            self.timestamp = timestamp
        }
    }

    /// Parses the 16-byte file header. `bytes` must hold all 16.
    static func parseFileHeader(_ bytes: ArraySlice<UInt8>) throws(CaptureError) -> BTSnoopDatalink {
        var r = ByteReader(bytes)
        let magic = r.readBytes(8)!
        guard magic.elementsEqual(BTSnoop.magic) else {
            throw CaptureError(
                .badMagic, "expected btsnoop magic 62 74 73 6e 6f 6f 70 00, found \(Hex.encode(magic))", offset: 0)
        }
        let version = r.readUInt32BigEndian()!
        guard version == 1 else {
            throw CaptureError(.unsupportedVersion, "expected btsnoop version 1, found \(version)", offset: 8)
        }
        let type = r.readUInt32BigEndian()!
        guard let datalink = BTSnoopDatalink(rawValue: type) else {
            throw CaptureError(
                .unknownDatalink, "expected btsnoop datalink 1001, 1002 or 2001, found \(type)", offset: 12)
        }
        return datalink
    }

    static func parseRecordHeader(_ bytes: ArraySlice<UInt8>) -> RecordHeader {
        var r = ByteReader(bytes)
        return RecordHeader(
            originalLength: r.readUInt32BigEndian()!, includedLength: r.readUInt32BigEndian()!,
            flags: r.readUInt32BigEndian()!, drops: r.readUInt32BigEndian()!,
            timestamp: r.readUInt64BigEndian()!)
    }

    /// btsnoop µs-since-year-0 → ``Timestamp`` (ns since the Unix epoch), saturating.
    public static func timestamp(fromBTSnoop ts: UInt64) -> Timestamp {
        let us = Int64(clamping: ts) &- unixEpochMicroseconds
        let (ns, overflow) = us.multipliedReportingOverflow(by: 1000)
        return Timestamp(nanoseconds: overflow ? (us < 0 ? .min : .max) : ns)
    }

    /// btsnoop µs-since-year-0 → ``Timestamp``, or nil when the instant lies outside what a
    /// ``Timestamp`` holds (before 1677-09-21 or after 2262-04-11; a zeroed timestamp is year 0).
    /// The readers skip such a record with a `bad_timestamp` warning.
    @inline(__always) static func usableTimestamp(fromBTSnoop ts: UInt64) -> Timestamp? {
        guard ts <= UInt64(Int64.max) else { return nil }
        let (ns, overflow) = (Int64(ts) &- unixEpochMicroseconds).multipliedReportingOverflow(by: 1000)
        return overflow ? nil : Timestamp(nanoseconds: ns)
    }

    /// Whether a record with this header may be read straight from the buffer (the readers'
    /// short path): a length within bounds, not an empty H4 record, a usable timestamp. Anything
    /// else goes through the checked path, which names the problem.
    @inline(__always) static func takesShortPath(_ header: RecordHeader, datalink: BTSnoopDatalink) -> Bool {
        let included = Int(header.includedLength)
        return included <= HCIRecord.maximumPayloadLength && (datalink != .uart || included > 0)
            && usableTimestamp(fromBTSnoop: header.timestamp) != nil
    }

    /// The recoverable error for a record whose timestamp ``usableTimestamp(fromBTSnoop:)`` rejects.
    static func badTimestamp(_ ts: UInt64, recordOffset: Int64) -> CaptureError {
        CaptureError(
            .badTimestamp,
            "expected a record timestamp between 1677-09-21 and 2262-04-11, found \(ts) µs since 0000-01-01 (0x\(String(ts, radix: 16))); the record is skipped",
            offset: recordOffset + 16, isRecoverable: true)
    }

    /// ``Timestamp`` → btsnoop µs since year 0 (clamped to ≥ 0).
    public static func btsnoopTimestamp(_ t: Timestamp) -> UInt64 {
        let us = t.flooredMicroseconds
        let (v, o) = us.addingReportingOverflow(unixEpochMicroseconds)
        return o ? UInt64(Int64.max) : UInt64(max(0, v))
    }

    /// Turns one record body into an ``HCIRecord``, refilling `record` (its payload storage is reused).
    static func decode(
        _ header: RecordHeader, body: ArraySlice<UInt8>, datalink: BTSnoopDatalink,
        fileOffset: Int64, into record: inout HCIRecord
    ) throws(CaptureError) {
        if datalink == .uart && body.isEmpty {
            throw CaptureError(
                .malformedPacket, "expected an H4 packet-type byte in an empty record",
                offset: fileOffset, isRecoverable: true)
        }
        body.withUnsafeBytes { fill(&record, header: header, body: $0, datalink: datalink, fileOffset: fileOffset) }
    }

    /// ``decode(_:body:datalink:fileOffset:into:)`` for a body in memory that is known good (an H4
    /// body has its type byte).
    static func fill(
        _ record: inout HCIRecord, header: RecordHeader, body: UnsafeRawBufferPointer, datalink: BTSnoopDatalink,
        fileOffset: Int64
    ) {
        record.refill(from: RecordView(header: header, body: body, datalink: datalink, fileOffset: fileOffset))
    }

    /// Encodes one record (header + body) for `datalink`.
    static func encode(_ record: HCIRecord, datalink: BTSnoopDatalink, into w: inout ByteWriter) throws(CaptureError) {
        var flags: UInt32
        var prefix: UInt8?
        switch datalink {
        case .hci:
            switch record.kind {
            case .command, .event: flags = 2
            case .aclData, .scoData: flags = 0
            default:
                throw CaptureError(.unsupportedRecord, "btsnoop datalink 1001 cannot carry a \(record.kind) record")
            }
            flags |= record.direction == .received ? 1 : 0
        case .uart:
            guard let t = record.kind.h4Type else {
                throw CaptureError(.unsupportedRecord, "btsnoop datalink 1002 cannot carry a \(record.kind) record")
            }
            prefix = t
            flags = (record.direction == .received ? 1 : 0) | (record.kind == .command || record.kind == .event ? 2 : 0)
        case .monitor:
            guard let op = record.kind.monitorOpcode(direction: record.direction) else {
                throw CaptureError(.unsupportedRecord, "btsnoop datalink 2001 cannot carry a \(record.kind) record")
            }
            flags = UInt32(record.adapterIndex) << 16 | UInt32(op)
        }
        let length = UInt32(record.payload.count + (prefix == nil ? 0 : 1))
        w.writeBigEndian(length)
        w.writeBigEndian(length)
        w.writeBigEndian(flags)
        w.writeBigEndian(UInt32(0))
        w.writeBigEndian(btsnoopTimestamp(record.timestamp))
        if let prefix { w.write(prefix) }
        w.write(contentsOf: record.payload)
    }
}

/// An ``HCIRecord`` whose payload is borrowed from a reader's buffer (valid only while it is lent).
struct RecordView {
    var timestamp: Timestamp
    var adapterIndex: UInt16
    var direction: HCIDirection
    var kind: HCIPacketKind
    var originalLength: Int
    var fileOffset: Int64
    var payload: UnsafeRawBufferPointer

    init(
        timestamp: Timestamp, adapterIndex: UInt16, direction: HCIDirection, kind: HCIPacketKind, originalLength: Int,
        fileOffset: Int64, payload: UnsafeRawBufferPointer
    ) {
        self.timestamp = timestamp
        self.adapterIndex = adapterIndex
        self.direction = direction
        self.kind = kind
        self.originalLength = originalLength
        self.fileOffset = fileOffset
        self.payload = payload
    }

    /// A record's fields, with `payload` its payload's bytes.
    init(_ record: HCIRecord, payload: UnsafeRawBufferPointer) {
        self.init(
            timestamp: record.timestamp, adapterIndex: record.adapterIndex, direction: record.direction,
            kind: record.kind, originalLength: record.originalLength, fileOffset: record.fileOffset, payload: payload)
    }

    /// What one btsnoop record body holds, per datalink (an H4 body must have its type byte).
    init(header: BTSnoop.RecordHeader, body: UnsafeRawBufferPointer, datalink: BTSnoopDatalink, fileOffset: Int64) {
        let original = Int(header.originalLength)
        payload = body
        switch datalink {
        case .hci:
            direction = header.flags & 1 == 0 ? .sent : .received
            kind = header.flags & 2 == 0 ? .aclData : (direction == .sent ? .command : .event)
            adapterIndex = 0
            originalLength = original
        case .uart:
            direction = header.flags & 1 == 0 ? .sent : .received
            kind = .fromH4(type: body[0])
            adapterIndex = 0
            originalLength = max(0, original - 1)
            payload = UnsafeRawBufferPointer(rebasing: body[1...])
        case .monitor:
            (kind, direction) = HCIPacketKind.fromMonitor(opcode: UInt16(truncatingIfNeeded: header.flags))
            adapterIndex = UInt16(truncatingIfNeeded: header.flags >> 16)
            originalLength = original
        }
        timestamp = BTSnoop.timestamp(fromBTSnoop: header.timestamp)
        self.fileOffset = fileOffset
    }
}

extension HCIRecord {
    /// The record `view` lends, its payload copied.
    init(_ view: RecordView) {
        self.init(
            timestamp: view.timestamp, adapterIndex: view.adapterIndex, direction: view.direction, kind: view.kind,
            payload: Array(view.payload.assumingMemoryBound(to: UInt8.self)), originalLength: view.originalLength,
            fileOffset: view.fileOffset)
    }

    /// Makes this record the one `view` lends (the payload's storage is reused). (Always inlined:
    /// a call of its own, with the array's resize out of line, cost 90 instructions a record on
    /// a capture whose records mostly take the general path.)
    @inline(__always)
    mutating func refill(from view: RecordView) {
        direction = view.direction
        kind = view.kind
        adapterIndex = view.adapterIndex
        originalLength = view.originalLength
        timestamp = view.timestamp
        fileOffset = view.fileOffset
        let payload = view.payload
        let have = self.payload.count
        // Resized to the new length (most often it is the record before's: nothing to do), then
        // copied over whole. (Shrunk from the end and grown by appending the bytes past the old
        // length: emptying it first went through a generic replace call every time.)
        if have > payload.count {
            self.payload.removeLast(have - payload.count)
        } else if have < payload.count {
            self.payload.append(
                contentsOf: UnsafeRawBufferPointer(rebasing: payload[have...]).assumingMemoryBound(to: UInt8.self))
        }
        self.payload.withUnsafeMutableBytes { $0.copyMemory(from: payload) }
    }
}
