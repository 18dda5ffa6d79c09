// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSimulator
import GATT
import Omron

extension CuffProtocolID {
    /// Omron's proprietary EEPROM protocol (classic 4-channel service or FE4A).
    public static let omron: CuffProtocolID = "omron"
}

/// Omron's own protocol: every user's stored readings, the unread counters and the clock, over
/// the classic or the FE4A service (``OmronCentral`` live, ``OmronPeripheral`` simulated).
///
/// Chosen over the standard Blood Pressure Service whenever the Omron service is there (most
/// Omron cuffs have both; the standard one gives at best the latest reading).
public struct OmronProtocol: CuffProtocol {
    public init() {}

    public var id: CuffProtocolID { .omron }
    public var summary: String { "Omron's EEPROM protocol (service ecbe3980… or 0xFE4A): every user's stored readings" }

    static let classic = BluetoothUUID(OmronUUID.classicService)!
    static let modern = BluetoothUUID(OmronUUID.modernService)!
    /// The vendor's own service found by discovery beats the standard one most Omron cuffs also have.
    static let ownService = ProtocolMatch(score: 150)

    public func match(_ offer: DeviceOffer) -> ProtocolMatch? {
        if let p = offer.profile {
            return p.service(Self.classic) != nil || p.service(Self.modern) != nil ? Self.ownService : nil
        }
        if offer.advertisedServices.contains(Self.classic) || offer.advertisedServices.contains(Self.modern)
            || offer.manufacturerData[OmronUUID.companyID] != nil
        {
            return .likely
        }
        if let n = offer.name?.uppercased(), n.hasPrefix("BLESMART_") || OmronCatalog.profile(advertisedName: n) != nil
        {
            return .possible
        }
        return nil
    }

    /// The profile for a device: `--model`, else a model the advert shows (`HEM-…`); nil when
    /// neither says (Device Information's model number decides after discovery).
    static func profile(_ c: CuffSessionConfiguration) -> OmronProfile? {
        if let m = c.omronModel { return OmronCatalog.profile(named: m) }
        for name in [c.advertisement?.model, c.advertisement?.name, c.advertisedName].compactMap({ $0 }) {
            if let p = OmronCatalog.profile(named: name) ?? OmronCatalog.profile(advertisedName: name) { return p }
        }
        return nil
    }

    public func makeCentral(configuration c: CuffSessionConfiguration) -> any CuffProtocolSession {
        let chosen = Self.profile(c)
        // Until discovery (its family) and Device Information say otherwise: the catalog's default.
        let p = chosen ?? OmronCatalog.defaultProfile(.modern)
        var o = c.omronSync
        o.setTime = c.setTime
        return OmronCentral(
            profile: p, options: o, device: DeviceInfo(address: c.address, name: c.advertisedName),
            utcOffsetSeconds: c.localUTCOffsetSeconds,
            modelForced: c.omronModel != nil, modelHint: chosen?.id, standardFallback: c.forcedProtocol == nil,
            gattCache: c.gattCache, protocols: c.forcedProtocol == nil ? c.protocols : nil, timeLimit: c.timeout,
            follow: c.follow)
    }

    public func makeObserver(configuration c: CuffSessionConfiguration, discovered: GATTProfile?) -> (
        any CuffProtocolObserver
    )? {
        guard let gatt = discovered else { return nil }
        let transport: OmronTransport = gatt.service(Self.classic) != nil ? .classic : .modern
        let device = DeviceInfo(address: c.address, name: c.advertisedName)
        // --model names the map; otherwise the captured reads tell it.
        if let p = Self.profile(c), p.transport == transport {
            return OmronCaptureObserver(OmronObserver(profile: p), gatt: gatt, device: device)
        }
        return OmronCaptureObserver(OmronObserver(transport: transport), gatt: gatt, device: device)
    }

    public func makePeripheral(configuration: SimulatorConfiguration, requireEncryption: Bool) -> (any GATTPeripheral)?
    {
        OmronPeripheral(configuration: configuration)
    }

    /// A kept Omron row again: the slot bytes decoded with the layout of the profile the store's
    /// device model names, for the user kept beside it. The store keeps no slot number, so
    /// `omron.slot` is null in the rebuilt record.
    public func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?, userID: UInt8?
    ) -> MeasurementRecord? {
        guard characteristic == .named(id.rawValue),
            let p = Self.storedProfile(model: device.model, slotSize: raw.count),
            let reading = try? OmronRecordCodec.decode(raw[...], layout: p.layout, slotSize: p.slotSize)
        else { return nil }
        var r = MeasurementRecord.from(
            omron: reading, profile: p, user: userID.map(Int.init), slot: nil, raw: raw, device: device,
            at: receivedAt)
        r.stored = stored
        return r
    }

    /// The profile a kept record was read with: the one the device's model names (an unknown
    /// model: its closest, as the live session chose), or a sibling of the same model number
    /// whose slot has the record's length (the other transport family's profile).
    static func storedProfile(model: String?, slotSize: Int) -> OmronProfile? {
        guard let model, !model.isEmpty else { return nil }
        let named = OmronCatalog.profile(named: model) ?? OmronCatalog.closest(to: model)
        if named.slotSize == slotSize { return named }
        return OmronCatalog.profiles.first {
            OmronCatalog.base($0.id) == OmronCatalog.base(named.id) && $0.slotSize == slotSize
        }
    }
}
