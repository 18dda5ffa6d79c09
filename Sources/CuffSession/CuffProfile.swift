// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure

/// What discovery found on the device, reduced to what the session needs.
public struct CuffProfile: Sendable, Hashable {
    public var hasBloodPressureService: Bool
    /// Bit n set: the characteristic of ordinal n was found (``CuffCharacteristic/ordinal``).
    var present: UInt16 = 0
    /// Its properties, by ordinal (0 where not found). A table, not a dictionary: a session asks
    /// for these on most events, and 14 bytes need no hashing.
    var table = SIMD16<UInt8>(repeating: 0)
    /// The vendor start command of the control characteristic found (``CuffCharacteristic/cuffControl``),
    /// when it is a device family's (QardioArm) rather than ours; nil for ours or none.
    public var vendorStart: QuirkProfile.VendorStart?

    public init(hasBloodPressureService: Bool, characteristics: [CuffCharacteristic: CuffProperties]) {
        self.hasBloodPressureService = hasBloodPressureService
        self.characteristics = characteristics
    }

    /// The characteristics found, with their properties.
    public var characteristics: [CuffCharacteristic: CuffProperties] {
        get {
            var d: [CuffCharacteristic: CuffProperties] = [:]
            for c in CuffCharacteristic.allCases where has(c) { d[c] = properties(c) }
            return d
        }
        set {
            present = 0
            table = SIMD16(repeating: 0)
            for (c, p) in newValue { self[c] = p }
        }
    }

    /// A characteristic's properties, nil when it was not found.
    public subscript(_ c: CuffCharacteristic) -> CuffProperties? {
        get { has(c) ? properties(c) : nil }
        set {
            let i = Int(c.ordinal)
            if let newValue {
                present |= 1 << i
                table[i] = newValue.rawValue
            } else {
                present &= ~(1 << i)
                table[i] = 0
            }
        }
    }

    public func has(_ c: CuffCharacteristic) -> Bool { present & (1 << UInt16(c.ordinal)) != 0 }
    public func properties(_ c: CuffCharacteristic) -> CuffProperties {
        CuffProperties(rawValue: table[Int(c.ordinal)])
    }
}
