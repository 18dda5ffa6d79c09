// SPDX-License-Identifier: GPL-2.0-or-later

/// Our vendor cuff-control service: write 0x01 to start a measurement, 0x02 to stop it — the way
/// QardioArm-style cuffs are started by an app instead of a button.
public enum CuffControl {
    /// Vendor service UUID ("cuff" in the first 32 bits).
    public static let serviceUUID = "63756666-5349-4D00-8000-00000000C0F1"
    /// Control point characteristic UUID (write with response).
    public static let controlPointUUID = "63756666-5349-4D01-8000-00000000C0F1"

    public enum Command: UInt8, Sendable, Hashable {
        case start = 0x01
        case stop = 0x02
    }
}

/// 16-bit UUIDs of the services and characteristics a cuff session uses.
public enum BPSUUID {
    public static let bloodPressureService: UInt16 = 0x1810
    public static let deviceInformationService: UInt16 = 0x180A
    public static let currentTimeService: UInt16 = 0x1805
    public static let genericAccessService: UInt16 = 0x1800

    public static let deviceName: UInt16 = 0x2A00
    public static let manufacturerName: UInt16 = 0x2A29
    public static let modelNumber: UInt16 = 0x2A24
    public static let serialNumber: UInt16 = 0x2A25
    public static let firmwareRevision: UInt16 = 0x2A26
    public static let currentTime: UInt16 = BPSCharacteristic.currentTime.rawValue
}
