// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure

/// What discovery found on the device, reduced to what the session needs.
public struct CuffProfile: Sendable, Hashable {
    public var hasBloodPressureService: Bool
    public var characteristics: [CuffCharacteristic: CuffProperties]

    public init(hasBloodPressureService: Bool, characteristics: [CuffCharacteristic: CuffProperties]) {
        self.hasBloodPressureService = hasBloodPressureService
        self.characteristics = characteristics
    }

    public func has(_ c: CuffCharacteristic) -> Bool { characteristics[c] != nil }
    public func properties(_ c: CuffCharacteristic) -> CuffProperties { characteristics[c] ?? [] }
}
