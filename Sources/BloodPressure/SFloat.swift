// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// IEEE 11073-20601 16-bit SFLOAT ("medfloat16" in the GATT Specification Supplement).
///
/// `value = mantissa × 10^exponent` with a signed 4-bit exponent (bits 15–12) and a signed 12-bit
/// mantissa (bits 11–0). Five raw words are special values, compared on all 16 bits (as Wireshark
/// and Nordic do; PureSwift's mantissa-only mask also treats e.g. `0xF7FF` as NaN, which is wrong).
public struct SFloat: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public var rawValue: UInt16

    @inlinable public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let nan = SFloat(rawValue: 0x07FF)
    public static let nres = SFloat(rawValue: 0x0800)
    public static let positiveInfinity = SFloat(rawValue: 0x07FE)
    public static let negativeInfinity = SFloat(rawValue: 0x0802)
    public static let reserved = SFloat(rawValue: 0x0801)

    /// The largest mantissa magnitude an encoder uses, so no finite value lands on a special word.
    public static let maxMantissa = 2045

    /// What the word means.
    public enum Value: Sendable, Hashable {
        case finite(mantissa: Int16, exponent: Int8)
        case nan, nres, positiveInfinity, negativeInfinity, reserved
    }

    @inlinable
    public var value: Value {
        switch rawValue {
        case 0x07FF: return .nan
        case 0x0800: return .nres
        case 0x07FE: return .positiveInfinity
        case 0x0802: return .negativeInfinity
        case 0x0801: return .reserved
        default: return .finite(mantissa: mantissa, exponent: exponent)
        }
    }

    /// Signed 12-bit mantissa.
    @inlinable public var mantissa: Int16 { Int16(bitPattern: rawValue << 4) >> 4 }
    /// Signed 4-bit exponent.
    @inlinable public var exponent: Int8 { Int8(truncatingIfNeeded: Int16(bitPattern: rawValue) >> 12) }

    /// True for NaN, NRes, ±INF and the reserved word.
    @inlinable public var isSpecial: Bool {
        if case .finite = value { return false }
        return true
    }

    /// The number, or nil for a special value. Divides by an exact power of ten so that
    /// `189 × 10⁻¹` is `18.9`, not `18.900000000000002`.
    @inlinable
    public var doubleValue: Double? {
        // Exponent 0, a mantissa of 0…2045 (whole mmHg, most cuffs' every value): the word itself.
        if rawValue < 0x07FE { return Double(rawValue) }
        guard case let .finite(m, e) = value else { return nil }
        return SFloat.scale(Double(m), exponent: Int(e))
    }

    @inlinable
    static func scale(_ m: Double, exponent e: Int) -> Double {
        e >= 0 ? m * powersOfTen[e] : m / powersOfTen[-e]
    }

    @usableFromInline
    static let powersOfTen: [Double] = [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10]

    /// The name a special value prints as: "NaN", "NRes", "+INF", "-INF", "reserved".
    public var specialName: String? { specialNameConstant?.description }

    /// ``specialName`` as a constant (for writers that copy it as it is).
    @inlinable public var specialNameConstant: StaticString? {
        // (The five specials are the words 0x07FE…0x0802.)
        if rawValue &- 0x07FE > 4 { return nil }
        return switch value {
        case .finite: nil
        case .nan: "NaN"
        case .nres: "NRes"
        case .positiveInfinity: "+INF"
        case .negativeInfinity: "-INF"
        case .reserved: "reserved"
        }
    }

    /// A number as JSON, or the special value's name as a string — never a number for a special.
    public var json: JSON { JSON.build { write(to: &$0) } }

    /// A number, or the special value's name as a string — never a number for a special.
    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        if case let .finite(m, e) = value, let d = doubleValue {
            w.decimal(d, mantissa: Int(m), exponent: Int(e))
        } else {
            w.string(specialName ?? description)
        }
    }

    public var description: String { doubleValue.map { String($0) } ?? specialName! }

    /// Builds a word from mantissa and exponent. Returns nil when out of range or when the word
    /// would be one of the special values.
    public init?(mantissa: Int, exponent: Int) {
        guard (-8...7).contains(exponent), (-SFloat.maxMantissa...SFloat.maxMantissa).contains(mantissa) else {
            return nil
        }
        rawValue = UInt16(truncatingIfNeeded: exponent) << 12 | UInt16(truncatingIfNeeded: mantissa) & 0x0FFF
    }

    /// The canonical encoding of `value`: the finest exponent whose rounded mantissa fits in
    /// ±2045, rounding half away from zero, then trailing decimal zeros moved into the exponent.
    /// `10.1` → `0xF065` (101 × 10⁻¹), `123.45` → 1235 × 10⁻¹, `1000500` → 1001 × 10³.
    /// NaN → NaN, ±∞ and magnitudes beyond 2045 × 10⁷ → ±INF; magnitudes below 0.5 × 10⁻⁸ → 0.
    public init(_ value: Double) {
        if value.isNaN { self = .nan; return }
        if value.isInfinite { self = value > 0 ? .positiveInfinity : .negativeInfinity; return }
        var chosen: (Int, Int)? = nil
        for e in -8...7 {
            let m = SFloat.scale(value, exponent: -e).rounded(.toNearestOrAwayFromZero)
            if abs(m) <= Double(SFloat.maxMantissa) {
                chosen = (Int(m), e)
                break
            }
        }
        guard var (m, e) = chosen else {
            self = value > 0 ? .positiveInfinity : .negativeInfinity
            return
        }
        if m == 0 { e = 0 }
        while m != 0, m % 10 == 0, e < 7 {
            m /= 10
            e += 1
        }
        self.init(mantissa: m, exponent: e)!
    }
}
