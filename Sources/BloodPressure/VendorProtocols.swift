// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// The Microlife protocol (e.g. BP3GY1-2N): no Blood Pressure Service; commands are written to
/// characteristic 0xFFF2 and responses notified on 0xFFF1.
///
/// A frame, both ways: header (command `4D FF`, response `4D 3A` = "M:"), length (2 bytes,
/// big-endian: payload length + 1), payload, checksum (low byte of the sum of every byte before
/// it). A response may span several notifications; ``Reassembler`` puts it back together by its
/// length. Facts from derdilla/blood-pressure-monitor-fl (`microlife_protocol.dart`, its tests)
/// and joergmlpts/blood-pressure-monitor (`bpm_bt.py`), gathered in shared/spec/other-cuffs.md.
public enum Microlife {
    public static let serviceUUID16: UInt16 = 0xFFF0
    /// Commands are written here.
    public static let commandUUID16: UInt16 = 0xFFF2
    /// Responses are notified here.
    public static let responseUUID16: UInt16 = 0xFFF1
    /// The same UUIDs as text, as vendor sessions name characteristics.
    public static let commandUUID = "FFF2"
    public static let responseUUID = "FFF1"
    public static let commandHeader: [UInt8] = [0x4D, 0xFF]
    public static let responseHeader: [UInt8] = [0x4D, 0x3A]
    /// Header and length: the bytes before the payload.
    public static let prefixLength = 4
    /// Records start at this payload offset of a "get measurements" response.
    public static let recordsOffset = 38
    /// One record every this many bytes (the first 8 are used).
    public static let recordStride = 10
    public static let recordValueBytes = 8

    /// Low byte of the sum of `bytes`.
    public static func checksum<S: Sequence<UInt8>>(_ bytes: S) -> UInt8 {
        var sum: UInt8 = 0
        for b in bytes { sum &+= b }
        return sum
    }

    /// A whole frame around `payload` with `header` (``commandHeader`` or ``responseHeader``).
    public static func frame(_ payload: [UInt8], header: [UInt8] = commandHeader) -> [UInt8] {
        let n = payload.count + 1
        var f = header + [UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)] + payload
        f.append(checksum(f))
        return f
    }

    /// "Get measurements": `4D FF 00 09 00 00 00 00 00 00 00 FD 52`.
    public static let getMeasurementsCommand = frame([0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xFD])
    /// "Disconnect": `4D FF 00 02 04 52`.
    public static let disconnectCommand = frame([0x04])

    /// "Set time": `4D FF 00 08 0D YY MM DD hh mm ss CK` (YY = year − 2000).
    public static func setTimeCommand(_ t: DateTime) -> [UInt8] {
        frame([0x0D, UInt8(clamping: Int(t.year) - 2000), t.month, t.day, t.hours, t.minutes, t.seconds])
    }

    /// The whole frame's length once its header and length are in `prefix`, else nil.
    public static func frameLength(_ prefix: ArraySlice<UInt8>) -> Int? {
        guard prefix.count >= prefixLength else { return nil }
        let i = prefix.startIndex
        return prefixLength + (Int(prefix[i + 2]) << 8 | Int(prefix[i + 3]))
    }

    /// The payload of one whole frame with the given header.
    ///
    /// - Throws: ``BPSDecodingError`` naming the header, length or checksum: `truncated` for a
    ///   frame shorter than its length says, `invalid_length` for bytes after it or a length of 0,
    ///   `invalid_value` for a wrong header or checksum.
    public static func payload(ofFrame bytes: ArraySlice<UInt8>, header: [UInt8] = responseHeader)
        throws(BPSDecodingError) -> ArraySlice<UInt8>
    {
        let s = bytes.startIndex
        guard bytes.count >= 2 else {
            throw BPSDecodingError(.truncated, field: "Header", offset: 0, detail: "needs 2 bytes, \(bytes.count) left")
        }
        guard bytes[s] == header[0], bytes[s + 1] == header[1] else {
            throw BPSDecodingError(
                .invalidValue, field: "Header", offset: 0,
                detail: "expected \(Hex.encode(header)), got \(Hex.encode(bytes.prefix(2)))")
        }
        guard let total = frameLength(bytes) else {
            throw BPSDecodingError(
                .truncated, field: "Length", offset: 2, detail: "needs 2 bytes, \(bytes.count - 2) left")
        }
        guard total > prefixLength else {
            throw BPSDecodingError(
                .invalidLength, field: "Length", offset: 2, detail: "0: a frame holds at least its checksum")
        }
        guard bytes.count >= total else {
            throw BPSDecodingError(
                .truncated, field: "Payload", offset: prefixLength,
                detail: "the length says \(total) bytes in all, \(bytes.count) here")
        }
        guard bytes.count == total else {
            throw BPSDecodingError(
                .invalidLength, field: "Frame", offset: total,
                detail: "\(bytes.count - total) byte(s) after the checksum")
        }
        let sum = checksum(bytes[s..<(s + total - 1)])
        guard sum == bytes[s + total - 1] else {
            throw BPSDecodingError(
                .invalidValue, field: "Checksum", offset: total - 1,
                detail: "expected \(Hex.encode([sum])), got \(Hex.encode([bytes[s + total - 1]]))")
        }
        return bytes[(s + prefixLength)..<(s + total - 1)]
    }

    /// One stored reading: single bytes, mmHg and bpm, minute resolution, the cuff's local time.
    public struct Record: Sendable, Hashable {
        public var systolic: UInt8
        public var diastolic: UInt8
        public var pulse: UInt8
        public var time: DateTime
        /// Where the record starts in the payload.
        public var payloadOffset: Int

        public init(systolic: UInt8, diastolic: UInt8, pulse: UInt8, time: DateTime, payloadOffset: Int = 0) {
            self.systolic = systolic
            self.diastolic = diastolic
            self.pulse = pulse
            self.time = time
            self.payloadOffset = payloadOffset
        }

        /// The record's 10 bytes as the cuff stores them.
        public var bytes: [UInt8] {
            [
                systolic, diastolic, pulse, UInt8(clamping: Int(time.year) - 2000), time.month, time.day, time.hours,
                time.minutes, 0, 0,
            ]
        }
    }

    /// A record slot that holds no reading: empty (all values zero) or with an impossible date.
    public struct SkippedSlot: Sendable, Hashable {
        public enum Reason: String, Sendable, Hashable {
            case empty
            case impossibleDate = "impossible_date"
            /// The payload ends inside the slot's 8 value bytes.
            case truncated
        }
        public var payloadOffset: Int
        public var reason: Reason
    }

    /// The readings of a "get measurements" response payload: records from offset 38, one every
    /// 10 bytes (a last one needs its 8 value bytes). Empty slots (systolic, diastolic and pulse
    /// all 0), records with impossible dates and a last one cut short are left out, and listed in
    /// `skipped`.
    public static func records(inPayload payload: ArraySlice<UInt8>) -> (records: [Record], skipped: [SkippedSlot]) {
        var records: [Record] = []
        var skipped: [SkippedSlot] = []
        var at = recordsOffset
        while at + recordValueBytes <= payload.count {
            let b = payload.startIndex + at
            let sys = payload[b], dia = payload[b + 1], pulse = payload[b + 2]
            defer { at += recordStride }
            if sys == 0 && dia == 0 && pulse == 0 {
                skipped.append(SkippedSlot(payloadOffset: at, reason: .empty))
                continue
            }
            let t = DateTime(
                year: 2000 + UInt16(payload[b + 3]), month: payload[b + 4], day: payload[b + 5], hours: payload[b + 6],
                minutes: payload[b + 7], seconds: 0)
            guard t.month >= 1, t.day >= 1, t.isValid else {
                skipped.append(SkippedSlot(payloadOffset: at, reason: .impossibleDate))
                continue
            }
            records.append(Record(systolic: sys, diastolic: dia, pulse: pulse, time: t, payloadOffset: at))
        }
        // (Probe E3: a record cut short at the end was dropped without a word.)
        if at < payload.count { skipped.append(SkippedSlot(payloadOffset: at, reason: .truncated)) }
        return (records, skipped)
    }

    /// A "get measurements" response payload holding `records` (the 38 bytes before them zero).
    public static func measurementsPayload(_ records: [Record]) -> [UInt8] {
        var p = [UInt8](repeating: 0, count: recordsOffset)
        for r in records { p += r.bytes }
        return p
    }

    /// Puts response frames back together from notifications, by the frame's length.
    public struct Reassembler: Sendable, Hashable {
        var buffer: [UInt8] = []
        /// Frames longer than this are refused (the length field allows 65 538 bytes).
        public static let maxFrame = 4 + 0xFFFF

        public init() {}

        public var isEmpty: Bool { buffer.isEmpty }

        /// Adds one notification; returns the frames it completed (whole, header to checksum).
        /// Bytes before a response header while no frame is open (a notification that is no
        /// frame, or bytes before one) are returned in `junk`, and dropped; the frame after them
        /// is kept (probe O: a frame after a stray byte in its notification was dropped with it).
        public mutating func add(_ bytes: [UInt8]) -> (frames: [[UInt8]], junk: [UInt8]?) {
            guard !bytes.isEmpty else { return ([], nil) }
            buffer += bytes
            var frames: [[UInt8]] = []
            var junk: [UInt8] = []
            while true {
                // Up to where a frame may start (the header, or as much of it as the bytes end with).
                let start = buffer.indices.first { Self.mayStartFrame(buffer[$0...]) } ?? buffer.endIndex
                if start > 0 {
                    junk += buffer[..<start]
                    buffer.removeFirst(start)
                }
                guard let n = frameLength(buffer[...]), buffer.count >= n else { break }
                frames.append(Array(buffer[..<n]))
                buffer.removeFirst(n)
            }
            return (frames, junk.isEmpty ? nil : junk)
        }

        /// The bytes begin with the response header, or with as much of it as they hold.
        static func mayStartFrame(_ b: ArraySlice<UInt8>) -> Bool {
            b.starts(with: responseHeader.prefix(b.count))
        }
    }
}

/// The Yonker protocol (YK-IBPA1, YK-BPW5; Yongrow, METIKO): a vendor service whose notify
/// characteristic sends a 15-byte value; byte 0 = 0x81 is the final result (other values are
/// progress), then systolic, diastolic, pulse (bytes 1–3), and the cuff's local time: day (6),
/// month (7), year − 2000 (8), hour (9), minute (10). The cuff's clock is unreliable. Facts from
/// derdilla/blood-pressure-monitor-fl #615 and `yonker_measurement_data.dart` with its test.
public enum Yonker {
    public static let serviceUUID = "CDEACD80-5235-4C07-8846-93A37EE6B86D"
    public static let notifyUUID = "CDEACD81-5235-4C07-8846-93A37EE6B86D"
    public static let length = 15
    public static let resultMarker: UInt8 = 0x81

    public struct Result: Sendable, Hashable {
        public var systolic: UInt8
        public var diastolic: UInt8
        public var pulse: UInt8
        public var time: DateTime

        public init(systolic: UInt8, diastolic: UInt8, pulse: UInt8, time: DateTime) {
            self.systolic = systolic
            self.diastolic = diastolic
            self.pulse = pulse
            self.time = time
        }

        /// The 15-byte notification the cuff sends for this result.
        public var bytes: [UInt8] {
            [
                resultMarker, systolic, diastolic, pulse, 0, 0, time.day, time.month,
                UInt8(clamping: Int(time.year) - 2000), time.hours, time.minutes, 0, 0, 0, 0,
            ]
        }
    }

    public enum Notification: Sendable, Hashable {
        case result(Result)
        /// Byte 0 is not 0x81: the cuff is still measuring (the other bytes' meaning is not public).
        case progress(UInt8)
    }

    /// Decodes one notification.
    ///
    /// - Throws: ``BPSDecodingError``: `truncated` under 15 bytes, `invalid_length` over.
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(BPSDecodingError) -> Decoded<Notification> {
        guard bytes.count >= length else {
            throw BPSDecodingError(
                .truncated, field: "Yonker notification", offset: bytes.count,
                detail: "needs \(length) bytes, \(bytes.count) here")
        }
        guard bytes.count == length else {
            throw BPSDecodingError(
                .invalidLength, field: "Yonker notification", offset: length,
                detail: "\(bytes.count) bytes; it has \(length)")
        }
        let s = bytes.startIndex
        guard bytes[s] == resultMarker else { return Decoded(value: .progress(bytes[s]), warnings: []) }
        let t = DateTime(
            year: 2000 + UInt16(bytes[s + 8]), month: bytes[s + 7], day: bytes[s + 6], hours: bytes[s + 9],
            minutes: bytes[s + 10], seconds: 0)
        var warnings: [DecodeWarning] = []
        t.validate(at: 6, &warnings)
        if t.month == 0 || t.day == 0 {
            warnings.append(
                DecodeWarning(.invalidDateTime, "Date Time is not a calendar date: \(t.description)", offset: 6))
        }
        warnings += Plausibility.wholeValues(
            systolic: bytes[s + 1], diastolic: bytes[s + 2], pulse: bytes[s + 3], offsets: (1, 2, 3))
        return Decoded(
            value: .result(Result(systolic: bytes[s + 1], diastolic: bytes[s + 2], pulse: bytes[s + 3], time: t)),
            warnings: warnings)
    }
}

// MARK: - JSON (`cuff decode --protocol`)

extension Microlife.Record {
    /// One line of `cuff decode --protocol microlife`.
    public var json: JSON {
        .object([
            ("type", .string("measurement")), ("protocol", .string("microlife")), ("unit", .string("mmHg")),
            ("systolic", .int(Int64(systolic))), ("diastolic", .int(Int64(diastolic))),
            ("mean_arterial_pressure", .null),
            ("pulse_rate", .int(Int64(pulse))), ("timestamp", JSON.from(time.iso8601, JSON.string)),
            ("payload_offset", .int(Int64(payloadOffset))),
            ("warnings", warnings.json),
            ("raw", .string(Hex.encode(bytes.prefix(Microlife.recordValueBytes)))),
        ])
    }

    /// What the live session says of the same record (probe A2: the decode line had no warnings
    /// where the live path flags a zero, or a systolic not above the diastolic).
    public var warnings: [DecodeWarning] {
        Plausibility.vendorReading(systolic: systolic, diastolic: diastolic, pulse: pulse, hasTime: time.iso8601 != nil)
    }
}

extension Yonker.Notification {
    /// The line `cuff decode --protocol yonker` prints.
    public func json(warnings: [DecodeWarning], raw: ArraySlice<UInt8>) -> JSON {
        switch self {
        case let .result(r):
            return .object([
                ("type", .string("measurement")), ("protocol", .string("yonker")), ("unit", .string("mmHg")),
                ("systolic", .int(Int64(r.systolic))), ("diastolic", .int(Int64(r.diastolic))),
                ("mean_arterial_pressure", .null),
                ("pulse_rate", .int(Int64(r.pulse))), ("timestamp", JSON.from(r.time.iso8601, JSON.string)),
                ("warnings", warnings.json), ("raw", .string(Hex.encode(raw))),
            ])
        case let .progress(code):
            return .object([
                ("type", .string("progress")), ("protocol", .string("yonker")), ("code", .string(Hex.encode([code]))),
                ("warnings", warnings.json), ("raw", .string(Hex.encode(raw))),
            ])
        }
    }
}
