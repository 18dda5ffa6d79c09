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
        let level = b.addCharacteristic(
            BluetoothUUID(0x2A19), properties: [.read, .notify], permissions: .read, value: [99])
        let description = b.addDescriptor(
            .characteristicUserDescription, permissions: .read, value: Array("battery".utf8))
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

/// A layout copied from a device, with gaps between handles, a CCCD after another descriptor and
/// a last service that runs to 0xFFFF: the server serves it handle for handle, and the client
/// discovers exactly that.
@Suite struct SparseLayoutTests {
    static func database() -> AttributeDatabase {
        var b = AttributeDatabase.Builder()
        b.skip(to: 0x0001)
        b.addService(.genericAccess)
        b.addCharacteristic(
            .deviceName, properties: .read, permissions: .read, value: Array("Cuff".utf8), declarationHandle: 0x0002,
            descriptors: [])
        b.endService(at: 0x0007)
        b.skip(to: 0x0020)
        b.addService(BluetoothUUID(0x1810))
        b.addCharacteristic(
            BluetoothUUID(0x2A35), properties: .indicate, permissions: [], declarationHandle: 0x0025,
            descriptors: [
                (0x0029, .clientCharacteristicConfiguration, []), (0x0027, BluetoothUUID(0x2901), Array("BP".utf8)),
            ])
        b.addCharacteristic(
            BluetoothUUID(0x2A49), properties: .read, permissions: .read, value: [0x3F, 0x00],
            declarationHandle: 0x0030, descriptors: [])
        b.endService(at: 0xFFFF)
        return b.build()
    }

    @Test func handlesAreTheOnesGiven() {
        let db = Self.database()
        #expect(db.attributes.map(\.handle) == [0x01, 0x02, 0x03, 0x20, 0x25, 0x26, 0x27, 0x29, 0x30, 0x31])
        #expect(db.services.map(\.endHandle) == [0x0007, 0xFFFF])
        #expect(db.characteristic(BluetoothUUID(0x2A35))?.cccdHandle == 0x0029)
        #expect(db.attribute(0x0028) == nil && db.attribute(0x0029)?.type == .clientCharacteristicConfiguration)
        #expect(db.attributes(in: 0x0004, 0x0024).map(\.handle) == [0x20])
        #expect(db.attributes(in: 0x0030, 0xFFFF).map(\.handle) == [0x30, 0x31])
        #expect(db.lastHandle == 0x31)
        var copy = db
        let set = copy.setValue([1, 0], at: 0x0029)
        let unset = copy.setValue([1], at: 0x0028)
        #expect(set && copy.attribute(0x0029)?.value == [1, 0])
        #expect(!unset && copy.attributes.count == db.attributes.count)
    }

    @Test func theClientDiscoversTheSameLayout() {
        var link = InMemoryLink()
        link.server = GATTServer(database: Self.database())
        let (id, actions) = link.client.discover(now: t0)
        link.client(actions)
        guard case let .success(.profile(p))? = link.result(id) else {
            Issue.record("discovery failed: \(String(describing: link.result(id)))")
            return
        }
        #expect(p.services.map(\.handle) == [0x0001, 0x0020])
        let bpm = p.services[1].characteristics.first { $0.uuid == BluetoothUUID(0x2A35) }
        #expect(bpm?.declarationHandle == 0x0025 && bpm?.valueHandle == 0x0026 && bpm?.cccdHandle == 0x0029)
        #expect(p.services[1].characteristics.map(\.valueHandle) == [0x0026, 0x0031])
        // Subscribing through the CCCD the client found reaches the server's characteristic.
        let sub = link.client.subscribe(bpm!, notify: false, indicate: true, now: t0)
        link.client(sub.actions)
        #expect(
            link.serverEvents.contains(
                .subscriptionChanged(valueHandle: 0x0026, uuid: BluetoothUUID(0x2A35), notify: false, indicate: true)))
        #expect(link.server.subscription(valueHandle: 0x0026) == (false, true))
    }
}
