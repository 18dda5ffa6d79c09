// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// Bluetooth LE link-layer packets as LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR (256) carries them.
///
/// Pseudo-header (10 bytes, little-endian): RF channel (1), signal power (1), noise power (1),
/// access-address offenses (1), reference access address (4), flags (2). Flags: 0x0001 dewhitened,
/// 0x0008 decrypted, 0x0380 PDU type (2 data central→peripheral, 3 data peripheral→central),
/// 0x0400 CRC checked, 0x0800 CRC valid. Then the LE packet without preamble: access address (4),
/// PDU header (2: bits 0–1 LLID or 0–3 advertising PDU type, byte 1 length), payload, CRC (3).
public enum LinkLayer {
    public static let pseudoHeaderLength = 10
    /// The access address of every advertising-channel packet.
    public static let advertisingAccessAddress: UInt32 = 0x8E89_BED6

    struct Packet {
        var channel: UInt8
        var flags: UInt16
        var accessAddress: UInt32
        var header0: UInt8
        var pdu: [UInt8]

        var decrypted: Bool { flags & 0x0008 != 0 }
        var crcChecked: Bool { flags & 0x0400 != 0 }
        var crcValid: Bool { flags & 0x0800 != 0 }
        var direction: ATTDirection {
            switch (flags >> 7) & 0x7 {
            case 2: .centralToPeripheral
            case 3: .peripheralToCentral
            default: .unknown
            }
        }

        init?(_ bytes: [UInt8]) {
            var r = ByteReader(bytes)
            guard let channel = r.readUInt8(), r.skip(7), let flags = r.readUInt16(),
                let aa = r.readUInt32(), let h0 = r.readUInt8(), let length = r.readUInt8(),
                let pdu = r.readBytes(Int(length))
            else { return nil }
            self.channel = channel
            self.flags = flags
            accessAddress = aa
            header0 = h0
            self.pdu = Array(pdu)
        }
    }

    /// CONNECT_IND (advertising PDU type 0x05): InitA, AdvA, then LLData starting with the access address.
    struct ConnectIndication {
        var initiator: BDAddress
        var advertiser: BDAddress
        var advertiserType: AddressType
        var accessAddress: UInt32

        init?(_ p: Packet) {
            var r = ByteReader(p.pdu)
            guard let initA = r.readAddress(), let advA = r.readAddress(), let aa = r.readUInt32() else { return nil }
            initiator = initA
            advertiser = advA
            advertiserType = p.header0 & 0x80 != 0 ? .random : .public  // RxAdd describes AdvA
            accessAddress = aa
        }
    }
}
