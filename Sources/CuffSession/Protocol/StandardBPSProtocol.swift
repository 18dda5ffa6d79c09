// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffSimulator
import GATT

/// The standard Blood Pressure Service (BLS 1.1.1, with Device Information, Current Time and
/// RACP when the cuff has them): ``CuffCentral`` live, the capture reader's standard observer in
/// a replay, ``CuffPeripheral`` simulated. The default protocol: tried on any device no other
/// protocol recognises.
public struct StandardBPSProtocol: CuffProtocol {
    public init() {}

    public var id: CuffProtocolID { .bps }
    public var summary: String { "the standard Blood Pressure Service (0x1810)" }

    static let service = BluetoothUUID(BPSUUID.bloodPressureService)

    public func match(_ offer: DeviceOffer) -> ProtocolMatch? {
        if offer.profile?.service(Self.service) != nil { return .certain }
        if offer.advertisedServices.contains(Self.service) { return .likely }
        return .fallback
    }

    public func makeCentral(configuration: CuffSessionConfiguration) -> any CuffProtocolSession {
        CuffCentral(configuration: configuration)
    }

    public func makePeripheral(configuration: SimulatorConfiguration, requireEncryption: Bool) -> (any GATTPeripheral)?
    {
        CuffPeripheral(configuration: configuration, requireEncryption: requireEncryption)
    }
}
