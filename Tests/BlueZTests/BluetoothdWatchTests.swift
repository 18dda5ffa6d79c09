// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import CuffCore
import CuffLogging
import CuffRuntime
import CuffSession
import CuffTestSupport
import Glibc
import Logging
import Synchronization
import Testing
@testable import BlueZ
import Transport

/// `cuff watch` through bluetoothd, without a radio: a real dbus-daemon, the test playing
/// bluetoothd (it owns `org.bluez` and answers as bluetoothd does for a paired cuff with a Blood
/// Pressure Service), and the watcher on an event loop with ``BlueZPendingConnection`` and
/// ``BlueZGATTBearer``.
@Suite("cuff watch through bluetoothd (a real dbus-daemon, a scripted bluetoothd)")
struct BluetoothdWatchTests {
    static let adapter = BluetoothAdapter(index: 1)
    static let cuff = BluetoothAddress("00:AA:01:00:00:07")!
    static let device = "/org/bluez/hci1/dev_00_AA_01_00_00_07"
    static let bps = "00001810-0000-1000-8000-00805f9b34fb"
    /// A measurement with a time stamp (flags 0x02): 120/80 mmHg, MAP 93, 2026-11-25 10:00:00.
    static let measurement: [UInt8] = [
        0x02, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00, 0xEA, 0x07, 0x0B, 0x19, 0x0A, 0x00, 0x00,
    ]

    /// What the scripted bluetoothd saw.
    struct Seen: Sendable {
        var connects = 0
        var startNotify = 0
        var readValue = 0
        var disconnects = 0
        var failedConnectAnsweredAt: ContinuousClock.Instant?
        var secondConnectAt: ContinuousClock.Instant?
        var paired = true
        var pairCalls = 0
        var agentAnswered = false
        var pairing: ClosedRange<ContinuousClock.Instant>?
    }

    final class Shared: Sendable {
        let stop = Atomic<Bool>(false)
        let seen = Mutex(Seen())
        init(paired: Bool = true) { seen.withLock { $0.paired = paired } }
    }

    /// bluetoothd for one paired cuff, on `bus`, until `stop` is set: the first Connect fails
    /// as a connect timeout does; later ones connect, resolve the services, deliver the
    /// measurement after StartNotify and then drop the link (the cuff switches off).
    static func bluetoothd(_ bus: DBusConnection, _ shared: Shared) {
        var connected = false
        func props(_ interface: String, _ changed: [(String, DBusValue)], path: String) -> DBusMessage {
            DBusMessage(
                kind: .signal, path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                body: [.string(interface), .dictionary(changed), .array(element: "s", [])])
        }
        func objects() -> DBusValue {
            func object(_ path: String, _ interface: String, _ p: [(String, DBusValue)]) -> DBusValue {
                .dictEntry(
                    .objectPath(path), .array(element: "{sa{sv}}", [.dictEntry(.string(interface), .dictionary(p))]))
            }
            let svc = device + "/service000a"
            return .array(
                element: "{oa{sa{sv}}}",
                [
                    object("/org/bluez/hci1", "org.bluez.Adapter1", [("Powered", .boolean(true))]),
                    object(
                        device, "org.bluez.Device1",
                        [
                            ("Address", .string(cuff.description)), ("AddressType", .string("public")),
                            ("Name", .string("Scripted Cuff")),
                            ("Paired", .boolean(shared.seen.withLock { $0.paired })),
                            ("Connected", .boolean(connected)), ("ServicesResolved", .boolean(connected)),
                            ("UUIDs", .array(element: "s", [.string(bps)])),
                        ]),
                    object(svc, "org.bluez.GattService1", [("UUID", .string(bps)), ("Primary", .boolean(true))]),
                    object(
                        svc + "/char000b", "org.bluez.GattCharacteristic1",
                        [
                            ("UUID", .string("00002a35-0000-1000-8000-00805f9b34fb")),
                            ("Flags", .array(element: "s", [.string("indicate")])),
                        ]),
                    object(
                        svc + "/char000b/desc000d", "org.bluez.GattDescriptor1",
                        [("UUID", .string("00002902-0000-1000-8000-00805f9b34fb"))]),
                    object(
                        svc + "/char000e", "org.bluez.GattCharacteristic1",
                        [
                            ("UUID", .string("00002a49-0000-1000-8000-00805f9b34fb")),
                            ("Flags", .array(element: "s", [.string("read")])),
                        ]),
                ])
        }
        while !shared.stop.load(ordering: .relaxed) {
            guard let m = try? bus.receive(until: .now + .milliseconds(50)), m.kind == .methodCall else { continue }
            var reply: DBusMessage = .methodReturn(to: m)
            var after: [DBusMessage] = []
            switch (m.interface ?? "", m.member ?? "") {
            case ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects"):
                reply = .methodReturn(to: m, body: [objects()])
            case ("org.freedesktop.DBus.Properties", "Get"):
                let paired = shared.seen.withLock { $0.paired }
                reply = .methodReturn(
                    to: m, body: [.variant(.boolean(m.body?.last == .string("Paired") ? paired : connected))])
            case ("org.bluez.AgentManager1", "RegisterAgent"), ("org.bluez.AgentManager1", "UnregisterAgent"):
                break
            case ("org.bluez.Device1", "Pair"):
                // As bluetoothd does for Just Works with a NoInputNoOutput agent: ask it, then pair.
                let started = ContinuousClock.now
                shared.seen.withLock { $0.pairCalls += 1 }
                let asked = try? bus.call(
                    .call(
                        destination: m.sender ?? "", path: "/cuff/pairing_agent", interface: "org.bluez.Agent1",
                        member: "RequestAuthorization", body: [.objectPath(device)]), timeout: .seconds(5))
                usleep(200_000)  // SMP over the air
                shared.seen.withLock {
                    $0.agentAnswered = asked?.kind == .methodReturn
                    $0.paired = asked?.kind == .methodReturn
                    $0.pairing = started...ContinuousClock.now
                }
                if asked?.kind == .methodReturn {
                    after = [props("org.bluez.Device1", [("Paired", .boolean(true))], path: device)]
                } else {
                    reply = .errorReply(
                        to: m, name: "org.bluez.Error.AuthenticationRejected", text: "the agent did not accept")
                }
            case ("org.bluez.Device1", "Connect"):
                let n = shared.seen.withLock { s in
                    s.connects += 1
                    if s.connects == 2 { s.secondConnectAt = ContinuousClock.now }
                    return s.connects
                }
                if n == 1 {
                    usleep(100_000)
                    reply = .errorReply(to: m, name: "org.bluez.Error.Failed", text: "le-connection-abort-by-local")
                    shared.seen.withLock { $0.failedConnectAnsweredAt = ContinuousClock.now }
                } else {
                    connected = true
                    after = [
                        props(
                            "org.bluez.Device1", [("Connected", .boolean(true)), ("ServicesResolved", .boolean(true))],
                            path: device)
                    ]
                }
            case ("org.bluez.Device1", "Disconnect"):
                shared.seen.withLock { $0.disconnects += 1 }
            case ("org.bluez.GattCharacteristic1", "ReadValue"):
                shared.seen.withLock { $0.readValue += 1 }
                reply = .methodReturn(to: m, body: [.bytes([0x00, 0x00])])  // Blood Pressure Feature: none
            case ("org.bluez.GattCharacteristic1", "StartNotify") where !shared.seen.withLock({ $0.paired }):
                reply = .errorReply(
                    to: m, name: "org.bluez.Error.Failed", text: "Operation failed with ATT error: 0x05")
            case ("org.bluez.GattCharacteristic1", "StartNotify"):
                shared.seen.withLock { $0.startNotify += 1 }
                // The indication, then the cuff switches off.
                after = [
                    props(
                        "org.bluez.GattCharacteristic1", [("Value", .bytes(measurement))],
                        path: device + "/service000a/char000b"),
                    props(
                        "org.bluez.Device1", [("Connected", .boolean(false)), ("ServicesResolved", .boolean(false))],
                        path: device),
                ]
            case ("org.bluez.GattCharacteristic1", "StopNotify"), ("org.bluez.GattCharacteristic1", "WriteValue"):
                break
            default:
                reply = .errorReply(to: m, name: "org.freedesktop.DBus.Error.UnknownMethod", text: "\(m.member ?? "?")")
            }
            _ = try? bus.send(reply)
            for (i, s) in after.enumerated() {
                if i > 0 { usleep(50_000) }
                if s.interface == "org.freedesktop.DBus.Properties", s.body?[1]["Connected"]?.boolValue == false {
                    connected = false
                }
                _ = try? bus.send(s)
            }
        }
    }

    /// A private dbus-daemon with the scripted bluetoothd on it (its own thread until `stop`);
    /// nil when dbus-daemon is not installed.
    final class ScriptedBluetoothd {
        let bus: PrivateBus
        let shared: Shared
        private let script: Background<Bool>
        init?(paired: Bool = true) throws {
            guard let bus = PrivateBus() else {
                print("skipped: dbus-daemon is not installed (tools/install-deps.sh --test installs it)")
                return nil
            }
            let bluez = try bus.connect()
            let owned = try bluez.call(
                .call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus",
                    member: "RequestName", body: [.string("org.bluez"), .uint32(4)]))
            #expect(owned.body == [.uint32(1)])  // DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER
            let shared = Shared(paired: paired)
            nonisolated(unsafe) let server = bluez
            self.bus = bus
            self.shared = shared
            script = Background { () -> Bool in
                BluetoothdWatchTests.bluetoothd(server, shared)
                return true
            }
        }
        var seen: Seen { shared.seen.withLock { $0 } }
        deinit {
            shared.stop.store(true, ordering: .relaxed)
            _ = script.join()
        }
    }

    /// A watcher on `loop` following the scripted cuff through bluetoothd.
    static func watcher(
        loop: EventLoop, collector: Collector, bus: PrivateBus, security: SecurityLevel = .low,
        log: Logger
    ) -> Watcher {
        var config = Watcher.Configuration()
        config.backoffMin = .seconds(3)  // far from the 0.2 s reconnect, so a test tells them apart
        config.session = { address in
            var c = CuffSessionConfiguration(address: address)
            c.follow = true
            c.timeout = nil
            c.setTime = false
            c.followCuffPressure = false
            c.security = security
            return c
        }
        let watcher = Watcher(configuration: config, loop: loop, collector: collector, log: log)
        let path = bus.socketPath
        watcher.follow(address: cuff.description) { () throws(TransportError) -> any PendingConnection in
            try BlueZPendingConnection.start(adapter: adapter, to: cuff, busPath: path)
        }
        return watcher
    }

    @Test func followsAPairedCuffAcrossSessionsAndRetriesAFailedConnectAtOnce() throws {
        guard let fake = try ScriptedBluetoothd() else { return }
        let bus = fake.bus

        // Without --device: the paired cuffs with a Blood Pressure Service.
        let client = try BlueZBus(busPath: bus.socketPath)
        #expect(BlueZDiscovery.bondedCuffs(in: try client.managedObjects(), adapter: Self.adapter) == [Self.cuff])
        client.close()

        let loop = try EventLoop()
        var outputs: [SessionOutput] = []
        let collector = Collector(commit: { _ in }, write: { outputs.append($0) })
        loop.afterEachTurn { collector.flush() }
        let recorder = LogRecorder()
        let watcher = Self.watcher(loop: loop, collector: collector, bus: bus, log: recorder.logger())
        watcher.start()
        let deadline = ContinuousClock.now + .seconds(20)
        try loop.run { collector.duplicates >= 1 || ContinuousClock.now > deadline }
        watcher.stop()
        try loop.run { watcher.isDone || ContinuousClock.now > deadline + .seconds(6) }
        collector.flush()

        let s = fake.seen
        #expect(s.connects >= 3, "Connect calls: \(s.connects); log: \(recorder.lines)")
        #expect(s.startNotify >= 2)
        #expect(watcher.isDone)
        // The failed Connect (a connect timeout) is tried again at once, not after a backoff.
        if let failed = s.failedConnectAnsweredAt, let again = s.secondConnectAt {
            #expect(again - failed < .seconds(2), "retried after \(again - failed)")
        } else {
            Issue.record("no second Connect: \(recorder.lines)")
        }
        // The same reading in every session: kept and printed once.
        let measurements = outputs.compactMap { o -> MeasurementRecord? in
            if case let .measurement(m) = o { return m }
            return nil
        }
        #expect(measurements.count == 1, "\(outputs.count) outputs; log: \(recorder.lines)")
        if let m = measurements.first {
            #expect(m.systolic.doubleValue == 120 && m.diastolic.doubleValue == 80)
            #expect(m.device.address == Self.cuff.description)
        }
        #expect(collector.duplicates >= 1)
        #expect(recorder.lines.contains { $0.contains("session 1 ended") })
    }
}

extension BluetoothdWatchTests {
    /// A cuff bluetoothd has not paired: the session asks for security, the bearer pairs through
    /// bluetoothd (cuff's agent answers on the same connection) while the loop goes on.
    @Test func pairsThroughBluetoothdWithoutBlockingTheLoop() throws {
        guard let fake = try ScriptedBluetoothd(paired: false) else { return }
        let loop = try EventLoop()
        var measurements = 0
        let collector = Collector(commit: { _ in }, write: { if case .measurement = $0 { measurements += 1 } })
        loop.afterEachTurn { collector.flush() }
        let recorder = LogRecorder()
        let watcher = Self.watcher(
            loop: loop, collector: collector, bus: fake.bus, security: .medium, log: recorder.logger())
        var ticks: [ContinuousClock.Instant] = []
        func tick() {
            ticks.append(.now)
            if !watcher.stopping { loop.schedule(at: MonotonicClock.now() + .milliseconds(10)) { tick() } }
        }
        tick()
        watcher.start()
        let deadline = ContinuousClock.now + .seconds(20)
        try loop.run { measurements >= 1 || ContinuousClock.now > deadline }
        watcher.stop()
        try loop.run { watcher.isDone || ContinuousClock.now > deadline + .seconds(6) }
        let s = fake.seen
        #expect(measurements == 1, "log: \(recorder.lines)")
        #expect(s.pairCalls == 1)
        #expect(s.agentAnswered)
        if let pairing = s.pairing {
            let during = ticks.filter { pairing.contains($0) }.count
            #expect(during >= 5, "\(during) timer turns while bluetoothd paired")
        } else {
            Issue.record("never paired: \(recorder.lines)")
        }
    }
}

/// The connect conversation's decisions, message by message (pure).
@Suite("BlueZConnectSteps")
struct BlueZConnectStepsTests {
    let path = "/org/bluez/hci0/dev_00_AA_01_00_00_07"

    func reply(_ serial: UInt32, error: String? = nil, text: String = "", body: [DBusValue] = []) -> DBusMessage {
        error.map { DBusMessage(kind: .error, errorName: $0, replySerial: serial, body: [.string(text)]) }
            ?? DBusMessage(kind: .methodReturn, replySerial: serial, body: body)
    }

    func changed(_ p: [(String, DBusValue)], path: String? = nil) -> DBusMessage {
        DBusMessage(
            kind: .signal, path: path ?? self.path, interface: "org.freedesktop.DBus.Properties",
            member: "PropertiesChanged",
            body: [.string("org.bluez.Device1"), .dictionary(p), .array(element: "s", [])])
    }

    @Test func unknownDeviceIsDiscoveredThenConnectedThenResolved() {
        var s = BlueZConnectSteps(devicePath: path, known: false, connected: false)
        #expect(s.first() == .discover)
        let other = DBusMessage(
            kind: .signal, path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
            body: [
                .objectPath(path + "X"),
                .array(element: "{sa{sv}}", [.dictEntry(.string("org.bluez.Device1"), .dictionary([]))]),
            ])
        #expect(s.receive(other) == .wait)
        let added = DBusMessage(
            kind: .signal, path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
            body: [
                .objectPath(path),
                .array(element: "{sa{sv}}", [.dictEntry(.string("org.bluez.Device1"), .dictionary([]))]),
            ])
        #expect(s.receive(added) == .connect)
        s.connectSent(serial: 7)
        #expect(s.weConnected)
        #expect(s.receive(reply(6)) == .wait)  // someone else's reply
        #expect(s.receive(reply(7)) == .checkResolved)
        s.checkSent(serial: 8)
        #expect(s.receive(reply(8, body: [.variant(.boolean(false))])) == .wait)
        #expect(s.receive(changed([("ServicesResolved", .boolean(true))], path: path + "/other")) == .wait)
        #expect(s.receive(changed([("ServicesResolved", .boolean(true))])) == .done)
    }

    @Test func aConnectedDeviceIsOnlyChecked() {
        var s = BlueZConnectSteps(devicePath: path, known: true, connected: true)
        #expect(s.first() == .checkResolved)
        s.checkSent(serial: 3)
        #expect(!s.weConnected)
        #expect(s.receive(reply(3, body: [.variant(.boolean(true))])) == .done)
    }

    @Test func connectErrorsSayWhetherTheCuffWasThere() {
        var s = BlueZConnectSteps(devicePath: path, known: true, connected: false)
        #expect(s.first() == .connect)
        s.connectSent(serial: 2)
        guard
            case .fail(_, let notThere) = s.receive(
                reply(2, error: "org.bluez.Error.Failed", text: "le-connection-abort-by-local"))
        else {
            Issue.record("no failure"); return
        }
        #expect(notThere)
        var quick = BlueZConnectSteps(devicePath: path, known: true, connected: false)
        quick.connectSent(serial: 2)
        guard
            case .fail(let why, let there) = quick.receive(
                reply(2, error: "org.bluez.Error.NotReady", text: "Resource Not Ready"))
        else {
            Issue.record("no failure"); return
        }
        #expect(!there && why.contains("NotReady"))
        var slow = BlueZConnectSteps(devicePath: path, known: true, connected: false)
        slow.connectSent(serial: 2)
        #expect(
            slow.receive(
                reply(2, error: "org.bluez.Error.Failed", text: "Input/output error"), connectElapsed: .seconds(20))
                == .fail(
                    "bluetoothd could not connect: org.bluez.Error.Failed: Input/output error", notThere: true))
        var already = BlueZConnectSteps(devicePath: path, known: true, connected: false)
        already.connectSent(serial: 2)
        #expect(already.receive(reply(2, error: "org.bluez.Error.AlreadyConnected")) == .checkResolved)
    }

    /// A blocking driver discovers itself and says what it found.
    @Test func foundByDiscoveryThenConnectedOrChecked() {
        var s = BlueZConnectSteps(devicePath: path, known: false, connected: false)
        #expect(s.first() == .discover)
        #expect(s.found(connected: false) == .connect)
        #expect(s.state == .connecting(serial: 0))
        #expect(s.found(connected: false) == .wait)  // only while discovering
        s.connectSent(serial: 4)
        #expect(s.receive(reply(4)) == .checkResolved)
        var connected = BlueZConnectSteps(devicePath: path, known: false, connected: false)
        #expect(connected.found(connected: true) == .checkResolved)
        #expect(!connected.weConnected)
        connected.checkSent(serial: 2)
        #expect(connected.receive(reply(2, body: [.variant(.boolean(true))])) == .done)
    }

    /// The error reply that ended Connect is kept, for the driver's own wording.
    @Test func aRefusedConnectKeepsBluetoothdsError() {
        var s = BlueZConnectSteps(devicePath: path, known: true, connected: false)
        s.connectSent(serial: 9)
        #expect(s.connectError == nil)
        let refusal = reply(9, error: "org.bluez.Error.Failed", text: "Software caused connection abort")
        #expect(
            s.receive(refusal)
                == .fail(
                    "bluetoothd could not connect: org.bluez.Error.Failed: Software caused connection abort",
                    notThere: false))
        #expect(s.connectError == refusal)
        #expect(s.state == .failed)
        var already = BlueZConnectSteps(devicePath: path, known: true, connected: false)
        already.connectSent(serial: 9)
        _ = already.receive(reply(9, error: "org.bluez.Error.AlreadyConnected"))
        #expect(already.connectError == nil)
    }

    @Test func droppedBeforeResolvingFails() {
        var s = BlueZConnectSteps(devicePath: path, known: true, connected: true)
        s.checkSent(serial: 1)
        #expect(s.receive(reply(1, body: [.variant(.boolean(false))])) == .wait)
        guard case .fail(_, let notThere) = s.receive(changed([("Connected", .boolean(false))])) else {
            Issue.record("no failure"); return
        }
        #expect(!notThere)
    }

    @Test func bondedCuffsAreThePairedDevicesWithABloodPressureService() {
        func device(_ a: String, paired: Bool, uuids: [String], type: String = "public") -> [String: DBusValue] {
            [
                "org.bluez.Device1": .dictionary([
                    ("Address", .string(a)), ("AddressType", .string(type)), ("Paired", .boolean(paired)),
                    ("UUIDs", .array(element: "s", uuids.map(DBusValue.string))),
                ])
            ]
        }
        let bps = "00001810-0000-1000-8000-00805F9B34FB", hid = "00001812-0000-1000-8000-00805f9b34fb"
        let objects: [String: [String: DBusValue]] = [
            "/org/bluez/hci0/dev_00_AA_01_00_00_02": device("00:AA:01:00:00:02", paired: true, uuids: [hid, bps]),
            "/org/bluez/hci0/dev_00_AA_01_00_00_01": device("00:AA:01:00:00:01", paired: true, uuids: [bps]),
            "/org/bluez/hci0/dev_C0_00_00_00_00_03": device(
                "C0:00:00:00:00:03", paired: true, uuids: [bps], type: "random"),
            "/org/bluez/hci0/dev_00_AA_01_00_00_04": device("00:AA:01:00:00:04", paired: false, uuids: [bps]),
            "/org/bluez/hci0/dev_00_AA_01_00_00_05": device("00:AA:01:00:00:05", paired: true, uuids: [hid]),
            "/org/bluez/hci1/dev_00_AA_01_00_00_06": device("00:AA:01:00:00:06", paired: true, uuids: [bps]),
        ]
        let found = BlueZDiscovery.bondedCuffs(in: objects, adapter: BluetoothAdapter(index: 0))
        #expect(found.map(\.description) == ["00:AA:01:00:00:01", "00:AA:01:00:00:02", "C0:00:00:00:00:03"])
        #expect(found.last?.type == .random)
    }
}
