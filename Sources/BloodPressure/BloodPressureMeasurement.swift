// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Blood Pressure Measurement (0x2A35, indicate) and Intermediate Cuff Pressure (0x2A36, notify).
///
/// Both share one layout (GATT Specification Supplement, "Blood Pressure Measurement"):
/// flags, three SFLOAT pressures in the flagged unit, then Time Stamp (bit 1), Pulse Rate
/// (bit 2), User ID (bit 3) and Measurement Status (bit 4). In 0x2A36 the first pressure is the
/// current cuff pressure and the other two are unused (NaN on the wire, but any value is accepted).
public struct BloodPressureMeasurement: Sendable, Hashable {
    /// Flags bits: 0 unit, 1 time stamp, 2 pulse rate, 3 user ID, 4 status, 5–7 RFU.
    public enum Flag {
        public static let kPa: UInt8 = 1 << 0
        public static let timestamp: UInt8 = 1 << 1
        public static let pulseRate: UInt8 = 1 << 2
        public static let userID: UInt8 = 1 << 3
        public static let status: UInt8 = 1 << 4
        public static let rfuMask: UInt8 = 0xE0
    }

    public var unit: PressureUnit
    /// Systolic (0x2A35) or current cuff pressure (0x2A36).
    public var systolic: SFloat
    public var diastolic: SFloat
    public var meanArterialPressure: SFloat
    public var timestamp: DateTime?
    /// Beats per minute, whatever the unit flag.
    public var pulseRate: SFloat?
    /// 0xFF is "unknown user".
    public var userID: UInt8?
    public var status: MeasurementStatus?
    /// Flags bits 5–7 as received (sent back by the encoder, for RFU tests).
    public var rfuFlags: UInt8
    /// The cuff does not measure the MAP and sent a placeholder (Veroval's 0): the value is NaN,
    /// and JSON says `null` (absent), not `"NaN"` (unavailable this time).
    public var meanArterialPressureAbsent = false

    public init(
        unit: PressureUnit = .mmHg, systolic: SFloat, diastolic: SFloat, meanArterialPressure: SFloat,
        timestamp: DateTime? = nil, pulseRate: SFloat? = nil, userID: UInt8? = nil, status: MeasurementStatus? = nil,
        rfuFlags: UInt8 = 0
    ) {
        self.unit = unit
        self.systolic = systolic
        self.diastolic = diastolic
        self.meanArterialPressure = meanArterialPressure
        self.timestamp = timestamp
        self.pulseRate = pulseRate
        self.userID = userID
        self.status = status
        self.rfuFlags = rfuFlags & Flag.rfuMask
    }

    /// An Intermediate Cuff Pressure value: the current pressure, unused slots NaN.
    public static func cuffPressure(
        _ pressure: SFloat, unit: PressureUnit = .mmHg, timestamp: DateTime? = nil, pulseRate: SFloat? = nil,
        userID: UInt8? = nil, status: MeasurementStatus? = nil
    ) -> BloodPressureMeasurement {
        BloodPressureMeasurement(
            unit: unit, systolic: pressure, diastolic: .nan, meanArterialPressure: .nan, timestamp: timestamp,
            pulseRate: pulseRate, userID: userID, status: status)
    }

    /// The current cuff pressure of an Intermediate Cuff Pressure value.
    public var cuffPressure: SFloat { systolic }

    public var flags: UInt8 {
        var f = rfuFlags & Flag.rfuMask
        if unit == .kPa { f |= Flag.kPa }
        if timestamp != nil { f |= Flag.timestamp }
        if pulseRate != nil { f |= Flag.pulseRate }
        if userID != nil { f |= Flag.userID }
        if status != nil { f |= Flag.status }
        return f
    }

    /// Decodes a 0x2A35 or 0x2A36 value.
    ///
    /// - Parameters:
    ///   - bytes: the attribute value as received.
    ///   - quirks: a device profile's deviations, if any.
    ///   - cuffPressure: the value is an Intermediate Cuff Pressure (0x2A36): its diastolic and MAP
    ///     fields are unused (NaN, as the specification has them, even from a cuff whose profile
    ///     reads values as unsigned integers), and its pressures are no result (no error reading,
    ///     no absent MAP).
    /// - Throws: ``BPSDecodingError`` naming the field and byte offset when the value ends early.
    @inlinable
    public static func decode(
        _ bytes: ArraySlice<UInt8>, quirks: QuirkProfile.Options = [], cuffPressure: Bool = false
    ) throws(BPSDecodingError) -> Decoded<BloodPressureMeasurement> {
        let quirks =
            cuffPressure ? quirks.subtracting([.zeroMeanArterialPressureAbsent, .allNaNIsErrorReading]) : quirks
        var r = ByteReader(bytes)
        var warnings: [DecodeWarning] = []
        let flags = try r.u8("Flags")
        if flags & Flag.rfuMask != 0 {
            warnings.append(
                DecodeWarning(.rfuFlags, "reserved Flags bits set: 0x" + Hex.encode([flags & Flag.rfuMask]), offset: 0))
        }
        let unsigned = quirks.contains(.unsignedIntegerValues)
        // (SBM69: the same two bytes, read as an unsigned integer. Above 2045 an SFLOAT holds it
        // only rounded, which is said: no blood pressure or pulse is that high, so it is a fault.)
        func value(_ raw: UInt16) -> SFloat { unsigned ? SFloat(Double(raw)) : SFloat(rawValue: raw) }
        func rounded(_ raw: UInt16, _ field: String, at offset: Int) -> DecodeWarning? {
            guard unsigned, raw > SFloat.maxMantissa else { return nil }
            return DecodeWarning(
                .valueRounded,
                "\(field) \(raw) (an unsigned integer, device quirk) has no exact SFLOAT: recorded as \(value(raw))",
                offset: offset)
        }
        let sysRaw = try r.u16("Systolic"), diaRaw = try r.u16("Diastolic")
        let mapOffset = r.offset
        let mapRaw = try r.u16("Mean Arterial Pressure")
        let sys = value(sysRaw)
        let dia = cuffPressure ? SFloat(rawValue: diaRaw) : value(diaRaw)
        if unsigned {
            let fields = [(sysRaw, "Systolic", 1), (diaRaw, "Diastolic", 3), (mapRaw, "MAP", 5)]
            for (raw, field, at) in fields.prefix(cuffPressure ? 1 : 3) {
                if let w = rounded(raw, field, at: at) { warnings.append(w) }
            }
        }
        var map = cuffPressure ? SFloat(rawValue: mapRaw) : value(mapRaw)
        var mapAbsent = false
        if quirks.contains(.zeroMeanArterialPressureAbsent), map.rawValue == 0 {
            map = .nan
            mapAbsent = true
            warnings.append(
                DecodeWarning(
                    .quirkApplied, "Mean Arterial Pressure 0 read as absent (device quirk)", offset: mapOffset))
        }
        var ts: DateTime? = nil
        if flags & Flag.timestamp != 0 {
            let at = r.offset
            ts = try DateTime(reading: &r)
            ts!.validate(at: at, &warnings)
        }
        let bigEndian = quirks.contains(.bigEndianPulseAndStatus)
        var pulse: SFloat? = nil
        if flags & Flag.pulseRate != 0 {
            let at = r.offset
            let raw = try (bigEndian ? r.u16BigEndian("Pulse Rate") : r.u16("Pulse Rate"))
            pulse = value(raw)
            if let w = rounded(raw, "Pulse Rate", at: at) { warnings.append(w) }
        }
        var uid: UInt8? = nil
        if flags & Flag.userID != 0 {
            uid = try r.u8("User ID")
        } else if quirks.contains(.userIDWithoutFlag),
            // Room for the byte and the status after it; bytes beyond that are trailing bytes,
            // not a reason to read the user ID as part of the status.
            r.remaining >= (flags & Flag.status != 0 ? 3 : 1)
        {
            uid = try r.u8("User ID")
            warnings.append(
                DecodeWarning(.quirkApplied, "User ID read without its flag (device quirk)", offset: r.offset - 1))
        }
        var status: MeasurementStatus? = nil
        if flags & Flag.status != 0 {
            let at = r.offset
            let s = MeasurementStatus(
                rawValue: try (bigEndian ? r.u16BigEndian("Measurement Status") : r.u16("Measurement Status")))
            status = s
            if quirks.contains(.reservedStatusBit15Expected), s.rawValue & 0x8000 != 0 {
                // Bit 15 is the cuff's own; any other reserved bit is still warned, alone.
                var rest = s
                rest.rawValue &= 0x7FFF
                rest.check(at: at, &warnings)
                warnings.append(
                    DecodeWarning(
                        .quirkApplied, "reserved Measurement Status bit 15 set, as this cuff does (device quirk)",
                        offset: at))
            } else {
                s.check(at: at, &warnings)
            }
        }
        r.noteTrailing(&warnings)
        if quirks.contains(.reservedBitsExpected) {
            // The cuff always sets these: one note that the profile expected them, not RFU warnings.
            let before = warnings.count
            warnings.removeAll { $0.code == .rfuFlags || $0.code == .rfuStatus }
            if warnings.count != before {
                warnings.append(
                    DecodeWarning(
                        .quirkApplied, "reserved Flags/Measurement Status bits set, as this cuff does (device quirk)",
                        offset: 0))
            }
        }
        if quirks.contains(.allNaNIsErrorReading), sys == .nan, dia == .nan, map == .nan {
            warnings.append(
                DecodeWarning(
                    .errorReading,
                    "the cuff reported a failed measurement (every pressure NaN): an error reading, no values",
                    offset: 1))
        }
        if !cuffPressure {
            let unit: PressureUnit = flags & Flag.kPa != 0 ? .kPa : .mmHg
            Plausibility.check(
                [("Systolic", sys, 1), ("Diastolic", dia, 3), ("Mean Arterial Pressure", map, 5)], unit: unit,
                pulse: pulse.map { ($0, 7 + (ts != nil ? 7 : 0)) }, into: &warnings)
        }
        var m = BloodPressureMeasurement(
            unit: flags & Flag.kPa != 0 ? .kPa : .mmHg, systolic: sys, diastolic: dia, meanArterialPressure: map,
            timestamp: ts, pulseRate: pulse, userID: uid, status: status, rfuFlags: flags)
        m.meanArterialPressureAbsent = mapAbsent
        return Decoded(value: m, warnings: warnings)
    }

    /// The cuff pressure and unit of a 0x2A35/0x2A36 value, without decoding the rest: non-nil
    /// exactly when ``decode(_:quirks:)`` succeeds (with any quirks: they change byte order, not
    /// lengths), and then equal to its `cuffPressure` and `unit` (without the SBM69's
    /// ``QuirkProfile/Options/unsignedIntegerValues``, which reads the same bytes as an integer). The replay's short path for
    /// Intermediate Cuff Pressure notifications; no warnings are built.
    public static func cuffPressure(in value: UnsafeRawBufferPointer) -> (pressure: SFloat, unit: PressureUnit)? {
        guard value.count >= 7 else { return nil }
        let flags = value[0]
        var need = 7
        if flags & Flag.timestamp != 0 { need += DateTime.byteCount }
        if flags & Flag.pulseRate != 0 { need += 2 }
        if flags & Flag.userID != 0 { need += 1 }
        if flags & Flag.status != 0 { need += 2 }
        guard value.count >= need else { return nil }
        return (SFloat(rawValue: UInt16(value[1]) | UInt16(value[2]) << 8), flags & Flag.kPa != 0 ? .kPa : .mmHg)
    }

    /// Encodes in the standard layout (or a quirk profile's, for simulating that device).
    public func encode(quirks: QuirkProfile.Options = []) -> [UInt8] {
        var w = ByteWriter(capacity: 19)
        var f = flags
        if quirks.contains(.userIDWithoutFlag) { f &= ~Flag.userID }
        w.write(f)
        // (SBM69: whole numbers as unsigned integers; anything else as SFLOAT.)
        func value(_ v: SFloat) -> UInt16 {
            guard quirks.contains(.unsignedIntegerValues), let d = v.doubleValue, d >= 0, d <= 65535 else {
                return v.rawValue
            }
            return UInt16(d.rounded())
        }
        w.write(value(systolic))
        w.write(value(diastolic))
        w.write(
            quirks.contains(.zeroMeanArterialPressureAbsent) && meanArterialPressure == .nan
                ? 0 : value(meanArterialPressure))
        timestamp?.encode(into: &w)
        let bigEndian = quirks.contains(.bigEndianPulseAndStatus)
        if let pulseRate { bigEndian ? w.writeBigEndian(value(pulseRate)) : w.write(value(pulseRate)) }
        if let userID { w.write(userID) }
        if let status { bigEndian ? w.writeBigEndian(status.rawValue) : w.write(status.rawValue) }
        return w.bytes
    }
}

/// Values no cuff measures (probe V: a cuff's −1 mmHg systolic, 10,000,000 mmHg diastolic and
/// −0.0000164 bpm pulse went to every format as a reading, with no warning). They are decoded as
/// sent (the record keeps what the cuff said) and flagged ``DecodeWarning/Code/implausibleValue``.
public enum Plausibility {
    /// The highest pressure a non-invasive cuff measures, in mmHg (most stop at 299 or 300).
    public static let highestMmHg = 300.0
    /// The same in kPa (40 kPa is 300 mmHg).
    public static let highestKPa = 40.0
    /// The highest pulse rate in beats per minute.
    public static let highestPulse = 300.0

    /// Appends a warning for each finite value outside what a cuff measures (naming the field,
    /// not the value: warnings reach logs); special values (NaN, NRes, ±INF) are said elsewhere,
    /// and 0 stays (some cuffs send it for "absent").
    @inlinable
    public static func check(
        _ pressures: [(field: String, value: SFloat, offset: Int)], unit: PressureUnit,
        pulse: (value: SFloat, offset: Int)?, into warnings: inout [DecodeWarning]
    ) {
        let highest = unit == .kPa ? highestKPa : highestMmHg
        let unitName = unit == .kPa ? "kPa" : "mmHg"
        for p in pressures {
            guard let v = p.value.doubleValue, v.isFinite, v < 0 || v > highest else { continue }
            warnings.append(
                DecodeWarning(
                    .implausibleValue, "\(p.field) is outside 0…\(Int(highest)) \(unitName)",
                    offset: p.offset))
        }
        if let (value, offset) = pulse, let v = value.doubleValue, v.isFinite, v < 0 || v > highestPulse {
            warnings.append(
                DecodeWarning(
                    .implausibleValue, "Pulse Rate is outside 0…\(Int(highestPulse)) beats per minute",
                    offset: offset))
        }
    }

    /// What is wrong with a vendor protocol's reading, from its values alone (the live session's
    /// record, `cuff decode --protocol`, and a reading rebuilt from a store say the same): a date
    /// that is no calendar date (`hasTime` false: no time stamp), then ``wholeValues``.
    public static func vendorReading(systolic: UInt8, diastolic: UInt8, pulse: UInt8, hasTime: Bool)
        -> [DecodeWarning]
    {
        var w: [DecodeWarning] = []
        if !hasTime {
            w.append(DecodeWarning(.invalidDateTime, "the cuff's date and time is not a calendar date: no time stamp"))
        }
        return w + wholeValues(systolic: systolic, diastolic: diastolic, pulse: pulse)
    }

    /// A vendor protocol's whole-number reading (Microlife, Yonker: one byte each, so never out of
    /// range): a zero, or a systolic not above the diastolic, is no measurement (probe V: 0/0
    /// pulse 0, 255/255 pulse 255 and 0/200 were printed as readings). `offsets`: where each
    /// value is in the bytes, when they are at hand.
    public static func wholeValues(
        systolic: UInt8, diastolic: UInt8, pulse: UInt8, offsets: (Int, Int, Int)? = nil
    ) -> [DecodeWarning] {
        var w: [DecodeWarning] = []
        let fields = [
            ("Systolic", systolic, offsets?.0), ("Diastolic", diastolic, offsets?.1), ("Pulse Rate", pulse, offsets?.2),
        ]
        for (field, value, offset) in fields where value == 0 {
            w.append(DecodeWarning(.implausibleValue, "\(field) is zero", offset: offset))
        }
        if systolic != 0, diastolic != 0, systolic <= diastolic {
            w.append(DecodeWarning(.implausibleValue, "Systolic is not above Diastolic", offset: offsets?.0))
        }
        return w
    }
}
