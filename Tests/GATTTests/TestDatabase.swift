// SPDX-License-Identifier: GPL-2.0-or-later

import Testing
@testable import GATT

let vendorService = BluetoothUUID("0000FF00-1234-5678-9ABC-DEF012345678")!
let deviceNameValue = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)  // 36 bytes

/// A small cuff-like database; the handle layout is what the tests' hand-written PDUs assume.
///
///     0x0001 «Primary Service» 1800            0x0004 «Primary Service» 1810
///     0x0002 «Characteristic» 02 0300 002a     0x0005 «Characteristic» 20 0600 352a
///     0x0003 Device Name (36 bytes)            0x0006 BPM (indicate, not readable)   0x0007 CCCD
///                                              0x0008 «Characteristic» 10 0900 362a
///     0x000D «Primary Service» FF00-…          0x0009 ICP (notify)                   0x000A CCCD
///     0x000E «Characteristic» 2c 0f00 FF01-…   0x000B «Characteristic» 02 0c00 492a
///     0x000F control point (write, indicate)   0x000C Feature (read, encrypted)
///     0x0010 CCCD
func testDatabase() -> AttributeDatabase {
    var b = AttributeDatabase.Builder()
    b.addService(.genericAccess)
    b.addCharacteristic(.deviceName, properties: .read, permissions: .read, value: deviceNameValue)
    b.addService(BluetoothUUID(0x1810))
    b.addCharacteristic(BluetoothUUID(0x2A35), properties: .indicate, permissions: [])
    b.addCharacteristic(BluetoothUUID(0x2A36), properties: .notify, permissions: [])
    b.addCharacteristic(
        BluetoothUUID(0x2A49), properties: .read, permissions: [.read, .readEncrypted], value: [0x21, 0x00])
    b.addService(vendorService)
    b.addCharacteristic(vendorUUID, properties: [.write, .writeWithoutResponse, .indicate], permissions: .write)
    return b.build()
}

func send(_ hex: String) -> GATTServerAction { .send(h(hex)) }
