// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Unit of the pressure fields, from flags bit 0.
public enum PressureUnit: String, Sendable, Hashable, CaseIterable {
    case mmHg
    case kPa

    /// ``rawValue`` as a constant (for ``JSONWriter/constant(_:)``).
    public var name: StaticString {
        switch self {
        case .mmHg: "mmHg"
        case .kPa: "kPa"
        }
    }

    /// 1 kPa = 7.500 616 827 mmHg.
    public static let mmHgPerKPa = 7.500_616_827_041_697
}

/// Measurement Status (boolean16), GSS: bit 0 body movement, bit 1 cuff too loose, bit 2
/// irregular pulse, bits 3–4 pulse-rate range (a 2-bit enum, not two flags), bit 5 improper
/// measurement position, bits 6–15 RFU.
public struct MeasurementStatus: Sendable, Hashable, RawRepresentable {
    public var rawValue: UInt16
    @inlinable public init(rawValue: UInt16) { self.rawValue = rawValue }

    public enum PulseRateRange: UInt8, Sendable, Hashable, CaseIterable {
        case inRange = 0
        case aboveUpperLimit = 1
        case belowLowerLimit = 2
        case reserved = 3

        public var name: String {
            switch self {
            case .inRange: "in_range"
            case .aboveUpperLimit: "above_upper_limit"
            case .belowLowerLimit: "below_lower_limit"
            case .reserved: "reserved"
            }
        }
    }

    public init(
        bodyMovement: Bool = false, cuffTooLoose: Bool = false, irregularPulse: Bool = false,
        pulseRateRange: PulseRateRange = .inRange, improperPosition: Bool = false, rfuBits: UInt16 = 0
    ) {
        var v: UInt16 = 0
        if bodyMovement { v |= 1 }
        if cuffTooLoose { v |= 1 << 1 }
        if irregularPulse { v |= 1 << 2 }
        v |= UInt16(pulseRateRange.rawValue) << 3
        if improperPosition { v |= 1 << 5 }
        v |= rfuBits & MeasurementStatus.rfuMask
        rawValue = v
    }

    public static let rfuMask: UInt16 = 0xFFC0

    public var bodyMovement: Bool { rawValue & 1 != 0 }
    public var cuffTooLoose: Bool { rawValue & 2 != 0 }
    public var irregularPulse: Bool { rawValue & 4 != 0 }
    public var pulseRateRange: PulseRateRange { PulseRateRange(rawValue: UInt8(rawValue >> 3 & 3))! }
    public var improperPosition: Bool { rawValue & 0x20 != 0 }
    public var rfuBits: UInt16 { rawValue & MeasurementStatus.rfuMask }

    public var json: JSON { JSON.build { write(to: &$0) } }

    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        w.beginObject()
        w.key("body_movement"); w.bool(bodyMovement)
        w.key("cuff_too_loose"); w.bool(cuffTooLoose)
        w.key("irregular_pulse"); w.bool(irregularPulse)
        w.key("pulse_rate_range"); w.string(pulseRateRange.name)
        w.key("improper_position"); w.bool(improperPosition)
        w.endObject()
    }

    /// The `rfu_status` warning for the reserved bits `bits`, at `offset`.
    @usableFromInline static func rfuWarning(_ bits: UInt16, at offset: Int) -> DecodeWarning {
        DecodeWarning(
            .rfuStatus,
            "reserved Measurement Status bits set: 0x" + Hex.encode([UInt8(bits >> 8), UInt8(bits & 0xFF)]),
            offset: offset)
    }

    @inlinable
    func check(at offset: Int, _ w: inout [DecodeWarning]) {
        if rawValue & MeasurementStatus.rfuMask != 0 {
            w.append(Self.rfuWarning(rawValue & MeasurementStatus.rfuMask, at: offset))
        }
        if pulseRateRange == .reserved {
            w.append(DecodeWarning(.reservedPulseRateRange, "pulse-rate range value 3 is reserved", offset: offset))
        }
    }
}
