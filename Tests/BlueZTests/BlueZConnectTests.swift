// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffLogging
import Glibc
import Synchronization
import Testing
@testable import BlueZ
import Transport

/// `BlueZGATTBearer.connect` (the blocking connect of `cuff measure --backend bluetoothd`) taking
/// ``BlueZConnectSteps``' steps against a bluetoothd played by the test on a real dbus-daemon: the
/// calls bluetoothd sees, in order, the log lines and the errors.
@Suite("BlueZGATTBearer.connect on a scripted bluetoothd")
struct BlueZConnectTests {
    static let cuff = BluetoothAddress("00:AA:01:00:00:07")!
    static let adapter = BluetoothAdapter(index: 1)
    static let device = HostileBluetoothdTests.device

    /// How the scripted bluetoothd answers `Device1.Connect`.
    enum ConnectAnswer: Sendable {
        /// The link comes up: a reply, then `Connected` and `ServicesResolved` turn true.
        case up
        /// An error reply.
        case refused(String, String)
        /// A reply, then the link drops before the services are resolved.
        case dropped
        /// No reply at all.
        case never
    }

    static func script(connected: Bool, answer: ConnectAnswer) -> ScriptedBluez.Answer {
        let state = Mutex(connected)
        return { m in
            let now = state.withLock { $0 }
            let tree = DBusValue.array(
                element: "{oa{sa{sv}}}",
                [
                    ScriptedBluez.object(
                        HostileBluetoothdTests.adapter, "org.bluez.Adapter1", [("Powered", .boolean(true))]),
                    ScriptedBluez.object(
                        device, "org.bluez.Device1",
                        [
                            ("Address", .string(cuff.description)), ("AddressType", .string("public")),
                            ("Name", .string("Scripted Cuff")), ("Connected", .boolean(now)),
                            ("ServicesResolved", .boolean(now)),
                        ]),
                    ScriptedBluez.object(
                        device + "/service000a", "org.bluez.GattService1",
                        [("UUID", .string(ScriptedBluez.bps)), ("Primary", .boolean(true))]),
                ])
            func changed(_ p: [(String, DBusValue)]) -> DBusMessage {
                ScriptedBluez.changed("org.bluez.Device1", p, path: device)
            }
            switch (m.interface ?? "", m.member ?? "") {
            case ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects"):
                return (.methodReturn(to: m, body: [tree]), [])
            case ("org.freedesktop.DBus.Properties", "Get"):
                return (.methodReturn(to: m, body: [.variant(.boolean(false))]), [])
            case ("org.bluez.Device1", "Connect"):
                switch answer {
                case .up:
                    state.withLock { $0 = true }
                    return (
                        .methodReturn(to: m),
                        [changed([("Connected", .boolean(true))]), changed([("ServicesResolved", .boolean(true))])]
                    )
                case .refused(let name, let text):
                    return (.errorReply(to: m, name: name, text: text), [])
                case .dropped:
                    return (.methodReturn(to: m), [changed([("Connected", .boolean(false))])])
                case .never:
                    return (nil, [])
                }
            default:
                return (.methodReturn(to: m), [])
            }
        }
    }

    struct Run {
        var result: Result<BlueZGATTBearer, TransportError>
        var lines: [String]
        var calls: [String]
    }

    /// Connects through `bluez`; the calls it took, once it has seen `until` (or after a moment).
    static func run(_ bluez: ScriptedBluez, timeout: Duration, until last: String) throws -> Run {
        let bus = try BlueZBus(busPath: bluez.bus.socketPath)
        let recorder = LogRecorder()
        let result = Result { () throws(TransportError) in
            try BlueZGATTBearer.connect(
                adapter: adapter, to: cuff, bus: bus, timeout: timeout, log: recorder.logger())
        }
        if case .success(let b) = result { b.close() }
        let deadline = ContinuousClock.now + .seconds(5)
        while bluez.calls.last != last && ContinuousClock.now < deadline { usleep(10_000) }
        return Run(result: result, lines: recorder.lines, calls: bluez.calls)
    }

    @Test func connectsThenFollowsServicesResolved() throws {
        guard let bluez = try ScriptedBluez(Self.script(connected: false, answer: .up)) else { return }
        let r = try Self.run(bluez, timeout: .seconds(10), until: "org.bluez.Device1.Disconnect")
        let bearer = try r.result.get()
        #expect(bearer.devicePath == Self.device)
        #expect(r.lines == ["connecting through bluetoothd (org.bluez.Device1.Connect)"])
        #expect(
            r.calls == [
                "org.freedesktop.DBus.ObjectManager.GetManagedObjects", "org.bluez.Device1.Connect",
                "org.freedesktop.DBus.Properties.Get", "org.freedesktop.DBus.ObjectManager.GetManagedObjects",
                // close(): we connected, so we disconnect
                "org.bluez.Device1.Disconnect",
            ])
    }

    @Test func aConnectedCuffIsOnlyChecked() throws {
        guard let bluez = try ScriptedBluez(Self.script(connected: true, answer: .never)) else { return }
        // Get says false: the test's bluetoothd never resolves, so the wait ends at the timeout.
        let r = try Self.run(bluez, timeout: .seconds(1), until: "org.freedesktop.DBus.Properties.Get")
        #expect(r.lines == ["\(Self.cuff) is connected already (bluetoothd); using that link"])
        #expect(
            r.calls == ["org.freedesktop.DBus.ObjectManager.GetManagedObjects", "org.freedesktop.DBus.Properties.Get"])
        guard case .failure(let e) = r.result else { Issue.record("connected"); return }
        #expect(e.code == .timedOut)
        #expect(
            e.message
                == "bluetoothd connected to \(Self.cuff) but did not resolve its services within 1.0 seconds (--timeout)"
        )
    }

    @Test func aRefusedConnectSaysBluetoothdsError() throws {
        let answer = ConnectAnswer.refused("org.bluez.Error.Failed", "le-connection-abort-by-local")
        guard let bluez = try ScriptedBluez(Self.script(connected: false, answer: answer)) else { return }
        let r = try Self.run(bluez, timeout: .seconds(10), until: "org.bluez.Device1.Connect")
        guard case .failure(let e) = r.result else { Issue.record("connected"); return }
        #expect(e.code == .notConnected)
        #expect(
            e.message
                == "bluetoothd could not connect to \(Self.cuff) on hci1: D-Bus Connect failed: org.bluez.Error.Failed: le-connection-abort-by-local"
        )
        #expect(r.calls == ["org.freedesktop.DBus.ObjectManager.GetManagedObjects", "org.bluez.Device1.Connect"])
    }

    @Test func noConnectWithinTheTimeoutIsCancelled() throws {
        guard let bluez = try ScriptedBluez(Self.script(connected: false, answer: .never)) else { return }
        let start = ContinuousClock.now
        let r = try Self.run(bluez, timeout: .seconds(1), until: "org.bluez.Device1.Disconnect")
        #expect(ContinuousClock.now - start < .seconds(8))
        guard case .failure(let e) = r.result else { Issue.record("connected"); return }
        #expect(e.code == .timedOut)
        #expect(e.errno == ETIMEDOUT)
        #expect(e.message == "bluetoothd did not connect to \(Self.cuff) on hci1 within 1.0 seconds (--timeout)")
        #expect(
            r.calls == [
                "org.freedesktop.DBus.ObjectManager.GetManagedObjects", "org.bluez.Device1.Connect",
                "org.bluez.Device1.Disconnect",
            ])
    }

    @Test func aLinkThatDropsBeforeResolvingFailsAtOnce() throws {
        guard let bluez = try ScriptedBluez(Self.script(connected: false, answer: .dropped)) else { return }
        let start = ContinuousClock.now
        let r = try Self.run(bluez, timeout: .seconds(20), until: "org.freedesktop.DBus.Properties.Get")
        #expect(ContinuousClock.now - start < .seconds(10), "not the 20 s timeout")
        guard case .failure(let e) = r.result else { Issue.record("connected"); return }
        #expect(e.code == .notConnected)
        #expect(e.message == "\(Self.cuff) on hci1: \(Self.device): disconnected before its services were resolved")
    }
}
