// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
#if canImport(Glibc)
    import Glibc
#endif
import Transport

extension BluetoothAddress {
    /// From the kernel's `bdaddr_t` (little-endian: `b[0]` is the last text octet).
    public init(_ bdaddr: bdaddr_t, type: AddressType = .public) {
        let b = bdaddr.b
        self.init(littleEndianOctets: [b.0, b.1, b.2, b.3, b.4, b.5], type: type)
    }

    /// As the kernel's `bdaddr_t`.
    public var bdaddr: bdaddr_t {
        let o = littleEndianOctets
        return bdaddr_t(b: (o[0], o[1], o[2], o[3], o[4], o[5]))
    }

    /// The `l2_bdaddr_type` / MGMT address type: `BDADDR_LE_PUBLIC` (1) or `BDADDR_LE_RANDOM` (2).
    public var leAddressTypeCode: UInt8 { type.rawValue }

    /// The HCI address type in advertising reports and LE commands: 0 public, 1 random.
    public var hciAddressTypeCode: UInt8 { type == .public ? 0 : 1 }
}

/// Values from the BlueZ and kernel headers, spelled once.
enum BT {
    static let af = CInt(AF_BLUETOOTH)  // 31
    static let protoL2CAP = CInt(BTPROTO_L2CAP)  // 0
    static let protoHCI = CInt(BTPROTO_HCI)  // 1
    static let solBluetooth = CInt(SOL_BLUETOOTH)  // 274
    static let optSecurity = CInt(BT_SECURITY)  // 4
    static let solHCI = CInt(SOL_HCI)  // 0
    static let optHCIFilter = CInt(HCI_FILTER)  // 2
    static let attCID: UInt16 = 4
    static let channelRaw: UInt16 = UInt16(HCI_CHANNEL_RAW)
    static let channelControl: UInt16 = UInt16(HCI_CHANNEL_CONTROL)
    static let devNone: UInt16 = 0xFFFF
    static let seqpacket = CInt(SOCK_SEQPACKET.rawValue)
    static let raw = CInt(SOCK_RAW.rawValue)
    static let cloexec = CInt(SOCK_CLOEXEC.rawValue)
    static let nonblock = CInt(SOCK_NONBLOCK.rawValue)
}
