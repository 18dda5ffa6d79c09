// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Glibc
import Transport

/// A minimal D-Bus client connection over a Unix stream socket: SASL EXTERNAL, framing,
/// method calls with replies. Used by one thread at a time (hand-overs must be ordered, e.g. by
/// a thread join), hence `@unchecked Sendable`.
public final class DBusConnection: @unchecked Sendable {
    /// The socket (owned: ``close()`` closes it).
    let fd: CInt
    private var buffer: [UInt8] = []
    private var nextSerial: UInt32 = 1
    private var closed = false
    /// Messages that arrived while waiting for a reply, in order, with their sizes on the wire
    /// (together ``pendingBytes``).
    private var pending: [(message: DBusMessage, size: Int)] = []
    private var pendingBytes = 0
    /// The most that waits in ``pending``, in bytes on the wire: past it a call fails rather than
    /// drop what arrives (an agent's question, a disconnection, a notification bluetoothd has
    /// confirmed already; probe T: they were dropped without a word past 64 messages).
    public static let maximumPendingBytes = 4 << 20
    /// Our unique name (from Hello).
    public private(set) var uniqueName: String?
    /// Whose signals are taken, once ``acceptSignals(onlyFromOwnerOf:)`` said: a well-known name
    /// and its owner now (nil while nobody owns it). nil: anyone's.
    private var signalSource: (name: String, owner: String?)?
    /// Signals dropped unread because neither the bus nor the trusted name's owner sent them.
    public private(set) var foreignSignalsDropped = 0

    /// The system bus socket path: `$DBUS_SYSTEM_BUS_ADDRESS` (first `unix:path=`), else
    /// `/run/dbus/system_bus_socket`.
    public static func systemBusPath(
        environment: String? = getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
    ) -> String {
        if let environment {
            for address in environment.split(separator: ";") where address.hasPrefix("unix:") {
                for pair in address.dropFirst(5).split(separator: ",") where pair.hasPrefix("path=") {
                    return unescape(String(pair.dropFirst(5)))
                }
            }
        }
        return "/run/dbus/system_bus_socket"
    }

    /// D-Bus address values escape bytes as %XX.
    static func unescape(_ s: String) -> String {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "%"), bytes.count >= 2,
                let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16)
            {
                out.append(v)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Takes ownership of a connected stream socket (e.g. one end of a `socketpair`, in tests).
    package init(fd: CInt) {
        self.fd = fd
    }

    /// Connects to the Unix stream socket at `path` (no handshake yet).
    public convenience init(path: String) throws(TransportError) {
        let address = try UnixSocketAddress.make(path, call: "connect")
        let fd: CInt
        switch Sys.socket(domain: AF_UNIX, type: CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue)) {
        case .success(let s): fd = s
        case .failure(let e): throw TransportError.system("socket", "AF_UNIX stream (D-Bus)", e)
        }
        if case .failure(let e) = Sys.connect(fd, address) {
            _ = Sys.close(fd)
            throw TransportError.system("connect", "D-Bus system bus \(path)", e)
        }
        self.init(fd: fd)
    }

    deinit { close() }

    /// Closes the socket. Idempotent.
    public func close() {
        if closed { return }
        closed = true
        _ = Sys.close(fd)
    }

    // MARK: - Bytes

    private func sendAll(_ bytes: [UInt8]) throws(TransportError) {
        var offset = 0
        while offset < bytes.count {
            let r = bytes.withUnsafeBytes { raw in
                Sys.send(fd, UnsafeRawBufferPointer(rebasing: raw[offset...]), flags: CInt(MSG_NOSIGNAL))
            }
            switch r {
            case .success(let n): offset += n
            case .failure(let e): throw TransportError.system("send", "D-Bus", e)
            }
        }
    }

    /// Reads what is there into `buffer`, waiting until `deadline` (nil: forever).
    /// Returns false on timeout; throws on end of stream or error.
    private func fill(until deadline: ContinuousClock.Instant?) throws(TransportError) -> Bool {
        while true {
            var ms: CInt = -1
            if let deadline {
                let left = deadline - .now
                ms = left <= .zero ? 0 : Sys.pollMilliseconds(left)
            }
            switch Sys.poll(fd, events: Int16(POLLIN), timeoutMS: ms) {
            case .failure(.interrupted): continue
            case .failure(let e): throw TransportError.system("poll", "D-Bus", e)
            case .success(0):
                if let deadline, ContinuousClock.now >= deadline { return false }
                continue
            case .success: break
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let r = chunk.withUnsafeMutableBytes { Sys.recv(fd, $0, flags: CInt(MSG_DONTWAIT)) }
            switch r {
            case .success(0): throw TransportError(.notConnected, "D-Bus: the bus closed the connection")
            case .success(let n):
                buffer += chunk[0..<n]
                return true
            case .failure(.wouldBlock), .failure(.interrupted): continue
            case .failure(let e): throw TransportError.system("recv", "D-Bus", e)
            }
        }
    }

    // MARK: - SASL

    /// `AUTH EXTERNAL` with our uid, then `BEGIN`. Returns the server's GUID.
    @discardableResult
    public func authenticate(uid: UInt32 = getuid(), timeout: Duration = .seconds(5)) throws(TransportError) -> String {
        let hex = Array(String(uid).utf8).map { b in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(b >> 4)], digits[Int(b & 0xF)]], as: UTF8.self)
        }.joined()
        try sendAll([0] + Array("AUTH EXTERNAL \(hex)\r\n".utf8))
        let deadline = ContinuousClock.now + timeout
        var line: [UInt8] = []
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                line = Array(buffer[..<end])
                buffer.removeSubrange(...end)
                break
            }
            if buffer.count > 512 { throw Self.error(.authentication("server line longer than 512 bytes")) }
            guard try fill(until: deadline) else {
                throw TransportError(.timedOut, "D-Bus: no answer to AUTH within \(timeout)")
            }
        }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        let text = String(decoding: line.map { (32...126).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        guard text.hasPrefix("OK ") else { throw Self.error(.authentication("server said \"\(text)\"")) }
        try sendAll(Array("BEGIN\r\n".utf8))
        return String(text.dropFirst(3))
    }

    static func error(_ e: DBusProtocolError) -> TransportError {
        TransportError(.systemCall, e.description)
    }

    // MARK: - Messages

    /// Sends `message` with the next serial; returns the serial.
    @discardableResult
    public func send(_ message: DBusMessage) throws(TransportError) -> UInt32 {
        let serial = nextSerial
        nextSerial = nextSerial == UInt32.max ? 1 : nextSerial + 1
        try sendAll(message.encoded(serial: serial))
        return serial
    }

    /// The next message (queued ones first), waiting until `deadline` (nil: forever); nil on timeout.
    public func receive(until deadline: ContinuousClock.Instant?) throws(TransportError) -> DBusMessage? {
        if !pending.isEmpty {
            let first = pending.removeFirst()
            pendingBytes -= first.size
            return first.message
        }
        return try receiveFromWire(until: deadline)?.message
    }

    /// The next message read from the socket, with its size there. Signals from a sender
    /// ``acceptSignals(onlyFromOwnerOf:)`` does not trust are dropped on the way.
    private func receiveFromWire(until deadline: ContinuousClock.Instant?) throws(TransportError) -> (
        message: DBusMessage, size: Int
    )? {
        var dropped = 0
        while true {
            do throws(DBusProtocolError) {
                if let total = try DBusMessage.frameLength(buffer[...]), buffer.count >= total {
                    let message = try DBusMessage(parsing: Array(buffer[..<total]))
                    buffer.removeSubrange(..<total)
                    if accepts(message) { return (message, total) }
                    foreignSignalsDropped += 1
                    dropped += 1
                    continue
                }
            } catch {
                throw Self.error(error)
            }
            // A flood of them still ends the wait at its deadline, but only once nothing whole is
            // left in the buffer: what is left there is on no socket, and a caller waiting for
            // the socket to be readable would never hear of it.
            if dropped >= Self.dropBudget, let deadline, ContinuousClock.now >= deadline { return nil }
            guard try fill(until: deadline) else { return nil }
        }
    }

    /// How many foreign signals one read drops before it looks at its deadline again (when it
    /// next needs the socket: a read of 4 KiB may drop a few dozen more).
    static let dropBudget = 256

    /// From now on, signals are taken only from the bus itself and from whoever owns `name`,
    /// followed through `NameOwnerChanged` (a restarted bluetoothd is trusted once it owns its
    /// name again). The system bus lets any local user send a signal to any connection, whatever
    /// its match rules; such a signal is dropped unread (probe T: a forged `PropertiesChanged`
    /// made `cuff pair` say "paired", and could hand `measure` a reading no cuff took).
    public func acceptSignals(onlyFromOwnerOf name: String) throws(TransportError) {
        signalSource = (name, nil)
        // The match first: no change of owner falls between the question and the answer.
        try addMatch(
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(name)'"
        )
        do {
            let reply = try call(Self.busCall("GetNameOwner", [.string(name)]))
            if case .string(let owner)? = reply.body?.first { signalSource = (name, owner) }
        } catch {
            // Nobody owns it yet: signals wait for the NameOwnerChanged that says who does.
            guard error.dbusError == .nameHasNoOwner else { throw error }
        }
    }

    /// Who owns the name ``acceptSignals(onlyFromOwnerOf:)`` trusts, as last heard (nil: nobody,
    /// or no name trusted).
    public var trustedSender: String? { signalSource?.owner }

    /// A method call on the bus daemon itself (`org.freedesktop.DBus`).
    public static func busCall(_ member: String, _ body: [DBusValue] = []) -> DBusMessage {
        .call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: member, body: body)
    }

    /// `org.freedesktop.DBus.AddMatch`: the signals `rule` matches are sent to us.
    public func addMatch(_ rule: String) throws(TransportError) {
        try call(Self.busCall("AddMatch", [.string(rule)]))
    }

    /// Whether a message is taken: all but a signal from a sender not trusted (and a change of
    /// the trusted name's owner is followed).
    private func accepts(_ m: DBusMessage) -> Bool {
        guard m.kind == .signal, let source = signalSource else { return true }
        if m.sender == "org.freedesktop.DBus" {
            if m.member == "NameOwnerChanged", let body = m.body, body.count == 3, body[0] == .string(source.name),
                case .string(let owner) = body[2]
            {
                signalSource = (source.name, owner.isEmpty ? nil : owner)
            }
            return true
        }
        return m.sender != nil && m.sender == source.owner
    }

    /// Whether a message is waiting already (queued or buffered whole).
    var hasBufferedMessage: Bool {
        if !pending.isEmpty { return true }
        guard let total = try? DBusMessage.frameLength(buffer[...]) else { return false }
        return buffer.count >= total
    }

    /// Calls a method and waits for its reply; other messages meanwhile are queued for ``receive(until:)``.
    /// Throws on an error reply (with its name and text) or timeout.
    @discardableResult
    public func call(_ message: DBusMessage, timeout: Duration = .seconds(5)) throws(TransportError) -> DBusMessage {
        let serial = try send(message)
        let deadline = ContinuousClock.now + timeout
        let name = "\(message.interface ?? "").\(message.member ?? "")"
        while true {
            guard let (m, size) = try receiveFromWire(until: deadline) else {
                throw TransportError(.timedOut, "D-Bus: no reply to \(name) within \(timeout)")
            }
            if (m.kind == .methodReturn || m.kind == .error), m.replySerial == serial {
                if m.kind == .error {
                    var text = ""
                    if case .string(let s)? = m.body?.first { text = ": " + s }
                    throw TransportError(
                        .systemCall, "D-Bus \(message.member ?? "call") failed: \(m.errorName ?? "error")\(text)",
                        remoteErrorName: m.errorName)
                }
                return m
            }
            pending.append((m, size))
            pendingBytes += size
            if pendingBytes > Self.maximumPendingBytes {
                throw TransportError(
                    .systemCall,
                    "D-Bus: more than \(Self.maximumPendingBytes >> 20) MiB of other messages arrived while waiting for the reply to \(name)"
                )
            }
            // (Checked after each message too: a bus that keeps sending never lets the wait time out.)
            if ContinuousClock.now >= deadline {
                throw TransportError(.timedOut, "D-Bus: no reply to \(name) within \(timeout)")
            }
        }
    }

    /// `org.freedesktop.DBus.Hello`; stores and returns our unique name.
    @discardableResult
    public func hello() throws(TransportError) -> String {
        let reply = try call(Self.busCall("Hello"))
        guard case .string(let name)? = reply.body?.first else {
            throw Self.error(.malformed("Hello reply without a name"))
        }
        uniqueName = name
        return name
    }
}
