// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffTestSupport
import Glibc
import Synchronization
import Testing
@testable import BlueZ
@testable import DBus
import Transport

/// Hand-written D-Bus wire bytes.
enum DBusBytes {
    static func text(_ s: String) -> [UInt8] { Array(s.utf8) + [0] }

    /// `Hello` as a client sends it, fields in libdbus's order (path, destination, interface, member).
    static let hello: [UInt8] =
        Hex.decode("6c010001 00000000 01000000 6e000000")!  // call, body 0, serial 1, fields 110
        + Hex.decode("01016f00 15000000")! + text("/org/freedesktop/DBus") + [0, 0]  // 16…47
        + Hex.decode("06017300 14000000")! + text("org.freedesktop.DBus") + [0, 0, 0]  // 48…79
        + Hex.decode("02017300 14000000")! + text("org.freedesktop.DBus") + [0, 0, 0]  // 80…111
        + Hex.decode("03017300 05000000")! + text("Hello") + [0, 0]  // 112…125 + pad

    /// The bus's reply to Hello: method return (flags NO_REPLY_EXPECTED), serial 1, reply to 1, body ":1.5".
    static let helloReply: [UInt8] =
        Hex.decode("6c020101 09000000 01000000 3d000000")!
        + Hex.decode("06017300 04000000")! + text(":1.5") + [0, 0, 0]  // 16…31
        + Hex.decode("05017500 01000000")!  // 32…39
        + Hex.decode("08016700 017300")! + [0]  // 40…47
        + Hex.decode("07017300 14000000")! + text("org.freedesktop.DBus") + [0, 0, 0]  // 48…79 (fields end at 77)
        + Hex.decode("04000000")! + text(":1.5")  // body, 9 bytes

    /// Our accepting reply to a RequestConfirmation with serial 7 from ":1.1", sent as our serial 4.
    static let confirmationReply: [UInt8] =
        Hex.decode("6c020001 00000000 04000000 15000000")!
        + Hex.decode("05017500 07000000")!
        + Hex.decode("06017300 04000000")! + text(":1.1") + [0, 0, 0]
}

@Suite("D-Bus marshalling")
struct DBusMarshallingTests {
    @Test func parsesAKnownHello() throws {
        let m = try DBusMessage(parsing: DBusBytes.hello)
        #expect(m.kind == .methodCall)
        #expect(m.serial == 1)
        #expect(m.path == "/org/freedesktop/DBus")
        #expect(m.interface == "org.freedesktop.DBus")
        #expect(m.member == "Hello")
        #expect(m.destination == "org.freedesktop.DBus")
        #expect(m.signature == "")
        #expect(m.body == [])
        #expect(try DBusMessage.frameLength(DBusBytes.hello[...]) == 128)
    }

    @Test func encodesHelloAsHandWritten() throws {
        let m = DBusMessage.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "Hello")
        // Ours orders fields by code: path, interface, member, destination (fields 109 bytes).
        let expected: [UInt8] =
            Hex.decode("6c010001 00000000 01000000 6d000000")!
            + Hex.decode("01016f00 15000000")! + DBusBytes.text("/org/freedesktop/DBus") + [0, 0]
            + Hex.decode("02017300 14000000")! + DBusBytes.text("org.freedesktop.DBus") + [0, 0, 0]
            + Hex.decode("03017300 05000000")! + DBusBytes.text("Hello") + [0, 0]
            + Hex.decode("06017300 14000000")! + DBusBytes.text("org.freedesktop.DBus") + [0, 0, 0]
        #expect(Hex.encode(m.encoded(serial: 1)) == Hex.encode(expected))
        var parsed = try DBusMessage(parsing: expected)
        parsed.serial = 0
        #expect(parsed == m)
    }

    @Test func parsesAKnownMethodReturnAndRoundTrips() throws {
        let m = try DBusMessage(parsing: DBusBytes.helloReply)
        #expect(m.kind == .methodReturn)
        #expect(m.flags == DBusMessage.noReplyExpected)
        #expect(m.replySerial == 1)
        #expect(m.destination == ":1.5")
        #expect(m.sender == "org.freedesktop.DBus")
        #expect(m.signature == "s")
        #expect(m.body == [.string(":1.5")])
        let again = try DBusMessage(parsing: m.encoded(serial: 1))
        #expect(again == m)
    }

    @Test func parsesBigEndian() throws {
        // 'B', method return, NO_REPLY_EXPECTED, body 4, serial 2, fields 15: REPLY_SERIAL 1, SIGNATURE "u"; body 42.
        let bytes = Hex.decode("42020101 00000004 00000002 0000000f 05017500 00000001 08016700 01750000 0000002a")!
        let m = try DBusMessage(parsing: bytes)
        #expect(m.kind == .methodReturn)
        #expect(m.serial == 2)
        #expect(m.replySerial == 1)
        #expect(m.body == [.uint32(42)])
    }

    @Test func roundTripsEveryBasicType() throws {
        let body: [DBusValue] = [
            .byte(7), .uint32(0xDEAD_BEEF), .byte(1), .uint16(0x1234), .int16(-2), .boolean(true),
            .int32(-5), .string("é"), .objectPath("/a/b"), .signature("a{sv}"),
        ]
        let m = DBusMessage(kind: .signal, serial: 9, path: "/x", interface: "x.y", member: "Z", body: body)
        let parsed = try DBusMessage(parsing: m.encoded(serial: 9))
        #expect(parsed == m)
    }

    @Test func encodesTheConfirmationReply() {
        let call = DBusMessage(
            kind: .methodCall, serial: 7, path: "/cuff/agent", interface: "org.bluez.Agent1",
            member: "RequestConfirmation", sender: ":1.1",
            body: [.objectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01"), .uint32(0)])
        let (reply, line) = BlueZAgent.response(to: call, path: "/cuff/agent", scope: BlueZAgentResponseTests.scope)
        #expect(line?.contains("accept") == true)
        #expect(reply.map { Hex.encode($0.encoded(serial: 4)) } == Hex.encode(DBusBytes.confirmationReply))
    }

    @Test func rejectsHostileOrTruncatedInput() {
        // Every strict prefix of a message is refused, never a crash.
        for n in 0..<DBusBytes.helloReply.count {
            #expect(throws: DBusProtocolError.self) { try DBusMessage(parsing: Array(DBusBytes.helloReply.prefix(n))) }
        }
        // 4 GiB body announced: refused from the first 16 bytes, nothing allocated.
        #expect(throws: DBusProtocolError.self) {
            try DBusMessage.frameLength(Hex.decode("6c010001 ffffffff 01000000 00000000")![...])
        }
        #expect(throws: DBusProtocolError.self) {
            try DBusMessage.frameLength(Hex.decode("6c010001 00000000 01000000 ffffff7f")![...])
        }
        // Bad endianness mark, bad version.
        var bad = DBusBytes.hello
        bad[0] = UInt8(ascii: "x")
        #expect(throws: DBusProtocolError.self) { try DBusMessage(parsing: bad) }
        bad = DBusBytes.hello
        bad[3] = 2
        #expect(throws: DBusProtocolError.self) { try DBusMessage(parsing: bad) }
        // A string announcing more bytes than the message holds, a string whose NUL is missing:
        // refused (in the body: the message stands, its body is nil and says why).
        func refused(_ bytes: [UInt8]) -> Bool {
            guard let m = try? DBusMessage(parsing: bytes) else { return true }
            return m.body == nil && m.bodyError != nil
        }
        bad = DBusBytes.helloReply
        bad[80] = 0xFF; bad[81] = 0xFF; bad[82] = 0xFF; bad[83] = 0x7F
        #expect(refused(bad))
        bad = DBusBytes.helloReply
        bad[88] = 0x41
        #expect(refused(bad))
        // Header field array length pointing past the header.
        bad = DBusBytes.helloReply
        bad[12] = 0x50
        #expect(throws: DBusProtocolError.self) { try DBusMessage(parsing: bad) }
    }

    @Test func systemBusAddress() {
        #expect(DBusConnection.systemBusPath(environment: nil) == "/run/dbus/system_bus_socket")
        #expect(DBusConnection.systemBusPath(environment: "unix:path=/tmp/x%2dy,guid=1") == "/tmp/x-y")
        #expect(DBusConnection.systemBusPath(environment: "tcp:host=a;unix:path=/b") == "/b")
    }
}

@Suite("BlueZ Agent1 answers")
struct BlueZAgentResponseTests {
    /// The device these tests' agent pairs: btvirt's second controller, seen from hci0.
    static let scope = AgentScope(adapter: BluetoothAdapter(index: 0), device: BluetoothAddress("00:AA:01:01:00:01")!)

    @Test func devicePaths() {
        #expect(Self.scope.devicePath == "/org/bluez/hci0/dev_00_AA_01_01_00_01")
        #expect(BlueZPaths.adapter(BluetoothAdapter(index: 3)) == "/org/bluez/hci3")
    }

    @Test func rejectsRequestsForAnyOtherDeviceOrAdapter() {
        let others = [
            "/org/bluez/hci1/dev_00_AA_01_01_00_01", "/org/bluez/hci0/dev_00_AA_01_01_00_02",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/x", "/org/bluez/hci0/dev_00_aa_01_01_00_01",
        ]
        for other in others {
            let dev = DBusValue.objectPath(other)
            let cases: [(String, [DBusValue])] = [
                ("RequestConfirmation", [dev, .uint32(1)]), ("RequestAuthorization", [dev]),
                ("AuthorizeService", [dev, .string("1810")]),
                ("RequestPasskey", [dev]), ("RequestPinCode", [dev]),
                ("DisplayPasskey", [dev, .uint32(1), .uint16(0)]),
                ("DisplayPinCode", [dev, .string("1234")]),
            ]
            for (member, args) in cases {
                let (reply, line) = BlueZAgent.response(
                    to: Self.call(member, args), path: "/cuff/agent", scope: Self.scope)
                #expect(reply?.kind == .error, "\(member) \(other)")
                #expect(reply?.errorName == "org.bluez.Error.Rejected")
                #expect(reply?.replySerial == 3)
                #expect(line == "agent: rejected \(member) for \(other): not 00:AA:01:01:00:01 on hci0")
            }
        }
    }
    static func call(_ member: String, _ body: [DBusValue], path: String = "/cuff/agent", flags: UInt8 = 0)
        -> DBusMessage
    {
        DBusMessage(
            kind: .methodCall, flags: flags, serial: 3, path: path, interface: "org.bluez.Agent1", member: member,
            sender: ":1.1", body: body)
    }

    @Test func answersEveryAgentMethod() {
        let dev = DBusValue.objectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
        let cases: [(String, [DBusValue], [DBusValue])] = [
            ("RequestConfirmation", [dev, .uint32(1)], []), ("RequestAuthorization", [dev], []),
            ("AuthorizeService", [dev, .string("1810")], []), ("RequestPasskey", [dev], [.uint32(0)]),
            ("RequestPinCode", [dev], [.string("0000")]), ("DisplayPasskey", [dev, .uint32(1), .uint16(0)], []),
            ("DisplayPinCode", [dev, .string("1234")], []), ("Release", [], []), ("Cancel", [], []),
        ]
        for (member, args, expected) in cases {
            let reply = BlueZAgent.response(to: Self.call(member, args), path: "/cuff/agent", scope: Self.scope).reply
            #expect(reply?.kind == .methodReturn, "\(member)")
            #expect(reply?.replySerial == 3)
            #expect(reply?.destination == ":1.1")
            #expect(reply?.body == expected, "\(member)")
        }
    }

    @Test func refusesUnknownCalls() {
        for m in [
            Self.call("Frobnicate", []), Self.call("RequestConfirmation", [.uint32(1)]),
            Self.call("Release", [], path: "/other"),
        ] {
            let reply = BlueZAgent.response(to: m, path: "/cuff/agent", scope: Self.scope).reply
            #expect(reply?.kind == .error)
            #expect(reply?.errorName == "org.freedesktop.DBus.Error.UnknownMethod")
        }
        #expect(
            BlueZAgent.response(
                to: Self.call("Frobnicate", [], flags: DBusMessage.noReplyExpected), path: "/cuff/agent",
                scope: Self.scope
            ).reply == nil)
        #expect(
            BlueZAgent.response(
                to: Self.call("Release", [], flags: DBusMessage.noReplyExpected), path: "/cuff/agent", scope: Self.scope
            ).reply == nil)
        let signal = DBusMessage(
            kind: .signal, serial: 2, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameAcquired", body: [.string(":1.5")])
        #expect(BlueZAgent.response(to: signal, path: "/cuff/agent", scope: Self.scope).reply == nil)
    }
}

/// The bus end of a `socketpair`: reads lines and whole messages with a time limit.
final class FakeBus: @unchecked Sendable {
    let fd: CInt
    var buffer: [UInt8] = []

    init(fd: CInt) { self.fd = fd }

    private func fill() -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 5000) == 1 else { return false }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &chunk, chunk.count, 0)
        guard n > 0 else { return false }
        buffer += chunk[0..<n]
        return true
    }

    func line() -> String? {
        while true {
            if let i = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let l = buffer[..<i]
                buffer.removeSubrange(...i)
                return String(decoding: l, as: UTF8.self)
            }
            guard fill() else { return nil }
        }
    }

    func rawMessage() -> [UInt8]? {
        while true {
            if let total = try? DBusMessage.frameLength(buffer[...]), buffer.count >= total {
                defer { buffer.removeSubrange(..<total) }
                return Array(buffer[..<total])
            }
            guard fill() else { return nil }
        }
    }

    func message() -> DBusMessage? { rawMessage().flatMap { try? DBusMessage(parsing: $0) } }

    func write(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
    func write(_ m: DBusMessage, serial: UInt32) { write(m.encoded(serial: serial)) }

    func reply(to m: DBusMessage, serial: UInt32, body: [DBusValue] = []) {
        var r = DBusMessage.methodReturn(to: m, body: body)
        r.sender = "org.freedesktop.DBus"
        write(r, serial: serial)
    }
}

@Suite("D-Bus agent against a scripted bus")
struct DBusAgentScriptTests {
    static func pair() throws -> (CInt, CInt) {
        var fds: [CInt] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
            throw TransportError(.systemCall, "socketpair")
        }
        return (fds[0], fds[1])
    }

    @Test func registersAndAcceptsAConfirmation() throws {
        let (ours, theirs) = try Self.pair()
        let bus = FakeBus(fd: theirs)
        defer { close(theirs) }
        let uidHex = Hex.encode(Array(String(getuid()).utf8))
        let script = Background { () -> [String] in
            var seen: [String] = []
            seen.append(bus.line() ?? "<none>")
            bus.write(Array("OK 0123456789abcdef0123456789abcdef\r\n".utf8))
            seen.append(bus.line() ?? "<none>")
            guard let hello = bus.message() else { return seen + ["no Hello"] }
            seen.append(hello.member ?? "?")
            // A signal before the reply: the client must queue it, not mistake it for the reply.
            bus.write(
                DBusMessage(
                    kind: .signal, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                    member: "NameAcquired",
                    destination: ":1.5", sender: "org.freedesktop.DBus", body: [.string(":1.5")]), serial: 2)
            bus.write(DBusBytes.helloReply)
            guard let register = bus.message() else { return seen + ["no RegisterAgent"] }
            seen.append(
                "\(register.destination ?? "") \(register.path ?? "") \(register.interface ?? "").\(register.member ?? "") \(register.body ?? [])"
            )
            bus.reply(to: register, serial: 3)
            guard let request = bus.message() else { return seen + ["no RequestDefaultAgent"] }
            seen.append("\(request.member ?? "") \(request.body ?? [])")
            bus.reply(to: request, serial: 4)
            bus.write(
                DBusMessage(
                    kind: .methodCall, path: "/cuff/agent", interface: "org.bluez.Agent1",
                    member: "RequestConfirmation",
                    destination: ":1.5", sender: ":1.1",
                    body: [.objectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01"), .uint32(0)]), serial: 7)
            guard let answer = bus.rawMessage() else { return seen + ["no answer"] }
            seen.append(Hex.encode(answer))
            bus.write(
                DBusMessage(
                    kind: .methodCall, path: "/cuff/agent", interface: "org.bluez.Agent1", member: "Bogus",
                    destination: ":1.5", sender: ":1.1"), serial: 8)
            guard let error = bus.message() else { return seen + ["no error"] }
            seen.append("\(error.kind) \(error.errorName ?? "") \(error.replySerial ?? 0)")
            guard let unregister = bus.message() else { return seen + ["no UnregisterAgent"] }
            seen.append("\(unregister.member ?? "") \(unregister.body ?? [])")
            bus.reply(to: unregister, serial: 9)
            return seen
        }
        let loop = try EventLoop()
        let agent = try BlueZAgent(
            connection: DBusConnection(fd: ours), scope: BlueZAgentResponseTests.scope, loop: loop)
        // The agent answers while the loop runs, on this thread.
        let deadline = ContinuousClock.now + .seconds(5)
        try loop.run { agent.callsAnswered >= 2 || ContinuousClock.now >= deadline }
        agent.stop()
        let seen = try #require(script.join())
        #expect(
            seen == [
                "\0AUTH EXTERNAL \(uidHex)\r", "BEGIN\r", "Hello",
                "org.bluez /org/bluez org.bluez.AgentManager1.RegisterAgent [DBus.DBusValue.objectPath(\"/cuff/agent\"), DBus.DBusValue.string(\"NoInputNoOutput\")]",
                "RequestDefaultAgent [DBus.DBusValue.objectPath(\"/cuff/agent\")]",
                Hex.encode(DBusBytes.confirmationReply),
                "error org.freedesktop.DBus.Error.UnknownMethod 8",
                "UnregisterAgent [DBus.DBusValue.objectPath(\"/cuff/agent\")]",
            ])
        #expect(agent.log.contains { $0.contains("confirm /org/bluez/hci0/dev_00_AA_01_01_00_01") })
        #expect(agent.log.contains("agent: default agent"))
    }

    /// The bus going away while the agent is served: one line, and the socket is no longer
    /// watched (a hung-up descriptor would keep the loop spinning).
    @Test func aClosedBusStopsServingWithoutSpinning() throws {
        let (ours, theirs) = try Self.pair()
        let bus = FakeBus(fd: theirs)
        let script = Background { () -> Bool in
            _ = bus.line()
            bus.write(Array("OK 0123456789abcdef0123456789abcdef\r\n".utf8))
            _ = bus.line()
            guard bus.message() != nil else { return false }
            bus.write(DBusBytes.helloReply)
            guard let register = bus.message() else { return false }
            bus.reply(to: register, serial: 3)
            guard let request = bus.message() else { return false }
            bus.reply(to: request, serial: 4)
            close(theirs)
            return true
        }
        let loop = try EventLoop()
        let agent = try BlueZAgent(
            connection: DBusConnection(fd: ours), scope: BlueZAgentResponseTests.scope, loop: loop)
        #expect(script.join() == true)
        #expect(loop.watchedCount == 1)
        var turns = 0
        let deadline = ContinuousClock.now + .seconds(5)
        try loop.run {
            turns += 1
            return loop.watchedCount == 0 || ContinuousClock.now >= deadline
        }
        #expect(loop.watchedCount == 0)
        #expect(agent.log.last == "agent: D-Bus: the bus closed the connection; stopping")
        #expect(turns <= 3, "\(turns) turns")
        agent.stop()
        #expect(agent.callsAnswered == 0)
    }

    @Test func refusedAuthenticationIsATypedError() throws {
        let (ours, theirs) = try Self.pair()
        let bus = FakeBus(fd: theirs)
        defer { close(theirs) }
        let script = Background { () -> Bool in
            _ = bus.line()
            bus.write(Array("REJECTED EXTERNAL\r\n".utf8))
            return true
        }
        #expect(throws: TransportError.self) {
            try BlueZAgent(
                connection: DBusConnection(fd: ours), scope: BlueZAgentResponseTests.scope, loop: EventLoop(),
                timeout: .seconds(2))
        }
        _ = script.join()
    }

    @Test func hostileLengthFromTheBusIsRefused() throws {
        let (ours, theirs) = try Self.pair()
        let bus = FakeBus(fd: theirs)
        defer { close(theirs) }
        let script = Background { () -> Bool in
            _ = bus.line()
            bus.write(Array("OK 0123456789abcdef0123456789abcdef\r\n".utf8))
            _ = bus.line()
            _ = bus.message()
            bus.write(Hex.decode("6c020101 ffffff7f 01000000 08000000")!)  // 2 GiB body announced
            return true
        }
        let error = #expect(throws: TransportError.self) {
            try BlueZAgent(
                connection: DBusConnection(fd: ours), scope: BlueZAgentResponseTests.scope, loop: EventLoop(),
                timeout: .seconds(2))
        }
        #expect(error?.message.contains("too long") == true)
        _ = script.join()
    }

    @Test func errorReplyToRegisterIsReported() throws {
        let (ours, theirs) = try Self.pair()
        let bus = FakeBus(fd: theirs)
        defer { close(theirs) }
        let script = Background { () -> Bool in
            _ = bus.line()
            bus.write(Array("OK 0123456789abcdef0123456789abcdef\r\n".utf8))
            _ = bus.line()
            _ = bus.message()
            bus.write(DBusBytes.helloReply)
            guard let register = bus.message() else { return false }
            bus.write(
                DBusMessage.errorReply(
                    to: register, name: "org.freedesktop.DBus.Error.ServiceUnknown",
                    text: "The name org.bluez was not provided"), serial: 3)
            return true
        }
        let error = #expect(throws: TransportError.self) {
            try BlueZAgent(
                connection: DBusConnection(fd: ours), scope: BlueZAgentResponseTests.scope, loop: EventLoop(),
                timeout: .seconds(2))
        }
        #expect(error?.message.contains("ServiceUnknown") == true)
        #expect(script.join() == true)
    }
}

@Suite("D-Bus containers (bluetoothd's object tree)")
struct DBusContainerTests {
    /// A GetManagedObjects reply as bluetoothd shapes it: a{oa{sa{sv}}} with an ay Value, an as
    /// Flags, a boolean and an int16, through the wire and back.
    @Test func managedObjectsRoundTrip() throws {
        let char = DBusValue.dictionary([
            ("UUID", .string("00002a35-0000-1000-8000-00805f9b34fb")),
            ("Flags", .array(element: "s", [.string("indicate")])),
            ("Value", .bytes([0x1E, 0x78, 0x00])), ("Notifying", .boolean(false)), ("RSSI", .int16(-42)),
        ])
        let objects = DBusValue.array(
            element: "{oa{sa{sv}}}",
            [
                .dictEntry(
                    .objectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00/service000a/char000b"),
                    .array(element: "{sa{sv}}", [.dictEntry(.string("org.bluez.GattCharacteristic1"), char)])),
                .dictEntry(.objectPath("/org/bluez/hci1"), .array(element: "{sa{sv}}", [])),
            ])
        var m = DBusMessage(kind: .methodReturn, replySerial: 4, body: [objects])
        m.serial = 9
        #expect(m.signature == "a{oa{sa{sv}}}")
        let parsed = try DBusMessage(parsing: m.encoded(serial: 9))
        #expect(parsed == m)
        let tree = try #require(parsed.body?.first?.entries)
        #expect(tree.count == 2)
        let props = try #require(tree[0].1.entries?.first?.1)
        #expect(props["Value"]?.bytesValue == [0x1E, 0x78, 0x00])
        #expect(props["Flags"]?.stringsValue == ["indicate"])
        #expect(props["UUID"]?.stringValue == "00002a35-0000-1000-8000-00805f9b34fb")
        #expect(props["Notifying"]?.boolValue == false)
        #expect(props["RSSI"] == .int16(-42))
    }

    @Test func hostileContainersAreRefused() throws {
        // An array announcing more bytes than the body has: the message is read, its body is not.
        var m = DBusMessage(kind: .methodReturn, replySerial: 1, body: [.bytes([1, 2, 3, 4])])
        var bytes = m.encoded(serial: 2)
        let bodyStart = bytes.count - 8
        bytes[bodyStart] = 0xFF
        let parsed = try DBusMessage(parsing: bytes)
        #expect(parsed.replySerial == 1 && parsed.body == nil)
        guard case .truncated? = parsed.bodyError else {
            Issue.record("\(String(describing: parsed.bodyError))"); return
        }
        // Nesting too deep.
        var deep = DBusValue.byte(1)
        for _ in 0..<70 { deep = .variant(deep) }
        m = DBusMessage(kind: .methodReturn, replySerial: 1, body: [deep])
        let tooDeep = try DBusMessage(parsing: m.encoded(serial: 2))
        guard case .nestedTooDeep(let where_)? = tooDeep.bodyError else {
            Issue.record("\(String(describing: tooDeep.bodyError))"); return
        }
        #expect(where_.contains("deeper than 64") && where_.contains("at byte"))
    }

    /// Issue 28 item 4: what dbus-daemon delivers (libdbus allows 64 nested containers) parses;
    /// one level deeper is a typed nesting error, found without recursing further.
    @Test func nestingUpToTheBusLimitParsesAndBeyondIsATypedError() throws {
        func message(variants n: Int) -> [UInt8] {
            var v = DBusValue.bytes([0x02, 0x78, 0x00])
            for _ in 0..<(n - 1) { v = .variant(v) }
            return DBusMessage(
                kind: .signal, path: "/org/bluez/hci1/dev_00_AA_01_00_00_07/service000a/char000b",
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                body: [.string("org.bluez.GattCharacteristic1"), .dictionary([("Value", v)]), .array(element: "s", [])]
            ).encoded(serial: 7)
        }
        // a{sv} (2) + 60 variants + ay (1): 63 containers.
        let sixty = try DBusMessage(parsing: message(variants: 60))
        #expect(sixty.bodyError == nil)
        let changed = try #require(sixty.body?[1])
        // A property holds its value in one variant: 60 of them around an ay is not an ay.
        #expect(changed["Value"] != nil)
        #expect(changed["Value"]?.bytesValue == nil)
        #expect(try DBusMessage(parsing: message(variants: 1)).body?[1]["Value"]?.bytesValue == [0x02, 0x78, 0x00])
        let tooDeep = try DBusMessage(parsing: message(variants: 70))
        #expect(tooDeep.member == "PropertiesChanged" && tooDeep.body == nil)
        guard case .nestedTooDeep? = tooDeep.bodyError else {
            Issue.record("\(String(describing: tooDeep.bodyError))"); return
        }
        // Signatures: at most 32 nested arrays, no empty struct (an array of them never ends).
        #expect(
            throws: DBusProtocolError.nestedTooDeep(
                "signature '\(String(repeating: "a", count: 33))y': more than 32 nested arrays")
        ) {
            try DBusSignature.split(String(repeating: "a", count: 33) + "y")
        }
        #expect(try DBusSignature.split(String(repeating: "a", count: 32) + "y").count == 1)
        #expect(throws: DBusProtocolError.self) { try DBusSignature.split("a()") }
        #expect(try DBusSignature.split("a{sv}(iay)v").map(String.init) == ["a{sv}", "(iay)", "v"])
    }
}

/// A bus that floods (probe T): any local user may send signals to cuff's connection on the
/// system bus, and one that sends faster than cuff parses held every wait past its timeout.
@Suite("D-Bus against a flooding or hostile sender")
struct DBusFloodTests {
    /// A small signal, as a flood sends it.
    static func signal(_ i: Int) -> [UInt8] {
        DBusMessage(
            kind: .signal, path: "/org/bluez/hci0", interface: "org.freedesktop.DBus.Properties",
            member: "PropertiesChanged", sender: ":1.99",
            body: [.string("org.bluez.Adapter1"), .array(element: "y", [DBusValue](repeating: .byte(7), count: 8))]
        ).encoded(serial: UInt32(i + 1))
    }

    /// A call that gets no reply while signals keep coming times out when its time is up.
    @Test func aCallTimesOutWhileSignalsKeepComing() throws {
        let (ours, theirs) = try DBusAgentScriptTests.pair()
        let connection = DBusConnection(fd: ours)
        let stop = Atomic<Bool>(false)
        // Many small signals a send, made once: the flood outruns the parser, so a complete
        // message always waits.
        let bytes = (0..<600).flatMap { Self.signal($0) }
        let flood = Background { () -> Int in
            var sent = 0
            while !stop.load(ordering: .relaxed) {
                let n = bytes.withUnsafeBytes { send(theirs, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break }
                sent += 1
            }
            return sent
        }
        defer {
            stop.store(true, ordering: .relaxed)
            close(theirs)
            _ = flood.join()
        }
        let started = ContinuousClock.now
        var error: TransportError?
        do {
            _ = try connection.call(
                .call(
                    destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Adapter1",
                    member: "StartDiscovery"),
                timeout: .milliseconds(300))
        } catch let e {
            error = e
        }
        let took = ContinuousClock.now - started
        #expect(took < .seconds(5), "\(took)")
        let message = error?.message ?? ""
        #expect(
            message.contains("no reply to org.bluez.Adapter1.StartDiscovery within")
                || message.contains("MiB of other messages arrived while waiting"), "\(message)")
    }

    /// One message within every limit of the specification (1 MiB, structs nested 33 deep, in
    /// an array) whose values would take hundreds of MB: its body is refused, typed.
    @Test func aMessageOfMoreValuesThanBytesIsRefused() throws {
        let nested = String(repeating: "(", count: 32) + "y" + String(repeating: ")", count: 32)
        var element: DBusValue = .byte(1)
        for _ in 0..<32 { element = .structure([element]) }
        let m = DBusMessage(
            kind: .signal, path: "/x", interface: "x.y", member: "Z", sender: ":1.5",
            body: [.array(element: nested, [DBusValue](repeating: element, count: 4096))])
        let bytes = m.encoded(serial: 1)
        let parsed = try DBusMessage(parsing: bytes)
        #expect(parsed.body?.count == nil)
        guard case .tooLong(let why)? = parsed.bodyError else {
            Issue.record("\(String(describing: parsed.bodyError))")
            return
        }
        #expect(why.contains("more values than the message's \(bytes.count) bytes allow"), "\(why)")
        // What bluetoothd sends parses: a GATT value of 512 bytes, a dictionary of properties.
        let value = DBusMessage(
            kind: .signal, path: "/org/bluez/hci0/dev_00_AA_01_00_00_00/service0010/char0011",
            interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", sender: ":1.5",
            body: [
                .string("org.bluez.GattCharacteristic1"),
                .array(
                    element: "{sv}",
                    [
                        .dictEntry(
                            .string("Value"),
                            .variant(.array(element: "y", [DBusValue](repeating: .byte(9), count: 512))))
                    ]),
                .array(element: "s", []),
            ])
        #expect(try DBusMessage(parsing: value.encoded(serial: 2)).body?.count == 3)
    }
}
