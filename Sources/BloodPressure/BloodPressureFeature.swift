// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Blood Pressure Feature (0x2A49, read), boolean16. Bits 0–5 from BPS 1.0, 6–8 from BPS 1.1.
public struct BloodPressureFeature: OptionSet, Sendable, Hashable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let bodyMovementDetection = Self(rawValue: 1 << 0)
    public static let cuffFitDetection = Self(rawValue: 1 << 1)
    public static let irregularPulseDetection = Self(rawValue: 1 << 2)
    public static let pulseRateRangeDetection = Self(rawValue: 1 << 3)
    public static let measurementPositionDetection = Self(rawValue: 1 << 4)
    public static let multipleBonds = Self(rawValue: 1 << 5)
    public static let e2eCRC = Self(rawValue: 1 << 6)
    public static let userDataService = Self(rawValue: 1 << 7)
    public static let userFacingTime = Self(rawValue: 1 << 8)

    public static let allVersion10: Self = Self(rawValue: 0x003F)
    public static let allVersion11: Self = Self(rawValue: 0x01FF)
    public static let rfuMask: UInt16 = 0xFE00

    /// Each feature bit (0–8) with its name, lowest first (``name(ofBit:)`` is the one list).
    @usableFromInline static let names: [(Self, String)] = (0..<9).map { i in
        (Self(rawValue: 1 << i), name(ofBit: 1 << i).description)
    }

    /// Names of the supported features, e.g. `["body_movement_detection", "cuff_fit_detection"]`.
    public var featureNames: [String] { Self.names.filter { contains($0.0) }.map(\.1) }

    /// ``featureNames`` as a JSON array, written without building the array (every session
    /// record names them).
    @inlinable public func writeNames<W: JSONWriter>(to w: inout W) {
        w.beginArray()
        // Lowest bit first, as ``names`` lists them; each name a constant (a writer copies it as
        // it is, where a string would be scanned for characters to escape).
        var bits = rawValue & Self.allVersion11.rawValue
        while bits != 0 {
            w.constant(Self.name(ofBit: bits & (~bits &+ 1)))
            bits &= bits &- 1
        }
        w.endArray()
    }

    /// The name of one feature bit (bits 0–8; ``names`` lists them all).
    @usableFromInline static func name(ofBit bit: UInt16) -> StaticString {
        switch bit {
        case 1 << 0: "body_movement_detection"
        case 1 << 1: "cuff_fit_detection"
        case 1 << 2: "irregular_pulse_detection"
        case 1 << 3: "pulse_rate_range_detection"
        case 1 << 4: "measurement_position_detection"
        case 1 << 5: "multiple_bonds"
        case 1 << 6: "e2e_crc"
        case 1 << 7: "user_data_service"
        default: "user_facing_time"
        }
    }

    public static func decode(_ bytes: ArraySlice<UInt8>) throws(BPSDecodingError) -> Decoded<Self> {
        var r = ByteReader(bytes)
        let v = Self(rawValue: try r.u16("Blood Pressure Feature"))
        var w: [DecodeWarning] = []
        if v.rawValue & rfuMask != 0 {
            w.append(
                DecodeWarning(
                    .rfuFeatures, "reserved feature bits set: 0x" + String(v.rawValue & rfuMask, radix: 16), offset: 0))
        }
        r.noteTrailing(&w)
        return Decoded(value: v, warnings: w)
    }

    public func encode() -> [UInt8] { [UInt8(rawValue & 0xFF), UInt8(rawValue >> 8)] }

    public var json: JSON {
        .object(Self.names.map { ($0.1, .bool(contains($0.0))) })
    }
}

/// Current Time (0x2A2B): Exact Time 256 (Date Time, Day of Week, Fractions256) and Adjust Reason.
public struct CurrentTime: Sendable, Hashable {
    public var dateTime: DateTime
    /// 1 = Monday … 7 = Sunday, 0 = unknown.
    public var dayOfWeek: UInt8
    /// 1/256 s.
    public var fractions256: UInt8
    /// Bit 0 manual update, 1 external reference, 2 time zone change, 3 DST change.
    public var adjustReason: UInt8

    public static let byteCount = 10

    public init(dateTime: DateTime, dayOfWeek: UInt8 = 0, fractions256: UInt8 = 0, adjustReason: UInt8 = 0) {
        self.dateTime = dateTime
        self.dayOfWeek = dayOfWeek
        self.fractions256 = fractions256
        self.adjustReason = adjustReason
    }

    /// A Current Time for `unixSeconds` interpreted as local wall-clock seconds.
    public init(localSeconds: Int64, adjustReason: UInt8 = 1) {
        let dt = DateTime(unixSeconds: localSeconds)
        let days = localSeconds / 86400 - (localSeconds % 86400 < 0 ? 1 : 0)  // floor, for any Int64
        // 1970-01-01 was a Thursday (4).
        let dow = UInt8(((days % 7) + 7 + 3) % 7 + 1)
        self.init(dateTime: dt, dayOfWeek: dow, fractions256: 0, adjustReason: adjustReason)
    }

    public static func decode(_ bytes: ArraySlice<UInt8>) throws(BPSDecodingError) -> Decoded<Self> {
        var r = ByteReader(bytes)
        var w: [DecodeWarning] = []
        let dt = try DateTime(reading: &r)
        dt.validate(at: 0, &w)
        let dow = try r.u8("Day of Week")
        let frac = try r.u8("Fractions256")
        let reason = try r.u8("Adjust Reason")
        if dow > 7 {
            w.append(DecodeWarning(.invalidDateTime, "day of week \(dow) is reserved", offset: 7))
        } else if dow != 0, let t = dt.unixSeconds {
            // (Probe E3: a day of week the date contradicts went unsaid.)
            let days = t / 86400 - (t % 86400 < 0 ? 1 : 0)
            let actual = UInt8(((days % 7) + 7 + 3) % 7 + 1)
            if dow != actual {
                w.append(
                    DecodeWarning(
                        .invalidDateTime, "day of week \(dow) is not the date's (\(actual), 1 = Monday)", offset: 7))
            }
        }
        // Adjust Reason: bits 0–3 defined (manual, reference, time zone, DST), 4–7 reserved.
        if reason & 0xF0 != 0 {
            w.append(
                DecodeWarning(
                    .rfuFlags, "Adjust Reason has reserved bits set (0x\(Hex.encode([reason & 0xF0])))", offset: 9))
        }
        r.noteTrailing(&w)
        return Decoded(
            value: CurrentTime(dateTime: dt, dayOfWeek: dow, fractions256: frac, adjustReason: reason), warnings: w)
    }

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 10)
        dateTime.encode(into: &w)
        w.write(dayOfWeek)
        w.write(fractions256)
        w.write(adjustReason)
        return w.bytes
    }
}
