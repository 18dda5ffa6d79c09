// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSimulator
import GATT

/// Names a cuff protocol: `bps` (the standard Blood Pressure Service), `omron`, … — the value
/// of `--protocol`.
public struct CuffProtocolID: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible
{
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }

    /// The standard Blood Pressure Service session.
    public static let bps: CuffProtocolID = "bps"
}

/// How well a protocol fits what a device shows; the registry takes the best, the earlier
/// registered one on a tie.
public struct ProtocolMatch: Sendable, Hashable, Comparable {
    public var score: Int
    public init(score: Int) { self.score = score }
    public static func < (a: ProtocolMatch, b: ProtocolMatch) -> Bool { a.score < b.score }

    /// Could be (the standard session is tried on any device).
    public static let fallback = ProtocolMatch(score: 1)
    /// A hint: a name, a manufacturer.
    public static let possible = ProtocolMatch(score: 10)
    /// An advertised service UUID or manufacturer data of the protocol.
    public static let likely = ProtocolMatch(score: 50)
    /// The protocol's own GATT service, found by discovery.
    public static let certain = ProtocolMatch(score: 100)
}

/// What a device shows of itself, for choosing its protocol: its advertising before a
/// connection, its GATT services after discovery, its Device Information once read.
public struct DeviceOffer: Sendable, Hashable {
    /// The advertised (or GAP) name.
    public var name: String?
    /// Advertised service UUIDs.
    public var advertisedServices: [BluetoothUUID]
    /// Advertised manufacturer-specific data, by company identifier.
    public var manufacturerData: [UInt16: [UInt8]]
    /// The GATT database, once discovered.
    public var profile: GATTProfile?
    /// Device Information (0x2A29, 0x2A24), once read.
    public var manufacturer: String?
    public var model: String?

    public init(
        name: String? = nil, advertisedServices: [BluetoothUUID] = [], manufacturerData: [UInt16: [UInt8]] = [:],
        profile: GATTProfile? = nil, manufacturer: String? = nil, model: String? = nil
    ) {
        self.name = name
        self.advertisedServices = advertisedServices
        self.manufacturerData = manufacturerData
        self.profile = profile
        self.manufacturer = manufacturer
        self.model = model
    }

    /// True when the device offers `service`: advertised, or found by discovery.
    public func offers(_ service: BluetoothUUID) -> Bool {
        advertisedServices.contains(service) || profile?.service(service) != nil
    }
}

/// A cuff protocol: how to recognise a device that speaks it, and its three roles — the central
/// session (`measure`, `watch`), the observer of a captured session (`replay`, `plot`), and the
/// simulated cuff (`simulate`, `measure --simulated`).
///
/// A protocol is added by conforming a type to this protocol and listing it once in
/// ``CuffProtocolRegistry/builtIn`` (or in a registry a library user builds); nothing in the CLI
/// names it. See `docs/protocol-seam.md`.
public protocol CuffProtocol: Sendable {
    var id: CuffProtocolID { get }
    /// One line for `--help` and logs.
    var summary: String { get }
    /// How well the protocol fits `offer`; nil when it does not.
    func match(_ offer: DeviceOffer) -> ProtocolMatch?
    /// A central session for one connection.
    func makeCentral(configuration: CuffSessionConfiguration) -> any CuffProtocolSession
    /// An observer for one captured connection; `discovered` is the GATT database when another
    /// observer followed the discovery and handed over. Nil: the capture reader's standard
    /// observer follows it.
    func makeObserver(configuration: CuffSessionConfiguration, discovered: GATTProfile?) -> (any CuffProtocolObserver)?
    /// A simulated cuff of this protocol (a GATT server and its device), served by the same
    /// peripheral drivers as any other; nil when the protocol has no simulator. It reads what it
    /// needs of `configuration` (scenario, seed, names, clock); `requireEncryption` asks for a
    /// cuff that serves its results only over an encrypted link.
    func makePeripheral(configuration: SimulatorConfiguration, requireEncryption: Bool) -> (any GATTPeripheral)?
    /// Whether the simulated cuff plays `setting` of its configuration (by default every one).
    func simulatorHonours(_ setting: SimulatorSetting) -> Bool
    /// Rebuilds a record a store kept (`characteristic`, its `raw` value and what the store
    /// holds beside it), decoding `raw` again as the live session did; nil when `characteristic`
    /// is not this protocol's source (the standard session's records are rebuilt by the stores).
    func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?
    ) -> MeasurementRecord?
    /// As above, with the user the store kept beside the row: a protocol whose records come from
    /// several users' memories (Omron) cannot tell it from `raw`. By default the form above.
    func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?, userID: UInt8?
    ) -> MeasurementRecord?
}

extension CuffProtocol {
    public func makeObserver(configuration: CuffSessionConfiguration, discovered: GATTProfile?) -> (
        any CuffProtocolObserver
    )? { nil }
    public func makePeripheral(configuration: SimulatorConfiguration, requireEncryption: Bool) -> (any GATTPeripheral)?
    { nil }
    public func simulatorHonours(_ setting: SimulatorSetting) -> Bool { true }
    public func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?
    ) -> MeasurementRecord? { nil }
    public func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?, userID: UInt8?
    ) -> MeasurementRecord? {
        storedRecord(
            characteristic, raw: raw, device: device, receivedAt: receivedAt, stored: stored,
            sequenceNumber: sequenceNumber)
    }
}
