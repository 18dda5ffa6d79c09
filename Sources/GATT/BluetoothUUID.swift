// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// A Bluetooth UUID: 128 bits, with 16- and 32-bit aliases expanded over the Base UUID
/// `00000000-0000-1000-8000-00805F9B34FB` (Core Vol 3 Part B §2.5.1).
///
/// A 16-bit UUID and its 128-bit expansion are the same value. On the ATT wire a UUID is 2 bytes
/// when it has a 16-bit alias and 16 bytes otherwise, both little-endian (Vol 3 Part F §3.2.1).
public struct BluetoothUUID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The first 8 bytes of the UUID as written in text (big-endian).
    public var high: UInt64
    /// The last 8 bytes of the UUID as written in text (big-endian).
    public var low: UInt64

    static let baseHigh: UInt64 = 0x0000_0000_0000_1000
    static let baseLow: UInt64 = 0x8000_0080_5F9B_34FB

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A 16-bit UUID such as `0x2A35`.
    public init(_ short: UInt16) { self.init(uuid32: UInt32(short)) }

    /// A 32-bit UUID, expanded over the Base UUID.
    public init(uuid32: UInt32) { self.init(high: UInt64(uuid32) << 32 | Self.baseHigh, low: Self.baseLow) }

    /// Parses the ATT wire form: 2 or 16 bytes, little-endian. Nil for any other length.
    public init?(littleEndian bytes: ArraySlice<UInt8>) {
        var r = ByteReader(bytes)
        switch bytes.count {
        case 2: self.init(r.readUInt16()!)
        case 16: self.init(high: 0, low: r.readUInt64()!); high = r.readUInt64()!
        default: return nil
        }
    }

    /// Parses `2a35`, `0x2A35`, `0000180D` (32-bit) or `00002a35-0000-1000-8000-00805f9b34fb`
    /// (with or without dashes), in any case. Nil for anything else.
    public init?(_ text: String) {
        var s = Substring(text)
        if s.hasPrefix("0x") || s.hasPrefix("0X") { s = s.dropFirst(2) }
        if s.count == 36 {
            let dashes = s.indices.enumerated().filter { [8, 13, 18, 23].contains($0.offset) }.map { s[$0.element] }
            guard dashes.allSatisfy({ $0 == "-" }) else { return nil }
            s = Substring(s.filter { $0 != "-" })
            guard s.count == 32 else { return nil }
        }
        guard s.allSatisfy(\.isHexDigit), s.allSatisfy(\.isASCII) else { return nil }
        switch s.count {
        case 4: self.init(UInt16(s, radix: 16)!)
        case 8: self.init(uuid32: UInt32(s, radix: 16)!)
        case 32: self.init(high: UInt64(s.prefix(16), radix: 16)!, low: UInt64(s.suffix(16), radix: 16)!)
        default: return nil
        }
    }

    /// The 16-bit alias, when this UUID is `0000xxxx-0000-1000-8000-00805F9B34FB`.
    public var uuid16: UInt16? {
        guard low == Self.baseLow, high & 0xFFFF_0000_FFFF_FFFF == Self.baseHigh else { return nil }
        return UInt16(truncatingIfNeeded: high >> 32)
    }

    /// The 32-bit alias, when this UUID is `xxxxxxxx-0000-1000-8000-00805F9B34FB`.
    public var uuid32: UInt32? {
        guard low == Self.baseLow, high & 0xFFFF_FFFF == Self.baseHigh else { return nil }
        return UInt32(truncatingIfNeeded: high >> 32)
    }

    /// The ATT wire form: 2 bytes for a 16-bit alias, else 16 bytes, little-endian.
    public var littleEndianBytes: [UInt8] {
        var w = ByteWriter(capacity: 16)
        if let short = uuid16 {
            w.write(short)
        } else {
            w.write(low)
            w.write(high)
        }
        return w.bytes
    }

    /// `2A35` for a 16-bit alias, else the 36-character uppercase form.
    public var description: String {
        if let short = uuid16 { return String(Hex.handle(short).dropFirst(2)) }
        let hex = hexDigits(high, 16) + hexDigits(low, 16)
        var out = ""
        for (i, c) in hex.enumerated() {
            if [8, 12, 16, 20].contains(i) { out.append("-") }
            out.append(c)
        }
        return out
    }

    public static func < (a: BluetoothUUID, b: BluetoothUUID) -> Bool { (a.high, a.low) < (b.high, b.low) }

    // MARK: UUIDs the GATT layer itself uses (Assigned Numbers §3.5–3.8).

    /// «Primary Service» declaration type.
    public static let primaryService = BluetoothUUID(0x2800)
    /// «Secondary Service» declaration type.
    public static let secondaryService = BluetoothUUID(0x2801)
    /// «Include» declaration type.
    public static let include = BluetoothUUID(0x2802)
    /// «Characteristic» declaration type.
    public static let characteristic = BluetoothUUID(0x2803)
    /// Characteristic Extended Properties descriptor.
    public static let characteristicExtendedProperties = BluetoothUUID(0x2900)
    /// Characteristic User Description descriptor.
    public static let characteristicUserDescription = BluetoothUUID(0x2901)
    /// Client Characteristic Configuration descriptor (CCCD).
    public static let clientCharacteristicConfiguration = BluetoothUUID(0x2902)
    /// Generic Access service.
    public static let genericAccess = BluetoothUUID(0x1800)
    /// Generic Attribute service.
    public static let genericAttribute = BluetoothUUID(0x1801)
    /// Device Name characteristic.
    public static let deviceName = BluetoothUUID(0x2A00)
    /// Appearance characteristic.
    public static let appearance = BluetoothUUID(0x2A01)
    /// Service Changed characteristic.
    public static let serviceChanged = BluetoothUUID(0x2A05)
    /// Database Hash characteristic (Core Vol 3 Part G §7.3).
    public static let databaseHash = BluetoothUUID(0x2B2A)
}

private func hexDigits(_ v: UInt64, _ count: Int) -> String {
    let s = String(v, radix: 16, uppercase: true)
    return String(repeating: "0", count: count - s.count) + s
}
