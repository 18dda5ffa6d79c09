// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import BlueZ
import Transport

@Suite("bluetoothd backend: the object tree mirrored into ATT handles")
struct BlueZGATTMirrorTests {
    static let dev = "/org/bluez/hci1/dev_00_AA_01_00_00_00"

    static func service(_ uuid: String) -> [String: DBusValue] {
        ["org.bluez.GattService1": .dictionary([("UUID", .string(uuid)), ("Primary", .boolean(true))])]
    }
    static func char(_ uuid: String, _ flags: [String]) -> [String: DBusValue] {
        [
            "org.bluez.GattCharacteristic1": .dictionary([
                ("UUID", .string(uuid)), ("Flags", .array(element: "s", flags.map(DBusValue.string))),
            ])
        ]
    }
    static func desc(_ uuid: String) -> [String: DBusValue] {
        ["org.bluez.GattDescriptor1": .dictionary([("UUID", .string(uuid))])]
    }

    /// The simulator's Blood Pressure service as bluetoothd 5.66 names it (service000a: start
    /// handle 0x0a; char000b: declaration 0x0b, so value 0x0c; desc000d: the CCCD).
    @Test func handlesComeFromTheObjectNames() throws {
        let objects: [String: [String: DBusValue]] = [
            Self.dev: ["org.bluez.Device1": .dictionary([])],
            Self.dev + "/service000a": Self.service("00001810-0000-1000-8000-00805f9b34fb"),
            Self.dev + "/service000a/char000b": Self.char("00002a35-0000-1000-8000-00805f9b34fb", ["indicate"]),
            Self.dev + "/service000a/char000b/desc000d": Self.desc("00002902-0000-1000-8000-00805f9b34fb"),
            Self.dev + "/service000a/char000e": Self.char("00002a49-0000-1000-8000-00805f9b34fb", ["read"]),
            Self.dev + "/service0020": Self.service("0000180a-0000-1000-8000-00805f9b34fb"),
            Self.dev + "/service0020/char0021": Self.char("00002a29-0000-1000-8000-00805f9b34fb", ["read"]),
            // Not ours / malformed: ignored, never trapping.
            "/org/bluez/hci1/dev_11_22_33_44_55_66/service0001": Self.service("00001810-0000-1000-8000-00805f9b34fb"),
            Self.dev + "/servicezzzz": Self.service("00001810-0000-1000-8000-00805f9b34fb"),
            Self.dev + "/service000a/char0009": Self.char("00002a36-0000-1000-8000-00805f9b34fb", ["notify"]),
        ]
        let (db, layout, notes) = BlueZGATTBearer.mirror(objects, devicePath: Self.dev)
        #expect(db.services.map(\.handle) == [0x0a, 0x20])
        #expect(db.services.map(\.endHandle) == [0x1f, 0xffff])
        #expect(db.characteristics.map(\.valueHandle) == [0x0c, 0x0f, 0x22])
        #expect(db.characteristics.first?.cccdHandle == 0x0d)
        #expect(db.characteristics.first?.properties == .indicate)
        #expect(layout.characteristics.map(\.valueHandle) == [0x0c, 0x0f, 0x22])
        #expect(layout.descriptors.map(\.handle) == [0x0d])
        #expect(notes.contains { $0.contains("0x9") })  // char0009 lies before its service's first free handle
    }

    @Test func genericAccessFromDeviceName() {
        let objects: [String: [String: DBusValue]] = [
            Self.dev + "/service000a": Self.service("00001810-0000-1000-8000-00805f9b34fb"),
            Self.dev + "/service000a/char000b": Self.char("00002a35-0000-1000-8000-00805f9b34fb", ["indicate"]),
        ]
        let (db, _, _) = BlueZGATTBearer.mirror(objects, devicePath: Self.dev, deviceName: "cuff-sim")
        #expect(db.services.map(\.handle) == [0x01, 0x0a])
        #expect(db.services.first?.endHandle == 0x09)
        #expect(db.characteristic(.deviceName)?.valueHandle == 3)
        #expect(db.attribute(3)?.value == Array("cuff-sim".utf8))
        let tight: [String: [String: DBusValue]] = [
            Self.dev + "/service0001": Self.service("00001810-0000-1000-8000-00805f9b34fb")
        ]
        let (db2, _, notes) = BlueZGATTBearer.mirror(tight, devicePath: Self.dev, deviceName: "cuff-sim")
        #expect(db2.services.count == 1)
        #expect(notes.contains { $0.contains("no device name") })
    }

    @Test func attErrorsFromBluetoothdReplies() {
        #expect(
            BlueZGATTBearer.attError(
                TransportError(
                    .systemCall,
                    "D-Bus WriteValue failed: org.bluez.Error.Failed: Operation failed with ATT error: 0x81")
            ).rawValue == 0x81)
        #expect(
            BlueZGATTBearer.attError(
                TransportError(
                    .systemCall, "D-Bus ReadValue failed: org.bluez.Error.NotPermitted: Read not permitted",
                    remoteErrorName: "org.bluez.Error.NotPermitted")) == .writeNotPermitted)
        // Matched by the reply's error name, never by the text: a name only in the message counts for nothing.
        #expect(
            BlueZGATTBearer.attError(
                TransportError(.systemCall, "org.bluez.Error.NotPermitted", remoteErrorName: "org.bluez.Error.Failed"))
                == .unlikelyError)
        #expect(
            BlueZGATTBearer.attError(
                TransportError(.systemCall, "D-Bus ReadValue failed: org.bluez.Error.Failed: Not connected"))
                == .unlikelyError)
    }

    @Test func scanReportFromDeviceProperties() throws {
        let props = DBusValue.dictionary([
            ("Address", .string("00:AA:01:00:00:00")), ("AddressType", .string("public")),
            ("Name", .string("cuff-sim")),
            ("RSSI", .int16(-40)), ("UUIDs", .array(element: "s", [.string("00001810-0000-1000-8000-00805f9b34fb")])),
            ("AdvertisingFlags", .bytes([0x06])),
        ])
        let r = try #require(BlueZDiscovery.report(props))
        #expect(r.address.description == "00:AA:01:00:00:00")
        #expect(r.isBloodPressureCuff)
        #expect(r.localName == "cuff-sim")
        #expect(r.rssi == -40)
        #expect(r.flags == 0x06)
        // A paired device not heard in this discovery (no RSSI): not reported; an unpaired one
        // bluetoothd still keeps (seen within its temporary timeout) is, without RSSI.
        #expect(
            BlueZDiscovery.report(.dictionary([("Address", .string("00:AA:01:00:00:00")), ("Paired", .boolean(true))]))
                == nil)
        #expect(
            BlueZDiscovery.report(
                .dictionary([("Address", .string("00:AA:01:00:00:00")), ("Paired", .boolean(false))]))?.rssi == nil)
        #expect(
            BlueZDiscovery.report(
                .dictionary([("Address", .string("00:AA:01:00:00:00")), ("Paired", .boolean(false))])) != nil)
    }
}
