// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import Testing
@testable import BlueZ
import Transport

/// Swift's view of the kernel structs must match C's: the kernel reads these bytes.
@Suite("Kernel struct layout")
struct LayoutTests {
    @Test func sockaddrL2() {
        #expect(MemoryLayout<sockaddr_l2>.stride == 14)
        #expect(cuff_sizeof_sockaddr_l2() == 14)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_bdaddr) == 4)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_cid) == 10)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_bdaddr_type) == 12)
        #expect(cuff_offsetof_l2_bdaddr() == 4)
        #expect(cuff_offsetof_l2_cid() == 10)
        #expect(cuff_offsetof_l2_bdaddr_type() == 12)
    }

    @Test func otherStructs() {
        #expect(MemoryLayout<sockaddr_hci>.stride == cuff_sizeof_sockaddr_hci())
        #expect(MemoryLayout<hci_filter>.stride == cuff_sizeof_hci_filter())
        #expect(MemoryLayout<hci_dev_info>.stride == cuff_sizeof_hci_dev_info())
        #expect(MemoryLayout<bdaddr_t>.size == 6)
        #expect(MemoryLayout<bt_security>.size == 2)
    }

    @Test func l2AddressBytes() throws {
        let peer = try #require(BluetoothAddress("00:AA:01:01:00:01", type: .random))
        let sa = L2CAPATTBearer.l2Address(peer)
        let bytes = withUnsafeBytes(of: sa) { Array($0) }
        // family 31 | psm 0 | bdaddr little-endian | cid 4 | type 2 (LE random)
        #expect(Array(bytes.prefix(13)) == [31, 0, 0, 0, 0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 4, 0, 2])
    }

    @Test func bdaddrIsReversed() throws {
        let a = try #require(BluetoothAddress("00:AA:01:00:00:2F"))
        let b = a.bdaddr
        #expect([b.b.0, b.b.1, b.b.2, b.b.3, b.b.4, b.b.5] == [0x2F, 0x00, 0x00, 0x01, 0xAA, 0x00])
        #expect(BluetoothAddress(b) == a)
        var parsed = bdaddr_t()
        #expect(str2ba("00:AA:01:00:00:2F", &parsed) == 0)  // libbluetooth agrees
        #expect(BluetoothAddress(parsed) == a)
    }

    @Test func hciFilterBits() {
        let f = HCIFilter.leDefault.cValue
        #expect(f.type_mask == 1 << 4)
        #expect(f.event_mask.0 == (1 << 0x05 | 1 << 0x0E | 1 << 0x0F))
        #expect(f.event_mask.1 == 1 << (0x3E - 32))
    }
}
