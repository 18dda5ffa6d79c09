// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import GATT

@Suite struct AttributeDatabaseTests {
    @Test func layout() {
        let db = testDatabase()
        #expect(db.lastHandle == 0x10)
        let expected: [(UInt16, BluetoothUUID, String)] = [
            (0x01, .primaryService, "0018"),
            (0x02, .characteristic, "02 0300 002a"),
            (0x04, .primaryService, "1018"),
            (0x05, .characteristic, "20 0600 352a"),
            (0x06, BluetoothUUID(0x2A35), ""),
            (0x07, .clientCharacteristicConfiguration, "0000"),
            (0x08, .characteristic, "10 0900 362a"),
            (0x0B, .characteristic, "02 0c00 492a"),
            (0x0C, BluetoothUUID(0x2A49), "2100"),
            (0x0D, .primaryService, "78563412f0debc9a78563412 00ff0000"),
            (0x0E, .characteristic, "2c 0f00 78563412f0debc9a78563412 01ff0000"),
            (0x10, .clientCharacteristicConfiguration, "0000"),
        ]
        for (handle, type, value) in expected {
            #expect(db.attribute(handle)?.type == type, "\(handle)")
            #expect(db.attribute(handle)?.value == h(value), "\(handle)")
            #expect(db.attribute(handle)?.handle == handle)
        }
        #expect(db.attribute(0) == nil)
        #expect(db.attribute(0x11) == nil)
    }

    @Test func servicesAndCharacteristics() {
        let db = testDatabase()
        #expect(db.services.map { [$0.handle, $0.endHandle] } == [[1, 3], [4, 0x0C], [0x0D, 0x10]])
        let bpm = db.characteristic(BluetoothUUID(0x2A35))
        #expect(bpm?.declarationHandle == 5 && bpm?.valueHandle == 6 && bpm?.cccdHandle == 7)
        #expect(db.characteristic(BluetoothUUID(0x2A49))?.cccdHandle == nil)
        #expect(db.characteristic(cccdHandle: 0x0A)?.uuid == BluetoothUUID(0x2A36))
        #expect(db.service(containing: 0x0B)?.uuid == BluetoothUUID(0x1810))
    }

    @Test func builderReturnsHandlesAndDescriptors() {
        var b = AttributeDatabase.Builder()
        let service = b.addService(BluetoothUUID(0x180F), primary: false)
        let level = b.addCharacteristic(BluetoothUUID(0x2A19), properties: [.read, .notify], permissions: .read, value: [99])
        let description = b.addDescriptor(.characteristicUserDescription, permissions: .read, value: Array("battery".utf8))
        let db = b.build()
        #expect(service == 1)
        #expect(level == .init(declarationHandle: 2, valueHandle: 3, cccdHandle: 4))
        #expect(description == 5)
        #expect(db.services.first?.isPrimary == false)
        #expect(db.attribute(1)?.type == .secondaryService)
        #expect(db.services.first?.endHandle == 5)
    }

    @Test func genericAccessService() {
        var b = AttributeDatabase.Builder()
        b.addGenericAccessService(deviceName: "Cuff", appearance: 0x0381)  // Generic Blood Pressure: Arm
        let db = b.build()
        #expect(db.attributes.map { Hex.encode($0.value) } == ["0018", "020300002a", "43756666", "020500012a", "8103"])
    }
}
