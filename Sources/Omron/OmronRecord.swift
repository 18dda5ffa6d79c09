// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// The record layout families of §6.
public enum OmronRecordLayout: String, Sendable, Hashable, CaseIterable {
    /// Byte-aligned little-endian words (14- and 16-byte slots).
    case le14
    /// `le14` with every 16-bit word byte-swapped (bit-packed big-endian), 8-bit year.
    case be14
    /// `be14` with a 6-bit year (bits 18–23): HEM-6232T.
    case be14y6 = "be14-y6"
    /// HEM-6401T / HEM-6410T: date first, then values.
    case hem6401
    /// HeartGuide: `le14` bytes 0–7, sequence at 10–11, measurement status at 17.
    case heartguide24

    /// Bytes the layout's fields occupy (a slot may be longer).
    public var minimumLength: Int {
        switch self {
        case .le14, .be14, .be14y6: 14
        case .hem6401: 12
        case .heartguide24: 18
        }
    }
}

/// One decoded memory record.
public struct OmronReading: Sendable, Hashable {
    public var systolic: Int
    public var diastolic: Int
    public var pulse: Int
    public var time: DateTime
    public var irregularPulse: Bool
    public var bodyMovement: Bool
    /// Cuff wrapped correctly (nil where the layout has no such bit).
    public var cuffOK: Bool?
    public var batteryLow: Bool?
    /// W2 bits 14–15 (improper position on wrist models, or TruRead index).
    public var position: UInt8?
    /// u16 at bytes 10–11 of 14-byte `le14` slots and HeartGuide slots.
    public var sequence: UInt16?
    /// HEM-6401's 2-bit IHB and movement counts, when the layout has them.
    public var ihbCount: UInt8?
    public var movementCount: UInt8?

    public init(
        systolic: Int, diastolic: Int, pulse: Int, time: DateTime, irregularPulse: Bool = false,
        bodyMovement: Bool = false,
        cuffOK: Bool? = true, batteryLow: Bool? = false, position: UInt8? = 0, sequence: UInt16? = nil
    ) {
        self.systolic = systolic
        self.diastolic = diastolic
        self.pulse = pulse
        self.time = time
        self.irregularPulse = irregularPulse
        self.bodyMovement = bodyMovement
        self.cuffOK = cuffOK
        self.batteryLow = batteryLow
        self.position = position
        self.sequence = sequence
    }

    public static func == (a: OmronReading, b: OmronReading) -> Bool {
        a.systolic == b.systolic && a.diastolic == b.diastolic && a.pulse == b.pulse && a.time == b.time
            && a.irregularPulse == b.irregularPulse && a.bodyMovement == b.bodyMovement && a.cuffOK == b.cuffOK
            && a.batteryLow == b.batteryLow && a.position == b.position && a.sequence == b.sequence
            && a.ihbCount == b.ihbCount && a.movementCount == b.movementCount
    }

    public func hash(into h: inout Hasher) {
        h.combine(systolic); h.combine(diastolic); h.combine(pulse); h.combine(time); h.combine(sequence)
    }
}

/// Decoding and encoding of one memory slot.
public enum OmronRecordCodec {
    /// The field that starts at each byte, for truncation errors.
    static func fieldName(_ layout: OmronRecordLayout, at offset: Int) -> String {
        switch layout {
        case .le14, .heartguide24:
            switch offset {
            case 0: return "systolic"
            case 1: return "diastolic"
            case 2: return "pulse"
            case 3: return "year"
            case 4, 5: return "W1 (hour, day, month, flags)"
            case 6, 7: return "W2 (second, minute, flags)"
            case 8, 9: return "unknown"
            case 10, 11: return "sequence"
            case 17 where layout == .heartguide24: return "measurement status"
            default: return "tail"
            }
        case .be14, .be14y6:
            switch offset {
            case 0: return "diastolic"
            case 1: return "systolic"
            case 2: return "year"
            case 3: return "pulse"
            case 4, 5: return "flags, month, day, hour"
            case 6, 7: return "pos, flags, minute, second"
            default: return "tail"
            }
        case .hem6401:
            let names = [
                "year", "month", "day", "hour", "minute", "second", "systolic", "diastolic", "pulse", "unknown",
                "unknown", "flags",
            ]
            return offset < names.count ? names[offset] : "tail"
        }
    }

    /// Decodes one slot of `slotSize` bytes. An empty slot throws `empty_record`; fewer bytes than
    /// the slot throws `truncated` naming the field where they end; more is `invalid_length`.
    public static func decode(_ bytes: ArraySlice<UInt8>, layout: OmronRecordLayout, slotSize: Int) throws(OmronError)
        -> OmronReading
    {
        let b = Array(bytes)
        if b.count < slotSize {
            throw .truncated(fieldName(layout, at: b.count), at: b.count, need: slotSize - b.count, have: 0)
        }
        if b.count > slotSize {
            throw OmronError(
                .invalidLength, field: "record", offset: slotSize,
                detail: "\(b.count) bytes; a \(layout.rawValue) slot of this model has \(slotSize)")
        }
        if b.allSatisfy({ $0 == 0xFF }) { throw OmronError(.emptyRecord, field: "all 0xFF", offset: 0) }
        switch layout {
        case .le14, .heartguide24: return try decodeLE(b, heartGuide: layout == .heartguide24, slotSize: slotSize)
        case .be14, .be14y6:
            // The le14 record with every 16-bit word byte-swapped (§6.2).
            var s = b
            for i in stride(from: 0, to: 14, by: 2) { s.swapAt(i, i + 1) }
            return try decodeLE(
                s, heartGuide: false, slotSize: slotSize, bigEndian: true, sixBitYear: layout == .be14y6)
        case .hem6401: return try decode6401(b)
        }
    }

    static func decodeLE(
        _ b: [UInt8], heartGuide: Bool, slotSize: Int, bigEndian: Bool = false, sixBitYear: Bool = false
    ) throws(OmronError) -> OmronReading {
        // Offsets in errors are of the bytes as given: a big-endian word's bytes are swapped.
        func at(_ i: Int) -> Int { bigEndian ? i ^ 1 : i }
        let w1 = UInt16(b[4]) | UInt16(b[5]) << 8
        let w2 = UInt16(b[6]) | UInt16(b[7]) << 8
        if !bigEndian {
            if b[0] > 0xE1 {
                throw OmronError(.emptyRecord, field: "systolic byte 0x" + Hex.encode([b[0]]) + " > 0xE1", offset: 0)
            }
            if b[1] == 0, b[2] == 0, b[3] & 0x3F == 0, w1 == 0, w2 == 0 {
                throw OmronError(.emptyRecord, field: "zero placeholder", offset: 0)
            }
        }
        // be14 reads the year as 8 bits, be14-y6 and le14 as 6 (le14's bits 6–7 are masked off).
        let year = 2000 + Int(bigEndian && !sixBitYear ? b[3] : b[3] & 0x3F)
        let hour = Int(w1 & 0x1F), day = Int(w1 >> 5 & 0x1F), month = Int(w1 >> 10 & 0xF)
        let second = min(59, Int(w2 & 0x3F))
        var minute = Int(w2 >> 6 & 0x3F)
        if minute > 59 {
            if bigEndian { throw OmronError(.invalidValue, field: "minute", offset: at(6), detail: "\(minute)") }
            minute = 59  // le14: clamped, as hass-omron does
        }
        guard (1...12).contains(month) else {
            throw OmronError(.invalidValue, field: "month", offset: at(5), detail: "\(month)")
        }
        guard day >= 1, day <= Int(DateTime.lastDay(ofMonth: UInt8(month), year: UInt16(year))) else {
            throw OmronError(.invalidValue, field: "day", offset: at(4), detail: "\(day) in month \(month) of \(year)")
        }
        guard hour <= 23 else { throw OmronError(.invalidValue, field: "hour", offset: at(4), detail: "\(hour)") }
        if heartGuide, b[17] != 0 {
            throw OmronError(
                .invalidValue, field: "measurement status", offset: 17, detail: "error code 0x" + Hex.encode([b[17]]))
        }
        var r = OmronReading(
            systolic: Int(b[0]) + 25, diastolic: Int(b[1]), pulse: Int(b[2]),
            time: DateTime(
                year: UInt16(year), month: UInt8(month), day: UInt8(day), hours: UInt8(hour), minutes: UInt8(minute),
                seconds: UInt8(second)),
            irregularPulse: w1 & 0x4000 != 0, bodyMovement: w1 & 0x8000 != 0, cuffOK: w2 & 0x1000 != 0,
            batteryLow: heartGuide ? nil : w2 & 0x2000 != 0, position: UInt8(w2 >> 14))
        if (slotSize == 14 && !bigEndian) || heartGuide { r.sequence = UInt16(b[10]) | UInt16(b[11]) << 8 }
        return r
    }

    static func decode6401(_ b: [UInt8]) throws(OmronError) -> OmronReading {
        if b[6] > 0xE1 {
            throw OmronError(.emptyRecord, field: "systolic byte 0x" + Hex.encode([b[6]]) + " > 0xE1", offset: 6)
        }
        if b[0..<9].allSatisfy({ $0 == 0 }) { throw OmronError(.emptyRecord, field: "zero placeholder", offset: 0) }
        let year = 2000 + Int(b[0]), month = Int(b[1]), day = Int(b[2]), hour = Int(b[3]), minute = Int(b[4])
        guard (1...12).contains(month) else {
            throw OmronError(.invalidValue, field: "month", offset: 1, detail: "\(month)")
        }
        guard day >= 1, day <= Int(DateTime.lastDay(ofMonth: UInt8(month), year: UInt16(clamping: year))) else {
            throw OmronError(.invalidValue, field: "day", offset: 2, detail: "\(day)")
        }
        guard hour <= 23 else { throw OmronError(.invalidValue, field: "hour", offset: 3, detail: "\(hour)") }
        guard minute <= 59 else { throw OmronError(.invalidValue, field: "minute", offset: 4, detail: "\(minute)") }
        var r = OmronReading(
            systolic: Int(b[6]) + 25, diastolic: Int(b[7]), pulse: Int(b[8]),
            time: DateTime(
                year: UInt16(year), month: UInt8(month), day: UInt8(day), hours: UInt8(hour), minutes: UInt8(minute),
                seconds: UInt8(min(59, Int(b[5])))),
            irregularPulse: b[11] & 0x03 != 0, bodyMovement: b[11] & 0x0C != 0, cuffOK: nil, batteryLow: nil,
            position: nil)
        r.ihbCount = b[11] & 0x03
        r.movementCount = b[11] >> 2 & 0x03
        return r
    }

    /// The slot bytes a cuff of this layout stores for `r` (what the simulator writes). Bytes the
    /// layout leaves unknown are written as a real 14-byte slot has them (`80 00`, sequence, `00 00`) or zero.
    public static func encode(_ r: OmronReading, layout: OmronRecordLayout, slotSize: Int) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: slotSize)
        let t = r.time
        switch layout {
        case .le14, .heartguide24, .be14, .be14y6:
            b[0] = UInt8(clamping: r.systolic - 25)
            b[1] = UInt8(clamping: r.diastolic)
            b[2] = UInt8(clamping: r.pulse)
            let y = Int(t.year) - 2000
            b[3] = UInt8(clamping: layout == .be14 ? y : y & 0x3F)
            var w1 = UInt16(t.hours) | UInt16(t.day) << 5 | UInt16(t.month) << 10
            if r.irregularPulse { w1 |= 0x4000 }
            if r.bodyMovement { w1 |= 0x8000 }
            var w2 = UInt16(t.seconds) | UInt16(t.minutes) << 6
            if r.cuffOK ?? true { w2 |= 0x1000 }
            if r.batteryLow ?? false { w2 |= 0x2000 }
            w2 |= UInt16((r.position ?? 0) & 3) << 14
            b[4] = UInt8(w1 & 0xFF); b[5] = UInt8(w1 >> 8)
            b[6] = UInt8(w2 & 0xFF); b[7] = UInt8(w2 >> 8)
            if slotSize == 14 || layout == .heartguide24 {
                if layout != .heartguide24 { b[8] = 0x80 }
                let s = r.sequence ?? 0
                b[10] = UInt8(s & 0xFF); b[11] = UInt8(s >> 8)
            }
            if layout == .be14 || layout == .be14y6 {
                for i in stride(from: 0, to: 14, by: 2) { b.swapAt(i, i + 1) }
            }
        case .hem6401:
            b[0] = UInt8(clamping: Int(t.year) - 2000); b[1] = t.month; b[2] = t.day; b[3] = t.hours; b[4] = t.minutes
            b[5] = t.seconds
            b[6] = UInt8(clamping: r.systolic - 25); b[7] = UInt8(clamping: r.diastolic);
            b[8] = UInt8(clamping: r.pulse)
            b[11] =
                (r.ihbCount ?? (r.irregularPulse ? 1 : 0)) & 3 | ((r.movementCount ?? (r.bodyMovement ? 1 : 0)) & 3)
                << 2
        }
        return b
    }
}
