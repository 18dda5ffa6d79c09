// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import CuffCore
import CuffLogging
import CuffRuntime
import CuffSimulator
import GATT
import Glibc
import Testing
@testable import BlueZ
import Transport

/// `cuff simulate --backend bluetoothd` without a radio: a real dbus-daemon, the test playing
/// bluetoothd (it owns `org.bluez`, takes the registrations and calls cuff's GATT objects as
/// bluetoothd does for a central on the air), the simulated cuff on an event loop behind
/// ``BlueZGATTApplication``. One thread: the test turns the loop and reads its own socket in turn.
@Suite("cuff simulate through bluetoothd (a real dbus-daemon, a scripted bluetoothd)")
struct BluetoothdSimulateTests {
    static let adapter = BluetoothAdapter(index: 0)
    static let central = "/org/bluez/hci0/dev_00_11_22_33_44_55"

    /// The test's side: bluetoothd's connection, what it received, and cuff's loop turned meanwhile.
    final class Harness {
        let bus: PrivateBus
        var bluez: DBusConnection
        let loop: EventLoop
        var inbox: [DBusMessage] = []
        /// False between a "bluetoothd" that quit and the next one.
        var running = true
        init(bus: PrivateBus, loop: EventLoop) throws {
            self.bus = bus
            self.loop = loop
            bluez = try Self.own(bus)
        }

        static func own(_ bus: PrivateBus) throws -> DBusConnection {
            let c = try bus.connect()
            let owned = try c.call(
                .call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus",
                    member: "RequestName", body: [.string("org.bluez"), .uint32(4)]))
            #expect(owned.body == [.uint32(1)])
            // cuff's PropertiesChanged are broadcast: bluetoothd listens for them.
            try c.call(
                .call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus",
                    member: "AddMatch", body: [.string("type='signal',interface='org.freedesktop.DBus.Properties'")]))
            return c
        }

        /// Turns cuff's loop and reads bluetoothd's socket until `done` holds (at most 5 s).
        @discardableResult
        func spin(_ what: String, until done: () -> Bool) throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(5)
            while !done() {
                if ContinuousClock.now > deadline {
                    Issue.record("timed out waiting for \(what)")
                    return false
                }
                try loop.runOnce(timeout: .milliseconds(5))
                while running, let m = try bluez.receive(until: .now) { inbox.append(m) }
            }
            return true
        }

        /// The first message matching `p`, taken out of the inbox (waiting for it).
        func take(_ what: String, _ p: (DBusMessage) -> Bool) throws -> DBusMessage? {
            var found: DBusMessage?
            try spin(what) {
                if let i = inbox.firstIndex(where: p) { found = inbox.remove(at: i) }
                return found != nil
            }
            return found
        }

        /// A call from "bluetoothd" to cuff's object; the reply.
        func call(_ cuff: String, _ path: String, _ interface: String, _ member: String, _ body: [DBusValue] = [])
            throws -> DBusMessage?
        {
            let serial = try bluez.send(
                .call(destination: cuff, path: path, interface: interface, member: member, body: body))
            return try take("the reply to \(member) on \(path)") { $0.replySerial == serial }
        }

        func deviceConnected(_ connected: Bool) throws {
            try bluez.send(
                DBusMessage(
                    kind: .signal, path: central, interface: "org.freedesktop.DBus.Properties",
                    member: "PropertiesChanged",
                    body: [
                        .string("org.bluez.Device1"), .dictionary([("Connected", .boolean(connected))]),
                        .array(element: "s", []),
                    ]))
        }

        /// The next Value cuff sent as PropertiesChanged on `path`.
        func value(on path: String) throws -> [UInt8]? {
            try take("a value on \(path)") { $0.kind == .signal && $0.path == path && $0.member == "PropertiesChanged" }
                .flatMap { $0.body?[1]["Value"]?.bytesValue }
        }

        /// Answers cuff's RegisterApplication as bluetoothd does: GetManagedObjects on the app root
        /// first, then the reply; the advertisement's properties, then its reply.
        func acceptRegistration(root: String) throws -> (objects: DBusValue?, advertisement: DBusValue?) {
            guard let register = try take("RegisterApplication", { $0.member == "RegisterApplication" }),
                let advertise = try take("RegisterAdvertisement", { $0.member == "RegisterAdvertisement" }),
                let cuff = register.sender
            else { return (nil, nil) }
            #expect(register.path == "/org/bluez/hci0" && register.interface == "org.bluez.GattManager1")
            #expect(register.body?.first == .objectPath(root))
            let objects = try call(cuff, root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")?.body?.first
            try bluez.send(.methodReturn(to: register))
            guard case .objectPath(let adPath)? = advertise.body?.first else { return (objects, nil) }
            let ad = try call(
                cuff, adPath, "org.freedesktop.DBus.Properties", "GetAll", [.string("org.bluez.LEAdvertisement1")])?
                .body?.first
            try bluez.send(.methodReturn(to: advertise))
            return (objects, ad)
        }
    }

    /// The object path exported for a characteristic.
    static func path(of uuid: UInt16, in objects: DBusValue?) -> String? {
        let text = BlueZGATTLayout.text(BluetoothUUID(uuid))
        return objects?.entries?.first { entry in
            entry.1["org.bluez.GattCharacteristic1"]?["UUID"]?.stringValue == text
        }?.0
    }

    /// The bytes the pure simulator puts in its first indication of 2A35 and its 2A49 value, fed
    /// the ATT PDUs directly: what must come out of D-Bus unchanged.
    static func reference(_ sim: SimulatorConfiguration) -> (feature: [UInt8], first: [UInt8], second: [UInt8]) {
        var p = CuffPeripheral(configuration: sim)
        let now = Timestamp(nanoseconds: 1_000_000_000)
        p.poweredOn(now: now)
        _ = p.connected(now: now, client: "00:11:22:33:44:55")
        let feature = p.handles[.bloodPressureFeature]!, bpm = p.handles[.bloodPressureMeasurement]!
        let cccd = p.database.characteristic(valueHandle: bpm)!.cccdHandle!
        var out = p.receive([0x0A, UInt8(feature & 0xFF), UInt8(feature >> 8)], now: now)
        out += p.receive([0x12, UInt8(cccd & 0xFF), UInt8(cccd >> 8), 0x02, 0x00], now: now)
        var indications: [[UInt8]] = []
        var t = now
        for _ in 0..<600 where indications.count < 2 {
            var next: [PeripheralOutput] = []
            for case .send(let pdu) in out where pdu.first == 0x1D {
                indications.append(Array(pdu.dropFirst(3)))
                next += p.receive([0x1E], now: t)
            }
            t = Timestamp(nanoseconds: t.nanoseconds + 100_000_000)
            next += p.tick(now: t)
            out = next
        }
        var q = CuffPeripheral(configuration: sim)
        q.poweredOn(now: now)
        _ = q.connected(now: now, client: nil)
        let r = q.receive([0x0A, UInt8(feature & 0xFF), UInt8(feature >> 8)], now: now)
        var value: [UInt8] = []
        for case .send(let pdu) in r where pdu.first == 0x0B { value = Array(pdu.dropFirst()) }
        return (value, indications.first ?? [], indications.dropFirst().first ?? [])
    }

    @Test func servesReadsAndIndicationsAndResendsWhatWasNotConfirmedAndSurvivesARestart() throws {
        guard let bus = PrivateBus() else {
            print("skipped: dbus-daemon is not installed (tools/install-deps.sh --test installs it)")
            return
        }
        let loop = try EventLoop()
        let h = try Harness(bus: bus, loop: loop)
        let sim = SimulatorConfiguration(scenario: .storedRecords, persona: .bps10, seed: 7, autostart: false)
        let driver = PeripheralDriver(
            peripheral: CuffPeripheral(configuration: sim), clock: SimulationClock(speed: 50), signals: nil,
            log: .silent)
        driver.attach(to: loop)
        var clients: [String?] = []
        let layout = BlueZGATTLayout(database: driver.peripheral.database, name: "cuff-sim")
        let app = try BlueZGATTApplication(
            busPath: bus.socketPath, adapter: Self.adapter, layout: layout, loop: loop, log: .silent
        ) { bearer, client in
            clients.append(client)
            if driver.isConnected { driver.interrupt() }
            driver.accept(bearer, client: client) { _ in }
        }
        try app.start()

        // Registration: the exported tree and the advertisement, as bluetoothd reads them.
        let (objects, ad) = try h.acceptRegistration(root: "/cuff/app")
        try h.spin("the registration") { app.registrations == 1 }
        #expect(ad?["Type"]?.stringValue == "peripheral")
        #expect(ad?["ServiceUUIDs"]?.stringsValue == ["00001810-0000-1000-8000-00805f9b34fb"])
        #expect(ad?["LocalName"]?.stringValue == "cuff-sim")
        #expect(ad?["Discoverable"] == .boolean(true))
        #expect(ad?["ManufacturerData"] == nil)
        let cuffName = try #require(app.connectionName)
        // What the cuff advertises changes (an Omron cuff enters pairing mode): bluetoothd hears
        // only what changed, and reads the new value.
        let omronData: DBusValue = .array(
            element: "{qv}", [.dictEntry(.uint16(0x020E), .variant(.bytes([1, 9, 0, 0])))])
        app.changeAdvertisement(name: "cuff-sim", serviceUUIDs16: [0x1810], manufacturerData: [0x020E: [1, 9, 0, 0]])
        let changed = try h.take("the advertisement's PropertiesChanged") {
            $0.kind == .signal && $0.path == "/cuff/advertisement0" && $0.member == "PropertiesChanged"
        }
        #expect(changed?.body?.first == .string("org.bluez.LEAdvertisement1"))
        #expect(changed?.body?[1].entries?.map(\.0) == ["ManufacturerData"])
        #expect(changed?.body?[1]["ManufacturerData"] == omronData)
        let reread = try h.call(
            cuffName, "/cuff/advertisement0", "org.freedesktop.DBus.Properties", "GetAll",
            [.string("org.bluez.LEAdvertisement1")])?
            .body?.first
        #expect(reread?["ManufacturerData"] == omronData)
        #expect(reread?["LocalName"]?.stringValue == "cuff-sim")
        // The same again: nothing is sent.
        app.changeAdvertisement(name: "cuff-sim", serviceUUIDs16: [0x1810], manufacturerData: [0x020E: [1, 9, 0, 0]])
        let services = objects?.entries?.compactMap { $0.1["org.bluez.GattService1"]?["UUID"]?.stringValue }
        #expect(services?.contains("00001800-0000-1000-8000-00805f9b34fb") == false)  // bluetoothd's own
        #expect(services?.contains("00001810-0000-1000-8000-00805f9b34fb") == true)
        guard let bpm = Self.path(of: 0x2A35, in: objects), let feature = Self.path(of: 0x2A49, in: objects) else {
            Issue.record("no 2A35/2A49 in \(String(describing: objects))")
            return
        }
        #expect(
            objects?.entries?.first { $0.0 == bpm }?.1["org.bluez.GattCharacteristic1"]?["Flags"]?.stringsValue == [
                "indicate"
            ])
        #expect(
            objects?.entries?.first { $0.0 == feature }?.1["org.bluez.GattCharacteristic1"]?["Flags"]?.stringsValue == [
                "read"
            ])
        let cuff = try #require(app.connectionName)
        let expected = Self.reference(sim)
        #expect(!expected.first.isEmpty && expected.first != expected.second)

        // A central connects, reads the feature, subscribes: the first stored reading, not confirmed.
        try h.deviceConnected(true)
        let options: DBusValue = .dictionary([("device", .objectPath(Self.central)), ("offset", .uint16(0))])
        let read = try h.call(cuff, feature, "org.bluez.GattCharacteristic1", "ReadValue", [options])
        #expect(read?.kind == .methodReturn)
        #expect(read?.body?.first?.bytesValue == expected.feature)
        #expect(try h.call(cuff, bpm, "org.bluez.GattCharacteristic1", "StartNotify")?.kind == .methodReturn)
        #expect(try h.value(on: bpm) == expected.first)
        try h.deviceConnected(false)
        try h.spin("the session's end") { !driver.isConnected }

        // The next connection: the same reading again; confirmed, the next one follows.
        try h.deviceConnected(true)
        #expect(try h.call(cuff, bpm, "org.bluez.GattCharacteristic1", "StartNotify")?.kind == .methodReturn)
        #expect(try h.value(on: bpm) == expected.first)
        #expect(driver.peripheral.machine.confirmedReadings == 0)
        #expect(try h.call(cuff, bpm, "org.bluez.GattCharacteristic1", "Confirm")?.kind == .methodReturn)
        #expect(try h.value(on: bpm) == expected.second)
        #expect(driver.peripheral.machine.confirmedReadings == 1)
        #expect(clients == ["00:11:22:33:44:55", "00:11:22:33:44:55"])

        // bluetoothd restarts: cuff waits, then registers with the new one.
        h.bluez.close()
        h.running = false
        try h.spin("the client's end") { !driver.isConnected }
        h.bluez = try Harness.own(bus)
        h.running = true
        let again = try h.acceptRegistration(root: "/cuff/app")
        try h.spin("the second registration") { app.registrations == 2 }
        #expect(again.objects == objects)
        #expect(app.failure == nil)

        // The advertisement that did not change was not announced again.
        #expect(!h.inbox.contains { $0.path == "/cuff/advertisement0" && $0.member == "PropertiesChanged" })

        // Ctrl-C: both unregistered.
        app.stop()
        #expect(try h.take("UnregisterAdvertisement") { $0.member == "UnregisterAdvertisement" } != nil)
        #expect(try h.take("UnregisterApplication") { $0.member == "UnregisterApplication" } != nil)
    }

    @Test func flagsSayWhichValuesNeedEncryption() {
        let sim = SimulatorConfiguration(scenario: .normal, persona: .bps11, seed: 1, autostart: false)
        let layout = BlueZGATTLayout(
            database: CuffPeripheral(configuration: sim, requireEncryption: true).database, name: "x")
        func flags(_ uuid: BluetoothUUID) -> [String]? {
            layout.objects.first {
                $0.kind == .characteristic
                    && $0.properties.first { $0.0 == "UUID" }?.1 == .string(BlueZGATTLayout.text(uuid))
            }?
            .properties.first { $0.0 == "Flags" }?.1.stringsValue
        }
        #expect(flags(BluetoothUUID(0x2A52)) == ["encrypt-write", "indicate"])  // RACP
        #expect(flags(BluetoothUUID(0x2A49)) == ["read"])
        #expect(
            BlueZGATTLayout.flags([.read, .write], [.readAuthenticated, .writeEncrypted]) == [
                "encrypt-authenticated-read", "encrypt-write",
            ])
        #expect(BlueZGATTLayout.text(BluetoothUUID(0x2A35)) == "00002a35-0000-1000-8000-00805f9b34fb")
        #expect(BlueZGATTApplication.address(devicePath: Self.central) == "00:11:22:33:44:55")
        #expect(BlueZGATTApplication.address(devicePath: "/org/bluez/hci0") == nil)
        // ATT errors as the D-Bus errors bluetoothd turns back into them.
        #expect(BlueZGATTApplication.dbusError(.readNotPermitted).0 == "org.bluez.Error.NotPermitted")
        #expect(BlueZGATTApplication.dbusError(.invalidAttributeValueLength).0 == "org.bluez.Error.InvalidValueLength")
        #expect(
            BlueZGATTApplication.dbusError(.cccdImproperlyConfigured) == (
                "org.bluez.Error.Failed", "0xfd \(ATTErrorCode.cccdImproperlyConfigured)"
            ))
    }
}
