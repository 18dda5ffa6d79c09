// SPDX-License-Identifier: GPL-2.0-or-later

/// The characteristics a cuff session works with, whatever their handles on a given device.
public enum CuffCharacteristic: String, Sendable, Hashable, CaseIterable {
    case bloodPressureMeasurement, intermediateCuffPressure, bloodPressureFeature
    case enhancedBloodPressureMeasurement, enhancedIntermediateCuffPressure, bloodPressureRecord,
        recordAccessControlPoint
    case currentTime, cuffControl
    case deviceName, manufacturerName, modelNumber, serialNumber, firmwareRevision
    /// Date Time (0x2A08) beside the results: the clock A&D cuffs want written.
    case dateTime

    /// The 16-bit UUID, or nil for our 128-bit vendor control point. The Blood Pressure Service's
    /// UUIDs come from ``BPSCharacteristic`` (the one table of them), the others from ``BPSUUID``.
    public var uuid16: UInt16? {
        switch self {
        case .bloodPressureMeasurement: BPSCharacteristic.bloodPressureMeasurement.rawValue
        case .intermediateCuffPressure: BPSCharacteristic.intermediateCuffPressure.rawValue
        case .bloodPressureFeature: BPSCharacteristic.bloodPressureFeature.rawValue
        case .enhancedBloodPressureMeasurement: BPSCharacteristic.enhancedBloodPressureMeasurement.rawValue
        case .enhancedIntermediateCuffPressure: BPSCharacteristic.enhancedIntermediateCuffPressure.rawValue
        case .bloodPressureRecord: BPSCharacteristic.bloodPressureRecord.rawValue
        case .recordAccessControlPoint: BPSCharacteristic.recordAccessControlPoint.rawValue
        case .currentTime: BPSCharacteristic.currentTime.rawValue
        case .cuffControl: nil
        case .deviceName: BPSUUID.deviceName
        case .manufacturerName: BPSUUID.manufacturerName
        case .modelNumber: BPSUUID.modelNumber
        case .serialNumber: BPSUUID.serialNumber
        case .firmwareRevision: BPSUUID.firmwareRevision
        case .dateTime: BPSCharacteristic.dateTime.rawValue
        }
    }

    /// Looks a characteristic up by its 16-bit UUID.
    public init?(uuid16: UInt16) {
        switch uuid16 {
        case BPSCharacteristic.bloodPressureMeasurement.rawValue: self = .bloodPressureMeasurement
        case BPSCharacteristic.intermediateCuffPressure.rawValue: self = .intermediateCuffPressure
        case BPSCharacteristic.bloodPressureFeature.rawValue: self = .bloodPressureFeature
        case BPSCharacteristic.enhancedBloodPressureMeasurement.rawValue: self = .enhancedBloodPressureMeasurement
        case BPSCharacteristic.enhancedIntermediateCuffPressure.rawValue: self = .enhancedIntermediateCuffPressure
        case BPSCharacteristic.bloodPressureRecord.rawValue: self = .bloodPressureRecord
        case BPSCharacteristic.recordAccessControlPoint.rawValue: self = .recordAccessControlPoint
        case BPSCharacteristic.currentTime.rawValue: self = .currentTime
        case BPSUUID.deviceName: self = .deviceName
        case BPSUUID.manufacturerName: self = .manufacturerName
        case BPSUUID.modelNumber: self = .modelNumber
        case BPSUUID.serialNumber: self = .serialNumber
        case BPSUUID.firmwareRevision: self = .firmwareRevision
        case BPSCharacteristic.dateTime.rawValue: self = .dateTime
        default: return nil
        }
    }

    // Hashed and compared by case, not by the raw-value string (dictionaries keyed by
    // characteristic are on the session's path).
    /// The case's position (0 to 14): an index for tables of characteristics.
    public var ordinal: UInt8 {
        switch self {
        case .bloodPressureMeasurement: 0
        case .intermediateCuffPressure: 1
        case .bloodPressureFeature: 2
        case .enhancedBloodPressureMeasurement: 3
        case .enhancedIntermediateCuffPressure: 4
        case .bloodPressureRecord: 5
        case .recordAccessControlPoint: 6
        case .currentTime: 7
        case .cuffControl: 8
        case .deviceName: 9
        case .manufacturerName: 10
        case .modelNumber: 11
        case .serialNumber: 12
        case .firmwareRevision: 13
        case .dateTime: 14
        }
    }

    public static func == (a: CuffCharacteristic, b: CuffCharacteristic) -> Bool { a.ordinal == b.ordinal }
    public func hash(into h: inout Hasher) { h.combine(ordinal) }
}

/// GATT properties the session cares about.
public struct CuffProperties: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    // Same bit positions as the characteristic declaration's properties byte.
    public static let read = Self(rawValue: 0x02)
    public static let writeWithoutResponse = Self(rawValue: 0x04)
    public static let write = Self(rawValue: 0x08)
    public static let notify = Self(rawValue: 0x10)
    public static let indicate = Self(rawValue: 0x20)
}
