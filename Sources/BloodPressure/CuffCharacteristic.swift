// SPDX-License-Identifier: GPL-2.0-or-later

/// The characteristics a cuff session works with, whatever their handles on a given device.
public enum CuffCharacteristic: String, Sendable, Hashable, CaseIterable {
    case bloodPressureMeasurement, intermediateCuffPressure, bloodPressureFeature
    case enhancedBloodPressureMeasurement, enhancedIntermediateCuffPressure, bloodPressureRecord, recordAccessControlPoint
    case currentTime, cuffControl
    case deviceName, manufacturerName, modelNumber, serialNumber, firmwareRevision

    /// The 16-bit UUID, or nil for our 128-bit vendor control point.
    public var uuid16: UInt16? {
        switch self {
        case .bloodPressureMeasurement: 0x2A35
        case .intermediateCuffPressure: 0x2A36
        case .bloodPressureFeature: 0x2A49
        case .enhancedBloodPressureMeasurement: 0x2B34
        case .enhancedIntermediateCuffPressure: 0x2B35
        case .bloodPressureRecord: 0x2B36
        case .recordAccessControlPoint: 0x2A52
        case .currentTime: BPSUUID.currentTime
        case .cuffControl: nil
        case .deviceName: BPSUUID.deviceName
        case .manufacturerName: BPSUUID.manufacturerName
        case .modelNumber: BPSUUID.modelNumber
        case .serialNumber: BPSUUID.serialNumber
        case .firmwareRevision: BPSUUID.firmwareRevision
        }
    }

    /// Looks a characteristic up by its 16-bit UUID.
    public init?(uuid16: UInt16) {
        guard let c = CuffCharacteristic.allCases.first(where: { $0.uuid16 == uuid16 }) else { return nil }
        self = c
    }
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

