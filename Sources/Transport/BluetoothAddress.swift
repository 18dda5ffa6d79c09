// SPDX-License-Identifier: GPL-2.0-or-later

/// A 48-bit Bluetooth device address with its LE address type, written `AA:BB:CC:DD:EE:FF`.
///
/// Pure value type (no libbluetooth here); BlueZ converts it to the kernel's `bdaddr_t`, whose
/// bytes are in the reverse (little-endian) order of the text form.
public struct BluetoothAddress: Sendable, Hashable, CustomStringConvertible {
    /// LE address type, as the kernel's `BDADDR_LE_PUBLIC` (1) / `BDADDR_LE_RANDOM` (2).
    public enum AddressType: UInt8, Sendable, Hashable, CustomStringConvertible {
        case `public` = 1
        case random = 2
        public var description: String { self == .public ? "public" : "random" }
    }

    /// The address, first text octet in the most significant byte (bits 47…40).
    public var rawValue: UInt64
    public var type: AddressType

    public init(rawValue: UInt64, type: AddressType = .public) {
        self.rawValue = rawValue & 0xFFFF_FFFF_FFFF
        self.type = type
    }

    /// The six octets in text order (`AA` first).
    public init(octets: [UInt8], type: AddressType = .public) {
        precondition(octets.count == 6, "a Bluetooth address has 6 octets")
        self.init(rawValue: octets.reduce(0) { $0 << 8 | UInt64($1) }, type: type)
    }

    /// The six octets in wire / `bdaddr_t` order (little-endian: `FF` first).
    public init(littleEndianOctets bytes: some Collection<UInt8>, type: AddressType = .public) {
        precondition(bytes.count == 6, "a Bluetooth address has 6 octets")
        self.init(octets: bytes.reversed(), type: type)
    }

    /// Parses `AA:BB:CC:DD:EE:FF` (hex digits in either case); nil otherwise.
    public init?(_ text: some StringProtocol, type: AddressType = .public) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var value: UInt64 = 0
        for part in parts {
            guard part.count == 2, part.allSatisfy(\.isHexDigit), let byte = UInt8(part, radix: 16) else { return nil }
            value = value << 8 | UInt64(byte)
        }
        self.init(rawValue: value, type: type)
    }

    /// Text order octets (`AA` first).
    public var octets: [UInt8] { (0..<6).map { UInt8(truncatingIfNeeded: rawValue >> (40 - 8 * $0)) } }

    /// Wire / `bdaddr_t` order octets (`FF` first).
    public var littleEndianOctets: [UInt8] { octets.reversed() }

    /// `AA:BB:CC:DD:EE:FF`, upper case.
    public var description: String {
        octets.map { b in
            let s = String(b, radix: 16, uppercase: true)
            return b < 0x10 ? "0" + s : s
        }.joined(separator: ":")
    }
}
