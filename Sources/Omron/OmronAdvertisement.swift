// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// What an advertisement says about an Omron cuff (facts sheet §1.2): the service it lists, the
/// manufacturer data of company 0x020E, a `BLESmart_…` or `HEM-…` name.
public struct OmronAdvertisement: Sendable, Hashable {
    public var transport: OmronTransport?
    /// The profile a `HEM-…` token in the name picks (the advert alone rarely tells the model).
    public var profile: OmronProfile?
    public var format: UInt8?
    /// Manufacturer data that breaks its format's length rule (hass-omron rejects it).
    public var malformedManufacturerData = false
    public var registeredUsers: Int?
    public var timeNotSet: Bool?
    public var pairingMode: Bool?
    public var dataPending: Bool?

    /// Nil when nothing in the advert is Omron's. `structures` are (AD type, data) pairs.
    public static func recognise(name: String?, structures: [(type: UInt8, data: [UInt8])]) -> OmronAdvertisement? {
        var a = OmronAdvertisement()
        var seen = false
        for s in structures {
            switch s.type {
            case 0x02, 0x03:
                var i = 0
                while i + 1 < s.data.count {
                    if UInt16(s.data[i]) | UInt16(s.data[i + 1]) << 8 == 0xFE4A { a.transport = .modern; seen = true }
                    i += 2
                }
            case 0x06, 0x07:
                var i = 0
                while i + 16 <= s.data.count {
                    // 128-bit UUIDs are little-endian in adverts.
                    let text = Hex.encode(s.data[i..<i + 16].reversed())
                    if text == OmronUUID.classicService.filter({ $0 != "-" }) { a.transport = .classic; seen = true }
                    i += 16
                }
            case 0xFF where s.data.count >= 2 && UInt16(s.data[0]) | UInt16(s.data[1]) << 8 == OmronUUID.companyID:
                seen = true
                a.decodeManufacturer(Array(s.data.dropFirst(2)))
            default:
                continue
            }
        }
        if let name {
            let u = name.uppercased()
            if u.hasPrefix("BLESMART_") { seen = true }
            if let p = OmronCatalog.profile(advertisedName: name) {
                a.profile = p
                seen = true
            } else if u.contains("OMRON") {
                seen = true
            }
        }
        return seen ? a : nil
    }

    mutating func decodeManufacturer(_ p: [UInt8]) {
        guard let f = p.first else { malformedManufacturerData = true; return }
        format = f
        guard p.count >= 2 else { malformedManufacturerData = true; return }
        let status = p[1]
        let users = Int(status & 0x03)
        let ok: Bool
        switch f {
        case 0x01, 0x02, 0x06: ok = p.count >= 4 + 3 * users
        case 0x03: ok = p.count >= 3
        case 0x08: ok = p.count == 10 || p.count == 13
        case 0x09: ok = [9, 11, 13, 15].contains(p.count)
        default: ok = true
        }
        malformedManufacturerData = !ok
        guard ok, [0x01, 0x02, 0x03, 0x06, 0x08, 0x09].contains(f) else { return }
        registeredUsers = users
        timeNotSet = status & 0x04 != 0
        pairingMode = status & 0x08 != 0
        if f != 0x03 { dataPending = status & 0x40 != 0 }
    }

    /// `"omron"` object of `cuff scan`.
    public var json: JSON {
        func b(_ v: Bool?) -> JSON { v.map(JSON.bool) ?? .null }
        return .object([
            ("transport", transport.map { .string($0.rawValue) } ?? .null),
            ("profile", profile.map { .string($0.id) } ?? .null),
            ("format", format.map { .int(Int64($0)) } ?? .null),
            ("manufacturer_data_valid", .bool(!malformedManufacturerData)),
            ("registered_users", registeredUsers.map { .int(Int64($0)) } ?? .null),
            ("time_not_set", b(timeNotSet)), ("pairing_mode", b(pairingMode)), ("data_pending", b(dataPending)),
        ])
    }
}
