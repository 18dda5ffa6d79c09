// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffLogging
import Glibc
import Logging
import Synchronization
import Transport

/// What a cuff agent answers for: one device on one adapter (the one being paired or measured),
/// or, for the simulator, which takes any central, any device on its adapter.
public struct AgentScope: Sendable, Hashable, CustomStringConvertible {
    public var adapter: BluetoothAdapter
    /// nil: any device on ``adapter``.
    public var device: BluetoothAddress?

    public init(adapter: BluetoothAdapter, device: BluetoothAddress?) {
        self.adapter = adapter
        self.device = device
    }

    /// bluetoothd's object path for the device: `/org/bluez/hciN/dev_AA_BB_CC_DD_EE_FF`.
    public var devicePath: String? { device.map { BlueZPaths.device($0, on: adapter) } }

    /// Whether a request about the device object `path` is in scope.
    public func contains(_ path: String) -> Bool {
        if let devicePath { return path == devicePath }
        let prefix = BlueZPaths.adapter(adapter) + "/dev_"
        guard path.hasPrefix(prefix) else { return false }
        let rest = path.dropFirst(prefix.count)
        return rest.count == 17 && rest.allSatisfy { $0 == "_" || $0.isHexDigit }
    }

    public var description: String { device.map { "\($0) on \(adapter)" } ?? "any device on \(adapter)" }
}

/// bluetoothd's object paths.
public enum BlueZPaths {
    public static func adapter(_ adapter: BluetoothAdapter) -> String { "/org/bluez/\(adapter.name)" }
    public static func device(_ device: BluetoothAddress, on adapter: BluetoothAdapter) -> String {
        "/org/bluez/\(adapter.name)/dev_" + device.description.replacingColons()
    }
}

extension String {
    func replacingColons() -> String { String(map { $0 == ":" ? "_" : $0 }) }
}

/// A `NoInputNoOutput` `org.bluez.Agent1` on the system bus, on its own thread: for when
/// bluetoothd runs (it answers the kernel's pairing questions itself and rejects them when no
/// agent is registered). Without bluetoothd, ``PairingAgent`` answers on MGMT.
///
/// It accepts requests only for its ``AgentScope`` (the device being paired or measured, on the
/// adapter in use). bluetoothd sends a default agent the requests of *every* adapter and device;
/// all others get `org.bluez.Error.Rejected` and a log line.
///
/// Registers with `org.bluez.AgentManager1.RegisterAgent` and `RequestDefaultAgent`; ``stop()``
/// sends `UnregisterAgent` and closes. Needs a bus policy that lets the caller talk to `org.bluez`
/// (root, or the `bluetooth` group on Debian).
public final class BlueZAgent: Sendable {
    private struct State {
        var log: [String] = []
        var answered = 0
        var rejected = 0
        var released = false
    }

    /// The agent's object path.
    public let path: String
    /// The one device it accepts requests for.
    public let scope: AgentScope
    private let connection: DBusConnection
    private let state = Mutex(State())
    private let wakeFDs: (CInt, CInt)
    private let thread: Mutex<OSThread?> = Mutex(nil)
    /// Where each line goes too (the command's stderr).
    private let logger: Logger

    /// Connects to the system bus, registers the agent and starts answering.
    ///
    /// - Parameters:
    ///   - busPath: the bus socket (default ``DBusConnection/systemBusPath(environment:)``).
    ///   - logger: told (on the agent's thread, after registration) one line per call handled.
    /// - Throws: no bus, refused by policy, bluetoothd absent or refusing, thread creation failure.
    public convenience init(
        scope: AgentScope, busPath: String = DBusConnection.systemBusPath(), path: String = "/cuff/agent",
        timeout: Duration = .seconds(5),
        logger: Logger = .silent
    ) throws(TransportError) {
        let connection = try DBusConnection(path: busPath)
        try self.init(connection: connection, scope: scope, path: path, timeout: timeout, logger: logger)
    }

    /// Over an already connected (not yet authenticated) socket: handshake, Hello, register, serve.
    package init(
        connection: DBusConnection, scope: AgentScope, path: String = "/cuff/agent", timeout: Duration = .seconds(5),
        logger: Logger = .silent
    ) throws(TransportError) {
        self.path = path
        self.scope = scope
        self.connection = connection
        self.logger = logger
        do {
            try connection.authenticate(timeout: timeout)
            try connection.hello()
            try connection.call(
                .call(
                    destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                    member: "RegisterAgent", body: [.objectPath(path), .string("NoInputNoOutput")]), timeout: timeout)
        } catch {
            connection.close()
            throw error
        }
        var notes: [String] = [
            "agent: registered \(path) (NoInputNoOutput) as \(connection.uniqueName ?? "?"), answering only for \(scope)"
        ]
        do {
            try connection.call(
                .call(
                    destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
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
    /// How many Agent1 calls were answered (accepted or rejected).
    public var callsAnswered: Int { state.withLock { $0.answered } }
    /// Whether bluetoothd released the agent (`Release`: it is stopping or restarting).
    public var wasReleased: Bool { state.withLock { $0.released } }
    /// How many requests for other devices or adapters were rejected.
    public var rejected: Int { state.withLock { $0.rejected } }

    private func note(_ line: String) {
        state.withLock { s in
            if s.log.count < 1000 { s.log.append(line) }
        }
        logger.info("\(line)")
    }

    /// The error name bluetoothd expects from an agent that says no.
    public static let rejectedError = "org.bluez.Error.Rejected"

    /// What the agent answers to one incoming message, and a log line (pure; nil reply: none).
    /// Requests naming a device other than `scope`'s get ``rejectedError``.
    public static func response(to message: DBusMessage, path: String, scope: AgentScope) -> (
        reply: DBusMessage?, line: String?
    ) {
        guard message.kind == .methodCall else { return (nil, nil) }
        let wantsReply = message.flags & DBusMessage.noReplyExpected == 0
        func answer(_ body: [DBusValue] = [], _ line: String?) -> (reply: DBusMessage?, line: String?) {
            (wantsReply ? .methodReturn(to: message, body: body) : nil, line)
        }
        let member = message.member ?? ""
        let args = message.body ?? []
        let device: String = if case .objectPath(let p)? = args.first { p } else { "?" }
        if message.path == path, message.interface == nil || message.interface == "org.bluez.Agent1" {
            let known: Set<String> = [
                "RequestConfirmation", "RequestAuthorization", "AuthorizeService", "RequestPasskey",
                "RequestPinCode", "DisplayPasskey", "DisplayPinCode",
            ]
            if known.contains(member), case .objectPath(let p)? = args.first, !scope.contains(p) {
                let text =
                    "cuff's agent answers only for \(scope); \(member) for \(TerminalText.escapingControlCharacters(p)) rejected"
                return (
                    wantsReply ? DBusMessage.errorReply(to: message, name: rejectedError, text: text) : nil,
                    "agent: rejected \(member) for \(TerminalText.escapingControlCharacters(p)): not \(scope)"
                )
            }
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
        let reply =
            wantsReply
            ? DBusMessage.errorReply(
                to: message, name: "org.freedesktop.DBus.Error.UnknownMethod",
                text: "no method \(message.interface ?? "").\(member)(\(message.signature)) on \(message.path ?? "")")
            : nil
        return (reply, "agent: unknown call \(message.interface ?? "").\(member)(\(message.signature)) → UnknownMethod")
    }

    private func run() {
        while true {
            if !connection.hasBufferedMessage {
                var fds = [
                    pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: wakeFDs.1, events: Int16(POLLIN), revents: 0),
                ]
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
            let (reply, line) = Self.response(to: message, path: path, scope: scope)
            if message.member == "Release", message.path == path { state.withLock { $0.released = true } }
            if let line { note(line) }
            if let reply {
                state.withLock { s in
                    s.answered += 1
                    if reply.errorName == Self.rejectedError { s.rejected += 1 }
                }
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
        guard
            let t = thread.withLock({ t -> OSThread? in
                let old = t
                t = nil
                return old
            })
        else { return }
        let one: [UInt8] = [1]
        _ = one.withUnsafeBytes { Sys.send(wakeFDs.0, $0, flags: CInt(MSG_NOSIGNAL)) }
        t.join()
        _ = try? connection.call(
            .call(
                destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                member: "UnregisterAgent", body: [.objectPath(path)]), timeout: .seconds(1))
        connection.close()
        _ = Sys.close(wakeFDs.0)
        _ = Sys.close(wakeFDs.1)
    }
}
