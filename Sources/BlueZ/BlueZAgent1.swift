// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffLogging
import Glibc
import Logging
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

/// A `NoInputNoOutput` `org.bluez.Agent1` on the system bus, served on an ``EventLoop`` given to
/// it (no thread of its own: it answers while the loop runs): for when bluetoothd runs (it answers
/// the kernel's pairing questions itself and rejects them when no agent is registered). Without
/// bluetoothd, ``PairingAgent`` answers on MGMT.
///
/// It accepts requests only for its ``AgentScope`` (the device being paired or measured, on the
/// adapter in use). bluetoothd sends a default agent the requests of *every* adapter and device;
/// all others get `org.bluez.Error.Rejected` and a log line.
///
/// Registers with `org.bluez.AgentManager1.RegisterAgent` and `RequestDefaultAgent` (waiting for
/// the replies, in `init`); ``stop()`` sends `UnregisterAgent` and closes. Needs a bus policy that
/// lets the caller talk to `org.bluez` (root, or the `bluetooth` group on Debian). Used on the
/// loop's thread only.
public final class BlueZAgent {
    /// The agent's object path.
    public let path: String
    /// The one device it accepts requests for.
    public let scope: AgentScope
    private let connection: DBusConnection
    private let socket: AgentSocket
    /// One line per event handled so far.
    public private(set) var log: [String] = []
    /// How many Agent1 calls were answered (accepted or rejected).
    public private(set) var callsAnswered = 0
    /// Whether bluetoothd released the agent (`Release`: it is stopping or restarting).
    public private(set) var wasReleased = false
    /// How many requests for other devices or adapters were rejected.
    public private(set) var rejected = 0
    /// Where each line goes too (the command's stderr).
    private let logger: Logger
    /// Messages handled per turn of the loop at most (the rest in the next turn).
    static let readBudget = 32

    /// The loop it answers on.
    public var loop: EventLoop { socket.loop }

    /// Connects to the system bus, registers the agent and answers on `loop` from now on.
    ///
    /// - Parameters:
    ///   - loop: where the agent's socket is served; it answers while the loop runs.
    ///   - busPath: the bus socket (default ``DBusConnection/systemBusPath(environment:)``).
    ///   - logger: told (on the loop's thread) one line per call handled.
    /// - Throws: no bus, refused by policy, bluetoothd absent or refusing.
    public convenience init(
        scope: AgentScope, loop: EventLoop, busPath: String = DBusConnection.systemBusPath(),
        path: String = "/cuff/agent", timeout: Duration = .seconds(5), logger: Logger = .silent
    ) throws(TransportError) {
        let connection = try DBusConnection(path: busPath)
        try self.init(
            connection: connection, scope: scope, loop: loop, path: path, timeout: timeout, logger: logger)
    }

    /// Over an already connected (not yet authenticated) socket: handshake, Hello, register, serve.
    package init(
        connection: DBusConnection, scope: AgentScope, loop: EventLoop, path: String = "/cuff/agent",
        timeout: Duration = .seconds(5), logger: Logger = .silent
    ) throws(TransportError) {
        self.path = path
        self.scope = scope
        self.connection = connection
        self.logger = logger
        socket = AgentSocket(fd: connection.fd, loop: loop, close: connection.close)
        do {
            try connection.authenticate(timeout: timeout)
            try connection.hello()
            try connection.call(
                .call(
                    destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                    member: "RegisterAgent", body: [.objectPath(path), .string("NoInputNoOutput")]), timeout: timeout)
        } catch {
            socket.stop()
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
        try socket.serve { [unowned self] _ in readable() }
        for line in notes { note(line) }
        // A request that came in with the replies above sits in the buffer, not on the socket.
        if connection.hasBufferedMessage { answerBufferedSoon() }
    }

    deinit { stop() }

    private func note(_ line: String) {
        if log.count < 1000 { log.append(line) }
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

    /// The socket is readable (or failed): reads what is there and answers it.
    private func readable() {
        for _ in 0..<Self.readBudget {
            guard socket.serving else { return }
            let message: DBusMessage?
            do {
                message = try connection.receive(until: .now)
            } catch {
                note("agent: \(error.message); stopping")
                socket.pause()
                return
            }
            guard let message else { return }
            guard answer(message) else { return }
        }
        // More than a turn's worth: the rest next turn (what is still on the socket keeps it readable).
        if connection.hasBufferedMessage { answerBufferedSoon() }
    }

    /// Answers the messages already read into the buffer in the next turn of the loop.
    private func answerBufferedSoon() {
        loop.schedule(at: MonotonicClock.now()) { [weak self] in self?.readable() }
    }

    /// Handles one message; false when the reply could not be sent (the agent stops answering).
    private func answer(_ message: DBusMessage) -> Bool {
        let (reply, line) = Self.response(to: message, path: path, scope: scope)
        if message.member == "Release", message.path == path { wasReleased = true }
        if let line { note(line) }
        if let reply {
            callsAnswered += 1
            if reply.errorName == Self.rejectedError { rejected += 1 }
            do {
                try connection.send(reply)
            } catch {
                note("agent: sending reply failed: \(error.message); stopping")
                socket.pause()
                return false
            }
        }
        return true
    }

    /// Stops answering, unregisters the agent (best effort, bounded wait) and closes. Idempotent.
    public func stop() {
        socket.stop {
            _ = try? connection.call(
                .call(
                    destination: "org.bluez", path: "/org/bluez", interface: "org.bluez.AgentManager1",
                    member: "UnregisterAgent", body: [.objectPath(path)]), timeout: .seconds(1))
        }
    }
}
