// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// The epoch of BPS 1.1's uint32 time fields (flags bit 6).
public enum Epoch: Int, Sendable, Hashable {
    case year1900 = 1900
    case year2000 = 2000

    /// Seconds from this epoch to 1970-01-01T00:00:00.
    public var unixOffset: Int64 {
        switch self {
        case .year1900: -2_208_988_800
        case .year2000: 946_684_800
        }
    }

    /// Calendar fields of `seconds` after this epoch.
    public func dateTime(_ seconds: UInt32) -> DateTime { DateTime(unixSeconds: Int64(seconds) + unixOffset) }
}

/// Enhanced Blood Pressure Measurement (0x2B34) and Enhanced Intermediate Cuff Pressure (0x2B35), BPS 1.1.
///
/// Flags: bit 0 unit, 1 Time Stamp (uint32 seconds since the epoch), 2 Pulse Rate, 3 User ID,
/// 4 Measurement Status, 5 User Facing Time (uint32), 6 epoch 2000 (else 1900), 7 RFU.
/// 0x2B34 carries systolic/diastolic/MAP; 0x2B35 only the cuff pressure (no unused slots).
public struct EnhancedBloodPressureMeasurement: Sendable, Hashable {
    public enum Flag {
        public static let kPa: UInt8 = 1 << 0
        public static let timestamp: UInt8 = 1 << 1
        public static let pulseRate: UInt8 = 1 << 2
        public static let userID: UInt8 = 1 << 3
        public static let status: UInt8 = 1 << 4
        public static let userFacingTime: UInt8 = 1 << 5
        public static let epoch2000: UInt8 = 1 << 6
        public static let rfuMask: UInt8 = 0x80
    }

    public enum Kind: Sendable, Hashable {
        /// 0x2B34: systolic, diastolic, MAP.
        case measurement(systolic: SFloat, diastolic: SFloat, meanArterialPressure: SFloat)
        /// 0x2B35: the current cuff pressure.
        case cuffPressure(SFloat)
    }

    public var unit: PressureUnit
    public var kind: Kind
    /// Seconds since ``epoch``.
    public var timestamp: UInt32?
    public var pulseRate: SFloat?
    public var userID: UInt8?
    public var status: MeasurementStatus?
    /// Seconds since ``epoch`` as shown to the user (local time).
    public var userFacingTime: UInt32?
    public var epoch: Epoch
    public var rfuFlags: UInt8

    public init(
        unit: PressureUnit = .mmHg, kind: Kind, timestamp: UInt32? = nil, pulseRate: SFloat? = nil,
        userID: UInt8? = nil, status: MeasurementStatus? = nil, userFacingTime: UInt32? = nil,
        epoch: Epoch = .year2000, rfuFlags: UInt8 = 0
    ) {
        self.unit = unit
        self.kind = kind
        self.timestamp = timestamp
        self.pulseRate = pulseRate
        self.userID = userID
        self.status = status
        self.userFacingTime = userFacingTime
        self.epoch = epoch
        self.rfuFlags = rfuFlags & Flag.rfuMask
    }

    public var isCuffPressure: Bool {
        if case .cuffPressure = kind { return true }
        return false
    }

    public var flags: UInt8 {
        var f = rfuFlags & Flag.rfuMask
        if unit == .kPa { f |= Flag.kPa }
        if timestamp != nil { f |= Flag.timestamp }
        if pulseRate != nil { f |= Flag.pulseRate }
        if userID != nil { f |= Flag.userID }
        if status != nil { f |= Flag.status }
        if userFacingTime != nil { f |= Flag.userFacingTime }
        if epoch == .year2000 { f |= Flag.epoch2000 }
        return f
    }

    /// Decodes 0x2B34 (`cuffPressure: false`) or 0x2B35 (`cuffPressure: true`).
    public static func decode(_ bytes: ArraySlice<UInt8>, cuffPressure: Bool) throws(BPSDecodingError) -> Decoded<Self>
    {
        var r = ByteReader(bytes)
        var warnings: [DecodeWarning] = []
        let flags = try r.u8("Flags")
        if flags & Flag.rfuMask != 0 {
            warnings.append(DecodeWarning(.rfuFlags, "reserved Flags bit 7 set", offset: 0))
        }
        let kind: Kind
        if cuffPressure {
            kind = .cuffPressure(try r.sfloat("Intermediate Cuff Pressure"))
        } else {
            let s = try r.sfloat("Systolic")
            let d = try r.sfloat("Diastolic")
            let m = try r.sfloat("Mean Arterial Pressure")
            kind = .measurement(systolic: s, diastolic: d, meanArterialPressure: m)
        }
        let ts = try flags & Flag.timestamp != 0 ? r.u32("Time Stamp") : nil
        let pulse = try flags & Flag.pulseRate != 0 ? r.sfloat("Pulse Rate") : nil
        let uid = try flags & Flag.userID != 0 ? r.u8("User ID") : nil
        var status: MeasurementStatus? = nil
        if flags & Flag.status != 0 {
            let at = r.offset
            status = MeasurementStatus(rawValue: try r.u16("Measurement Status"))
            status!.check(at: at, &warnings)
        }
        let uft = try flags & Flag.userFacingTime != 0 ? r.u32("User Facing Time") : nil
        r.noteTrailing(&warnings)
        if case let .measurement(sys, dia, map) = kind {
            Plausibility.check(
                [("Systolic", sys, 1), ("Diastolic", dia, 3), ("Mean Arterial Pressure", map, 5)],
                unit: flags & Flag.kPa != 0 ? .kPa : .mmHg,
                pulse: pulse.map { ($0, 7 + (ts != nil ? 4 : 0)) }, into: &warnings)
        }
        let v = EnhancedBloodPressureMeasurement(
            unit: flags & Flag.kPa != 0 ? .kPa : .mmHg, kind: kind, timestamp: ts, pulseRate: pulse, userID: uid,
            status: status, userFacingTime: uft, epoch: flags & Flag.epoch2000 != 0 ? .year2000 : .year1900,
            rfuFlags: flags)
        return Decoded(value: v, warnings: warnings)
    }

    /// The cuff pressure and unit of a 0x2B35 value, without decoding the rest: non-nil exactly
    /// when `decode(value, cuffPressure: true)` succeeds, and then equal to its pressure and unit.
    public static func cuffPressure(in value: UnsafeRawBufferPointer) -> (pressure: SFloat, unit: PressureUnit)? {
        guard value.count >= 3 else { return nil }
        let flags = value[0]
        var need = 3
        if flags & Flag.timestamp != 0 { need += 4 }
        if flags & Flag.pulseRate != 0 { need += 2 }
        if flags & Flag.userID != 0 { need += 1 }
        if flags & Flag.status != 0 { need += 2 }
        if flags & Flag.userFacingTime != 0 { need += 4 }
        guard value.count >= need else { return nil }
        return (SFloat(rawValue: UInt16(value[1]) | UInt16(value[2]) << 8), flags & Flag.kPa != 0 ? .kPa : .mmHg)
    }

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 20)
        w.write(flags)
        switch kind {
        case let .measurement(s, d, m):
            w.write(s.rawValue)
            w.write(d.rawValue)
            w.write(m.rawValue)
        case let .cuffPressure(p):
            w.write(p.rawValue)
        }
        if let timestamp { w.write(timestamp) }
        if let pulseRate { w.write(pulseRate.rawValue) }
        if let userID { w.write(userID) }
        if let status { w.write(status.rawValue) }
        if let userFacingTime { w.write(userFacingTime) }
        return w.bytes
    }

    /// The Time Stamp as UTC: `2000-01-02T00:00:00Z`.
    public var timestampISO8601: String? { timestamp.map { epoch.dateTime($0).description + "Z" } }
    /// User Facing Time as local time without offset.
    public var userFacingTimeISO8601: String? { userFacingTime.map { epoch.dateTime($0).description } }
}
