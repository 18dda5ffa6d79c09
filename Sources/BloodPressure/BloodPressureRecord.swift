// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// One message of Blood Pressure Record (0x2B36), BPS 1.1: a segmentation header and a segment.
///
/// Header bit 0 first segment, bit 1 last segment, bits 2–7 a rolling counter (0–63).
public struct RecordSegment: Sendable, Hashable {
    public var isFirst: Bool
    public var isLast: Bool
    public var counter: UInt8
    public var data: [UInt8]

    public init(isFirst: Bool, isLast: Bool, counter: UInt8, data: [UInt8]) {
        self.isFirst = isFirst
        self.isLast = isLast
        self.counter = counter & 0x3F
        self.data = data
    }

    public var header: UInt8 { (isFirst ? 1 : 0) | (isLast ? 2 : 0) | counter << 2 }

    public init(header: UInt8, data: [UInt8]) {
        self.init(isFirst: header & 1 != 0, isLast: header & 2 != 0, counter: header >> 2, data: data)
    }

    public static func decode(_ bytes: ArraySlice<UInt8>) throws(BPSDecodingError) -> RecordSegment {
        var r = ByteReader(bytes)
        let h = try r.u8("Segmentation Header")
        return RecordSegment(header: h, data: Array(r.readRemaining()))
    }

    public func encode() -> [UInt8] { [header] + data }

    /// Decodes one message with the fields its place in the record gives it. A first segment
    /// starts the record body: Sequence Number and UUID, then the start of the recorded value
    /// (im97mori's reading of BPS 1.1; RonanB96 repeats them in every segment, which we do not
    /// follow). A later segment carries only continuation bytes (in the last one, the E2E-CRC
    /// when the Feature says so). Only the record as a whole can be decoded further.
    public static func decodeFields(_ bytes: ArraySlice<UInt8>) throws(BPSDecodingError) -> RecordSegmentFields {
        var r = ByteReader(bytes)
        let h = try r.u8("Segmentation Header")
        let segment = RecordSegment(header: h, data: Array(bytes.dropFirst()))
        guard segment.isFirst else {
            return RecordSegmentFields(
                segment: segment, sequenceNumber: nil, recordedUUID: nil, recordedData: segment.data)
        }
        let seq = try r.u16("Sequence Number")
        let uuid = try r.u16("UUID")
        return RecordSegmentFields(
            segment: segment, sequenceNumber: seq, recordedUUID: uuid, recordedData: Array(r.readRemaining()))
    }
}

/// One Blood Pressure Record message, its fields decoded (``RecordSegment/decodeFields(_:)``).
public struct RecordSegmentFields: Sendable, Hashable {
    public var segment: RecordSegment
    /// In a first segment only.
    public var sequenceNumber: UInt16?
    /// The recorded characteristic's UUID, in a first segment only.
    public var recordedUUID: UInt16?
    /// The part of the recorded value this message carries (a last segment's may end with the E2E-CRC).
    public var recordedData: [UInt8]
}

/// A whole Blood Pressure Record: sequence number, the UUID of the recorded characteristic, its
/// value, and the E2E-CRC when the server supports it (Feature bit 6).
public struct BloodPressureRecord: Sendable, Hashable {
    public var sequenceNumber: UInt16
    /// Normally 0x2B34 (Enhanced Blood Pressure Measurement).
    public var recordedUUID: UInt16
    public var recorded: [UInt8]
    public var crc: UInt16?

    public init(sequenceNumber: UInt16, recordedUUID: UInt16 = 0x2B34, recorded: [UInt8], crc: UInt16? = nil) {
        self.sequenceNumber = sequenceNumber
        self.recordedUUID = recordedUUID
        self.recorded = recorded
        self.crc = crc
    }

    /// Decodes a single-segment message (header 0x03: first and last). Multi-segment records go
    /// through ``RecordAssembler``.
    public static func decode(_ bytes: ArraySlice<UInt8>, hasCRC: Bool = false) throws(BPSDecodingError) -> Decoded<
        Self
    > {
        var r = ByteReader(bytes)
        let h = try r.u8("Segmentation Header")
        guard h & 3 == 3 else {
            throw BPSDecodingError(
                .unsupported, field: "Segmentation Header", offset: 0,
                detail:
                    "segment of a multi-segment record (first=\(h & 1), last=\(h >> 1 & 1), counter=\(h >> 2)); reassemble segments first"
            )
        }
        return try decodeBody(r.readRemaining(), hasCRC: hasCRC, baseOffset: 1)
    }

    /// Decodes the reassembled record body (everything after the segmentation headers).
    public static func decodeBody(_ body: ArraySlice<UInt8>, hasCRC: Bool, baseOffset: Int = 0) throws(BPSDecodingError)
        -> Decoded<Self>
    {
        var r = ByteReader(body)
        guard let seq = r.readUInt16() else {
            throw .truncated("Sequence Number", at: baseOffset + r.offset, need: 2, have: r.remaining)
        }
        guard let uuid = r.readUInt16() else {
            throw .truncated("UUID", at: baseOffset + r.offset, need: 2, have: r.remaining)
        }
        let crcLen = hasCRC ? 2 : 0
        guard r.remaining >= crcLen else {
            throw .truncated("E2E-CRC", at: baseOffset + r.offset, need: 2, have: r.remaining)
        }
        let recorded = Array(r.readBytes(r.remaining - crcLen)!)
        let crc = hasCRC ? r.readUInt16() : nil
        var w: [DecodeWarning] = []
        if let crc {
            let computed = E2ECRC.compute(body.prefix(body.count - 2))
            if computed != crc {
                w.append(
                    DecodeWarning(
                        .trailingBytes,
                        "E2E-CRC 0x\(String(crc, radix: 16)) differs from computed 0x\(String(computed, radix: 16)) (CRC-CCITT seed 0xFFFF assumed)",
                        offset: baseOffset + body.count - 2))
            }
        }
        return Decoded(
            value: BloodPressureRecord(sequenceNumber: seq, recordedUUID: uuid, recorded: recorded, crc: crc),
            warnings: w)
    }

    /// The body: sequence number, UUID, recorded value, CRC (computed when `withCRC`).
    public func encodeBody(withCRC: Bool = false) -> [UInt8] {
        var w = ByteWriter(capacity: recorded.count + 6)
        w.write(sequenceNumber)
        w.write(recordedUUID)
        w.write(contentsOf: recorded)
        if withCRC { w.write(crc ?? E2ECRC.compute(w.bytes[...])) }
        return w.bytes
    }

    /// Splits into messages whose size is at most `maxLength` (ATT MTU − 3), counter from `counter`.
    public func segments(maxLength: Int, startCounter: UInt8 = 0, withCRC: Bool = false) -> [RecordSegment] {
        let body = encodeBody(withCRC: withCRC)
        let chunk = max(1, maxLength - 1)
        var out: [RecordSegment] = []
        var i = 0
        var c = startCounter
        repeat {
            let end = min(body.count, i + chunk)
            out.append(
                RecordSegment(isFirst: i == 0, isLast: end == body.count, counter: c, data: Array(body[i..<end])))
            c = (c + 1) & 0x3F
            i = end
        } while i < body.count
        return out
    }

    /// The recorded Enhanced Blood Pressure Measurement, when the UUID says so.
    public func enhancedMeasurement() throws(BPSDecodingError) -> Decoded<EnhancedBloodPressureMeasurement>? {
        switch recordedUUID {
        case 0x2B34: return try EnhancedBloodPressureMeasurement.decode(recorded[...], cuffPressure: false)
        case 0x2B35: return try EnhancedBloodPressureMeasurement.decode(recorded[...], cuffPressure: true)
        default: return nil
        }
    }
}

/// Reassembles multi-segment Blood Pressure Records (bounded: at most `maxBodyLength` bytes).
///
/// Segments after the first carry only a continuation of the body (sequence number and UUID
/// travel once, in the first segment), and the rolling counter must advance by one each time
/// (mod 64). Whatever breaks that — a continuation without a first segment, a counter out of
/// order or skipped, a new first segment before the last one, a body longer than
/// `maxBodyLength` — drops the unfinished record (never merges across the break) and says why.
public struct RecordAssembler: Sendable {
    public var maxBodyLength: Int
    var body: [UInt8] = []
    var expectedCounter: UInt8? = nil

    public init(maxBodyLength: Int = 512) { self.maxBodyLength = maxBodyLength }

    /// What one segment did: a whole record body when it completed one, and the reason when it
    /// dropped an unfinished record (or was dropped itself). Both may be set: a single-segment
    /// record that arrives in the middle of another completes, and drops the other.
    public struct Step: Sendable, Hashable {
        public var body: [UInt8]?
        public var dropped: BPSDecodingError?
    }

    /// True while a record's first segment arrived and its last has not.
    public var isAssembling: Bool { expectedCounter != nil }

    /// Feeds one segment.
    public mutating func add(_ s: RecordSegment) -> Step {
        var dropped: BPSDecodingError? = nil
        if s.isFirst {
            if let exp = expectedCounter {
                dropped = BPSDecodingError(
                    .invalidValue, field: "Segmentation Header", offset: 0,
                    detail:
                        "a new first segment (counter \(s.counter)) before the last one of the record being reassembled (expected counter \(exp)); its \(body.count) bytes dropped"
                )
            }
            body = []
            expectedCounter = nil
        } else {
            guard let exp = expectedCounter else {
                return Step(
                    body: nil,
                    dropped: BPSDecodingError(
                        .invalidValue, field: "Segmentation Header", offset: 0,
                        detail: "continuation segment (counter \(s.counter)) without a first segment; dropped"))
            }
            guard s.counter == exp else {
                let n = body.count
                reset()
                return Step(
                    body: nil,
                    dropped: BPSDecodingError(
                        .invalidValue, field: "Segmentation Header", offset: 0,
                        detail: "segment counter \(s.counter), expected \(exp); the record's \(n) bytes dropped"))
            }
        }
        guard body.count + s.data.count <= maxBodyLength else {
            let n = body.count + s.data.count
            reset()
            return Step(
                body: nil,
                dropped: BPSDecodingError(
                    .invalidLength, field: "Blood Pressure Record", offset: 0,
                    detail: "reassembled record exceeds \(maxBodyLength) bytes (\(n)); dropped"))
        }
        body += s.data
        if s.isLast {
            let whole = body
            reset()
            return Step(body: whole, dropped: dropped)
        }
        expectedCounter = (s.counter + 1) & 0x3F
        return Step(body: nil, dropped: dropped)
    }

    /// Feeds one segment; returns the record body when the last segment arrives, and throws when
    /// the segment dropped a record without completing one (see ``add(_:)``).
    public mutating func feed(_ s: RecordSegment) throws(BPSDecodingError) -> [UInt8]? {
        let step = add(s)
        if let body = step.body { return body }
        if let why = step.dropped { throw why }
        return nil
    }

    /// Forgets an unfinished record (a new connection: segments never continue across links).
    public mutating func reset() {
        body = []
        expectedCounter = nil
    }
}

/// E2E-CRC as other SIG medical services define it: CRC-CCITT, polynomial 0x1021 (reflected
/// 0x8408), seed 0xFFFF, LSB first. Unverified for BLS; used for reporting, never for rejecting.
public enum E2ECRC {
    public static func compute(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0xFFFF
        for b in bytes {
            crc ^= UInt16(b)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x8408 : crc >> 1 }
        }
        return crc
    }
}
