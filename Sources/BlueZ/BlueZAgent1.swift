// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Glibc
import Synchronization
import Transport

/// A `NoInputNoOutput` `org.bluez.Agent1` on the system bus that accepts every pairing, on its
/// own thread: for when bluetoothd runs (it answers the kernel's pairing questions itself and
/// rejects them when no agent is registered). Without bluetoothd, ``PairingAgent`` answers on MGMT.
///
/// Registers with `org.bluez.AgentManager1.RegisterAgent` and `RequestDefaultAgent`; ``stop()``
/// sends `UnregisterAgent` and closes. Needs a bus policy that lets the caller talk to `org.bluez`
/// (root, or the `bluetooth` group on Debian).
public final class BlueZAgent: Sendable {
    private struct State {
        var log: [String] = []
        var answered = 0
    }

    /// The agent's object path.
    public let path: String
    private let connection: DBusConnection
    private let state = Mutex(State())
    private let wakeFDs: (CInt, CInt)
    private let thread: Mutex<OSThread?> = Mutex(nil)
    private let onEvent: (@Sendable (String) -> Void)?

    /// Connects to the system bus, registers the agent and starts answering.
    ///
    /// - Parameters:
    ///   - busPath: the bus socket (default ``DBusConnection/systemBusPath(environment:)``).
    ///   - onEvent: called (on the agent's thread, after registration) with one line per call handled.
    /// - Throws: no bus, refused by policy, bluetoothd absent or refusing, thread creation failure.
    public convenience init(
        busPath: String = DBusConnection.systemBusPath(), path: String = "/cuff/agent", timeout: Duration = .seconds(5),
        onEvent: (@Sendable (String) -> Void)? = nil
    ) throws(TransportError) {
        let connection = try DBusConnection(path: busPath)
        try self.init(connection: connection, path: path, timeout: timeout, onEvent: onEvent)
    }

    /// Over an already connected (not yet authenticated) socket: handshake, Hello, register, serve.
    package init(
        connection: DBusConnection, path: String = "/cuff/agent", timeout: Duration = .seconds(5),
        onEvent: (@Sendable (String) -> Void)? = nil
    ) throws(TransportError) {
        self.path = path
        self.connection = connection
        self.onEvent = onEvent
        do {
            try connection.authenticate(timeout: timeout)
            try connection.hello()
            try connection.call(.call(destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                                      member: "RegisterAgent", body: [.objectPath(path), .string("NoInputNoOutput")]), timeout: timeout)
        } catch {
            connection.close()
            throw error
        }
        var notes: [String] = ["agent: registered \(path) (NoInputNoOutput) as \(connection.uniqueName ?? "?")"]
        do {
            try connection.call(.call(destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                                      member: "RequestDefaultAgent", body: [.objectPath(path)]), timeout: timeout)
            notes.append("agent: default agent")
        } catch {
            notes.append("agent: not the default agent (\(error.message)); bluetoothd uses it for pairings cuff starts")
        }
        let wake: (CInt, CInt)
        switch Sys.socketpair(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_CLOEXEC.rawValue)) {
        case .success(let pair): wake = pair
        case .failure(let e):
            connection.close()
            throw TransportError.system("socketpair", "D-Bus agent wake-up", e)
        }
        wakeFDs = wake
        for line in notes { note(line) }
        guard let t = OSThread.start({ [self] in run() }) else {
            connection.close()
            _ = Sys.close(wake.0)
            _ = Sys.close(wake.1)
            throw TransportError(.systemCall, "D-Bus agent: cannot start a thread")
        }
        thread.withLock { $0 = t }
    }

    deinit { stop() }

    /// One line per event handled so far.
    public var log: [String] { state.withLock { $0.log } }
    /// How many Agent1 calls were answered.
    public var callsAnswered: Int { state.withLock { $0.answered } }

    private func note(_ line: String) {
        state.withLock { s in
            if s.log.count < 1000 { s.log.append(line) }
        }
        onEvent?(line)
    }

    /// What the agent answers to one incoming message, and a log line (pure; nil reply: none).
    public static func response(to message: DBusMessage, path: String) -> (reply: DBusMessage?, line: String?) {
        guard message.kind == .methodCall else { return (nil, nil) }
        let wantsReply = message.flags & DBusMessage.noReplyExpected == 0
        func answer(_ body: [DBusValue] = [], _ line: String?) -> (reply: DBusMessage?, line: String?) {
            (wantsReply ? .methodReturn(to: message, body: body) : nil, line)
        }
        let member = message.member ?? ""
        let args = message.body ?? []
        let device: String = if case .objectPath(let p)? = args.first { p } else { "?" }
        if message.path == path, message.interface == nil || message.interface == "org.bluez.Agent1" {
            switch (member, message.signature) {
            case ("RequestConfirmation", "ou"):
                let value: String = if case .uint32(let v)? = args.last { String(v) } else { "?" }
                return answer([], "agent: confirm \(device) passkey \(value) → accept")
            case ("RequestAuthorization", "o"):
                return answer([], "agent: authorize \(device) → accept")
            case ("AuthorizeService", "os"):
                let uuid: String = if case .string(let s)? = args.last { s } else { "?" }
                return answer([], "agent: authorize service \(uuid) for \(device) → accept")
            case ("RequestPasskey", "o"):
                return answer([.uint32(0)], "agent: passkey for \(device) → 000000")
            case ("RequestPinCode", "o"):
                return answer([.string("0000")], "agent: PIN for \(device) → 0000")
            case ("DisplayPasskey", "ouq"), ("DisplayPinCode", "os"):
                return answer([], "agent: \(member) for \(device)")
            case ("Release", ""):
                return answer([], "agent: released by bluetoothd")
            case ("Cancel", ""):
                return answer([], "agent: request cancelled")
            default: break
            }
        }
        if message.interface == "org.freedesktop.DBus.Peer", member == "Ping" { return answer([], nil) }
        let reply = wantsReply
            ? DBusMessage.errorReply(to: message, name: "org.freedesktop.DBus.Error.UnknownMethod",
                                     text: "no method \(message.interface ?? "").\(member)(\(message.signature)) on \(message.path ?? "")")
            : nil
        return (reply, "agent: unknown call \(message.interface ?? "").\(member)(\(message.signature)) → UnknownMethod")
    }

    private func run() {
        while true {
            if !connection.hasBufferedMessage {
                var fds = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakeFDs.1, events: Int16(POLLIN), revents: 0)]
                switch Sys.poll(&fds, timeoutMS: -1) {
                case .failure(.interrupted): continue
                case .failure(let e):
                    note("agent: poll failed: \(e); stopping")
                    return
                case .success: break
                }
                if fds[1].revents != 0 { return }
                if fds[0].revents == 0 { continue }
            }
            let message: DBusMessage?
            do {
                message = try connection.receive(until: .now)
            } catch {
                note("agent: \(error.message); stopping")
                return
            }
            guard let message else { continue }
            let (reply, line) = Self.response(to: message, path: path)
            if let line { note(line) }
            if let reply {
                state.withLock { $0.answered += 1 }
                do {
                    try connection.send(reply)
                } catch {
                    note("agent: sending reply failed: \(error.message); stopping")
                    return
                }
            }
        }
    }

    /// Stops the thread, unregisters the agent (best effort, bounded wait) and closes. Idempotent.
    public func stop() {
        guard let t = thread.withLock({ t -> OSThread? in
            let old = t
            t = nil
            return old
        }) else { return }
        let one: [UInt8] = [1]
        _ = one.withUnsafeBytes { Sys.send(wakeFDs.0, $0, flags: CInt(MSG_NOSIGNAL)) }
        t.join()
        _ = try? connection.call(.call(destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                                       member: "UnregisterAgent", body: [.objectPath(path)]), timeout: .seconds(1))
        connection.close()
        _ = Sys.close(wakeFDs.0)
        _ = Sys.close(wakeFDs.1)
    }
}
