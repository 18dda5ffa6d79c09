// SPDX-License-Identifier: GPL-2.0-or-later

import Testing
@testable import GATT

@Suite struct BluetoothUUIDTests {
    @Test func parsesShortForms() {
        #expect(BluetoothUUID("2a35") == BluetoothUUID(0x2A35))
        #expect(BluetoothUUID("0x2A35") == BluetoothUUID(0x2A35))
        #expect(BluetoothUUID("00002A35-0000-1000-8000-00805F9B34FB") == BluetoothUUID(0x2A35))
        #expect(BluetoothUUID("00002a35-0000-1000-8000-00805f9b34fb")?.uuid16 == 0x2A35)
        #expect(BluetoothUUID("0000180D")?.uuid16 == 0x180D)
        #expect(BluetoothUUID("12345678")?.uuid32 == 0x1234_5678)
        #expect(BluetoothUUID("12345678")?.uuid16 == nil)
    }

    @Test func rejectsNonsense() {
        for s in ["", "2a3", "2a355", "+a35", "0x", "zzzz", "00002a35-0000-1000-8000_00805f9b34fb", "é2a3"] {
            #expect(BluetoothUUID(s) == nil, "\(s)")
        }
    }

    @Test func description() {
        #expect(BluetoothUUID(0x2A35).description == "2A35")
        #expect(BluetoothUUID(0x0001).description == "0001")
        #expect(vendorUUID.description == "0000FF01-1234-5678-9ABC-DEF012345678")
        #expect(BluetoothUUID(uuid32: 0x1234_5678).description == "12345678-0000-1000-8000-00805F9B34FB")
    }

    @Test func wireForm() {
        #expect(BluetoothUUID(0x2A35).littleEndianBytes == [0x35, 0x2A])
        #expect(vendorUUID.littleEndianBytes == h("78563412f0debc9a78563412 01ff0000"))
        #expect(BluetoothUUID(littleEndian: h("78563412f0debc9a78563412 01ff0000")[...]) == vendorUUID)
        // The 128-bit wire form of a 16-bit UUID is the same UUID.
        #expect(BluetoothUUID(littleEndian: h("fb349b5f80000080 00100000 352a0000")[...]) == BluetoothUUID(0x2A35))
        #expect(BluetoothUUID(littleEndian: [1, 2, 3][...]) == nil)
    }

    @Test func namedUUIDs() {
        #expect(BluetoothUUID.primaryService.uuid16 == 0x2800)
        #expect(BluetoothUUID.secondaryService.uuid16 == 0x2801)
        #expect(BluetoothUUID.include.uuid16 == 0x2802)
        #expect(BluetoothUUID.characteristic.uuid16 == 0x2803)
        #expect(BluetoothUUID.characteristicUserDescription.uuid16 == 0x2901)
        #expect(BluetoothUUID.clientCharacteristicConfiguration.uuid16 == 0x2902)
        #expect(BluetoothUUID.genericAccess.uuid16 == 0x1800)
        #expect(BluetoothUUID.genericAttribute.uuid16 == 0x1801)
        #expect(BluetoothUUID.deviceName.uuid16 == 0x2A00)
        #expect(BluetoothUUID.appearance.uuid16 == 0x2A01)
    }
}
