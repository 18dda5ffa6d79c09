// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffTestSupport
import Glibc
import Testing
@testable import BlueZ
import Transport

/// A private `dbus-daemon` (Debian's, session configuration) on a socket in a temp directory,
/// started by the test and killed at the end. nil when dbus-daemon is not installed.
final class PrivateBus: @unchecked Sendable {
    let directory: String
    let socketPath: String
    private let process: ChildProcess

    static func daemonPath() -> String? {
        ["/usr/bin/dbus-daemon", "/bin/dbus-daemon"].first { access($0, X_OK) == 0 }
    }

    init?() {
        guard let daemon = Self.daemonPath() else { return nil }
        var template = Array("/tmp/cuff-dbus-XXXXXX".utf8CString)
        guard let dir = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { return nil }
        directory = String(cString: dir)
        socketPath = directory + "/bus"
        let args = ["--session", "--nofork", "--nopidfile", "--address=unix:path=\(socketPath)"]
        guard let child = try? ChildProcess(args, executable: daemon, stderr: directory + "/dbus.log") else {
            return nil
        }
        process = child
        for _ in 0..<200 where access(socketPath, F_OK) != 0 { usleep(10_000) }
    }

    /// A connection to the bus, authenticated, with its unique name.
    func connect() throws -> DBusConnection {
        // The socket file appears at bind(), a moment before the daemon listens: on a busy machine
        // a connect in between is refused. Try again for a few seconds.
        for _ in 0..<500 {
            if let c = try? DBusConnection(path: socketPath) {
                try c.authenticate()
                try c.hello()
                return c
            }
            usleep(20_000)
        }
        let c = try DBusConnection(path: socketPath)
        try c.authenticate()
        try c.hello()
        return c
    }

    deinit {
        process.kill9()
        unlink(socketPath)
        unlink(directory + "/dbus.log")
        rmdir(directory)
    }
}

/// cuff's Agent1 on a real dbus-daemon, with the test playing bluetoothd: it owns `org.bluez`,
/// takes the registration and then sends the agent requests the way bluetoothd does to a default
/// agent: one for the device being paired, and ones for other devices and adapters.
@Suite("D-Bus agent on a real dbus-daemon")
struct DBusDaemonAgentTests {
    @Test func answersOnlyForItsDeviceAndUnregisters() throws {
        guard let bus = PrivateBus() else {
            print("skipped: dbus-daemon is not installed (tools/install-deps.sh --test installs it)")
            return
        }
        let bluez = try bus.connect()
        let owned = try bluez.call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", body: [.string("org.bluez"), .uint32(4)]))
        #expect(owned.body == [.uint32(1)])  // DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER
        let scope = AgentScope(adapter: BluetoothAdapter(index: 1), device: BluetoothAddress("00:AA:01:00:00:00")!)
        let script = Background { () -> [String] in
            var seen: [String] = []
            var agentName: String?
            let deadline = ContinuousClock.now + .seconds(8)
            // Registration as bluetoothd sees it.
            while agentName == nil || !seen.contains("RequestDefaultAgent") {
                guard let m = try? bluez.receive(until: deadline) else {
                    return seen + ["timed out waiting for registration"]
                }
                guard m.kind == .methodCall, m.interface == "org.bluez.AgentManager1" else { continue }
                seen.append(m.member ?? "?")
                if m.member == "RegisterAgent" { agentName = m.sender }
                _ = try? bluez.send(.methodReturn(to: m))
            }
            guard let agentName else { return seen }
            func ask(_ member: String, _ device: String, _ extra: [DBusValue] = []) -> String {
                do {
                    let r = try bluez.call(
                        .call(
                            destination: agentName, path: "/cuff/agent", interface: "org.bluez.Agent1", member: member,
                            body: [.objectPath(device)] + extra), timeout: .seconds(3))
                    return "\(member) \(device): accepted \(r.body ?? [])"
                } catch {
                    return
                        "\(member) \(device): \(error.message.contains("org.bluez.Error.Rejected") ? "Rejected" : error.message)"
                }
            }
            seen.append(ask("RequestConfirmation", "/org/bluez/hci1/dev_00_AA_01_00_00_00", [.uint32(0)]))
            // other adapter
            seen.append(ask("RequestConfirmation", "/org/bluez/hci0/dev_00_AA_01_00_00_00", [.uint32(0)]))
            seen.append(ask("RequestAuthorization", "/org/bluez/hci1/dev_11_22_33_44_55_66"))  // other device
            seen.append(
                ask(
                    "AuthorizeService", "/org/bluez/hci1/dev_11_22_33_44_55_66",
                    [.string("0000110b-0000-1000-8000-00805f9b34fb")]))
            seen.append(ask("RequestPasskey", "/org/bluez/hci1/dev_00_AA_01_00_00_00"))
            // The agent's stop() unregisters.
            let end = ContinuousClock.now + .seconds(8)
            while let m = try? bluez.receive(until: end) {
                guard m.kind == .methodCall, m.interface == "org.bluez.AgentManager1" else { continue }
                seen.append("\(m.member ?? "?") \(m.body ?? []) from agent: \(m.sender == agentName)")
                _ = try? bluez.send(.methodReturn(to: m))
                if m.member == "UnregisterAgent" { break }
            }
            return seen
        }
        let loop = try EventLoop()
        let agent = try BlueZAgent(connection: DBusConnection(path: bus.socketPath), scope: scope, loop: loop)
        let deadline = ContinuousClock.now + .seconds(8)
        try loop.run { agent.callsAnswered >= 5 || ContinuousClock.now >= deadline }
        agent.stop()
        let seen = try #require(script.join(limit: .seconds(15)))
        #expect(
            seen == [
                "RegisterAgent", "RequestDefaultAgent",
                "RequestConfirmation /org/bluez/hci1/dev_00_AA_01_00_00_00: accepted []",
                "RequestConfirmation /org/bluez/hci0/dev_00_AA_01_00_00_00: Rejected",
                "RequestAuthorization /org/bluez/hci1/dev_11_22_33_44_55_66: Rejected",
                "AuthorizeService /org/bluez/hci1/dev_11_22_33_44_55_66: Rejected",
                "RequestPasskey /org/bluez/hci1/dev_00_AA_01_00_00_00: accepted [DBus.DBusValue.uint32(0)]",
                "UnregisterAgent [DBus.DBusValue.objectPath(\"/cuff/agent\")] from agent: true",
            ])
        #expect(agent.rejected == 3)
        #expect(
            agent.log.contains(
                "agent: rejected RequestAuthorization for /org/bluez/hci1/dev_11_22_33_44_55_66: not 00:AA:01:00:00:00 on hci1"
            ))
        #expect(
            agent.log.contains(
                "agent: rejected RequestConfirmation for /org/bluez/hci0/dev_00_AA_01_00_00_00: not 00:AA:01:00:00:00 on hci1"
            ))
    }

    /// The agent is a source on the caller's event loop, beside the caller's own timers: bluetoothd
    /// asks and releases it while the loop runs; stop() leaves nothing watched on the loop.
    @Test func servedOnTheCallersLoopUntilReleased() throws {
        guard let bus = PrivateBus() else {
            print("skipped: dbus-daemon is not installed (tools/install-deps.sh --test installs it)")
            return
        }
        let bluez = try bus.connect()
        _ = try bluez.call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", body: [.string("org.bluez"), .uint32(4)]))
        let scope = AgentScope(adapter: BluetoothAdapter(index: 0), device: nil)
        let device = "/org/bluez/hci0/dev_00_AA_01_00_00_01"
        let script = Background { () -> [String] in
            var seen: [String] = []
            var agentName: String?
            let deadline = ContinuousClock.now + .seconds(8)
            while agentName == nil || !seen.contains("RequestDefaultAgent") {
                guard let m = try? bluez.receive(until: deadline) else { return seen + ["no registration"] }
                guard m.kind == .methodCall, m.interface == "org.bluez.AgentManager1" else { continue }
                seen.append(m.member ?? "?")
                if m.member == "RegisterAgent" { agentName = m.sender }
                _ = try? bluez.send(.methodReturn(to: m))
            }
            guard let agentName else { return seen }
            func call(_ member: String, _ body: [DBusValue]) -> String {
                do {
                    let r = try bluez.call(
                        .call(
                            destination: agentName, path: "/cuff/simulator_agent", interface: "org.bluez.Agent1",
                            member: member, body: body), timeout: .seconds(3))
                    return "\(member): \(r.kind) \(r.body ?? [])"
                } catch {
                    return "\(member): \(error.message)"
                }
            }
            seen.append(call("RequestConfirmation", [.objectPath(device), .uint32(123_456)]))
            usleep(100_000)  // the loop goes on turning meanwhile (its 10 ms timer)
            seen.append(call("Release", []))
            let end = ContinuousClock.now + .seconds(8)
            while let m = try? bluez.receive(until: end) {
                guard m.kind == .methodCall, m.interface == "org.bluez.AgentManager1" else { continue }
                seen.append(m.member ?? "?")
                _ = try? bluez.send(.methodReturn(to: m))
                if m.member == "UnregisterAgent" { break }
            }
            return seen
        }
        let loop = try EventLoop()
        let agent = try BlueZAgent(
            connection: DBusConnection(path: bus.socketPath), scope: scope, loop: loop, path: "/cuff/simulator_agent")
        #expect(loop.watchedCount == 1)
        var ticks = 0
        func tick() {
            ticks += 1
            loop.schedule(at: MonotonicClock.now() + .milliseconds(10)) { tick() }
        }
        tick()
        let deadline = ContinuousClock.now + .seconds(8)
        try loop.run { agent.wasReleased || ContinuousClock.now >= deadline }
        #expect(agent.wasReleased)
        #expect(agent.callsAnswered == 2)
        #expect(ticks >= 5, "the loop's own timer ran while the agent was served (\(ticks) ticks)")
        #expect(agent.log.count == 4)
        #expect(agent.log.first?.hasPrefix("agent: registered /cuff/simulator_agent (NoInputNoOutput) as :1.") == true)
        #expect(
            Array(agent.log.dropFirst())
                == [
                    "agent: default agent", "agent: confirm \(device) passkey 123456 → accept",
                    "agent: released by bluetoothd",
                ])
        agent.stop()
        agent.stop()  // idempotent: one UnregisterAgent
        #expect(loop.watchedCount == 0)
        let seen = try #require(script.join(limit: .seconds(15)))
        #expect(
            seen == [
                "RegisterAgent", "RequestDefaultAgent", "RequestConfirmation: methodReturn []",
                "Release: methodReturn []", "UnregisterAgent",
            ])
    }
}

/// Probe T #3 on a real dbus-daemon: any connection may send a signal to ours (a unicast signal
/// passes every match rule). Once told whose to take, a connection takes signals only from the
/// bus and from that name's owner, also after the name changes hands (bluetoothd restarted).
@Suite("D-Bus signals from the trusted name's owner only")
struct DBusSignalSourceTests {
    static func signal(_ member: String, to: String?) -> DBusMessage {
        DBusMessage(kind: .signal, path: "/cuff/test", interface: "cuff.Test", member: member, destination: to)
    }

    static func own(_ c: DBusConnection) throws {
        let r = try c.call(
            .call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", body: [.string("org.bluez"), .uint32(4)]))
        #expect(r.body == [.uint32(1)])
    }

    /// The `cuff.Test` signals `c` takes until `done` holds (or 5 s pass).
    static func taken(_ c: DBusConnection, until done: ([String]) -> Bool) throws -> [String] {
        var members: [String] = []
        let deadline = ContinuousClock.now + .seconds(5)
        // (In short waits: a dropped signal does not end one.)
        while !done(members), ContinuousClock.now < deadline {
            guard let m = try c.receive(until: .now + .milliseconds(50)) else { continue }
            if m.interface == "cuff.Test", let member = m.member { members.append(member) }
        }
        return members
    }

    @Test func onlyTheOwnersSignalsAreTakenAcrossAChangeOfOwner() throws {
        guard let bus = PrivateBus() else { return }
        let cuff = try bus.connect()
        try cuff.acceptSignals(onlyFromOwnerOf: "org.bluez")  // nobody owns it yet
        let other = try bus.connect()
        try other.send(Self.signal("beforeAnyOwner", to: cuff.uniqueName))
        let first = try bus.connect()
        try Self.own(first)
        try other.send(Self.signal("forged", to: cuff.uniqueName))
        try first.send(Self.signal("fromTheOwner", to: cuff.uniqueName))
        // (The other connection's signals may come before or after the owner's: wait for all three.)
        var seen = try Self.taken(cuff) { $0.contains("fromTheOwner") && cuff.foreignSignalsDropped >= 2 }
        #expect(seen == ["fromTheOwner"])
        #expect(cuff.foreignSignalsDropped == 2)

        // bluetoothd restarted: the old owner gone, a new one owns the name.
        first.close()
        let second = try bus.connect()
        try Self.own(second)
        try second.send(Self.signal("fromTheNewOwner", to: cuff.uniqueName))
        try other.send(Self.signal("forgedAgain", to: cuff.uniqueName))
        seen = try Self.taken(cuff) { $0.contains("fromTheNewOwner") && cuff.foreignSignalsDropped >= 3 }
        #expect(seen == ["fromTheNewOwner"])
        #expect(cuff.foreignSignalsDropped == 3)

        // A connection not told whom to trust takes everyone's.
        let plain = try bus.connect()
        try other.send(Self.signal("anyone", to: plain.uniqueName))
        #expect(try Self.taken(plain) { $0.contains("anyone") } == ["anyone"])
    }

    /// A flood of foreign signals just ahead of the owner's, read as an event loop reads: wait for
    /// the socket to be readable, then read until nothing is left for now. The owner's signal
    /// arrives whatever the flood's size: a read that ends with the drop budget spent leaves no
    /// whole message behind in the buffer, where no readiness would ever show it (probe T).
    @Test func theOwnersSignalAfterAFloodIsNotLeftInTheBuffer() throws {
        guard let bus = PrivateBus() else { return }
        let owner = try bus.connect()
        try Self.own(owner)
        let other = try bus.connect()
        // Flood sizes around the budget, and signals of several sizes (128 bytes would end each
        // 4 KiB read on a message's end): some reads end just past the owner's signal.
        for flood in (DBusConnection.dropBudget - 4)...(DBusConnection.dropBudget + 36) {
            let forged = "forged" + String(repeating: "x", count: flood % 16)
            let cuff = try bus.connect()
            defer { cuff.close() }
            try cuff.acceptSignals(onlyFromOwnerOf: "org.bluez")
            for _ in 0..<flood { try other.send(Self.signal(forged, to: cuff.uniqueName)) }
            // The bus routes each connection's messages in order: once this call returns, the
            // flood is on its way to `cuff`, ahead of the owner's signal.
            try other.call(DBusConnection.busCall("GetId"))
            try owner.send(Self.signal("fromTheOwner", to: cuff.uniqueName))
            try owner.call(DBusConnection.busCall("GetId"))
            var seen: [String] = []
            while seen.isEmpty {
                var p = pollfd(fd: cuff.fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 2000) == 1 else { break }
                while let m = try cuff.receive(until: .now) {
                    if m.interface == "cuff.Test", let member = m.member { seen.append(member) }
                }
            }
            #expect(seen == ["fromTheOwner"], "after \(flood) forged signals")
            #expect(cuff.foreignSignalsDropped == flood)
        }
    }
}
