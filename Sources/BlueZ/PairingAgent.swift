// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import CuffLogging
import Glibc
import Logging
import Transport

/// Answers the kernel's pairing questions on the MGMT control socket, served on an ``EventLoop``
/// given to it (no thread of its own: it answers while the loop runs).
///
/// Kernels with "Always request for user confirmation for Just Works" (upstream 2023/24; Debian's
/// 6.1.0-56 has it) send **User Confirmation Request** (0x000F) to user space even for LE Just
/// Works on both sides; with nobody answering, SMP stalls for 30 s and fails. This agent accepts
/// every confirmation (User Confirmation Reply, 0x001C) and answers **User Passkey Request**
/// (0x0010) with the configured passkey (0x001E). It is meant for when bluetoothd is *not*
/// running; with bluetoothd, its own agent handling (`bluetoothctl` → `agent NoInputNoOutput`,
/// `default-agent`) answers, and bluetoothd without an agent rejects at once (see
/// ``BluetoothDaemon``).
///
/// Needs CAP_NET_ADMIN: the kernel sends pairing events only to trusted MGMT sockets.
/// Start it before raising security; events are queued from `init` on, so there is no race. Used
/// on the loop's thread only.
public final class PairingAgent {
    /// The passkey given for User Passkey Requests.
    public let passkey: UInt32
    /// Only answer for this adapter (nil: all).
    public let adapter: BluetoothAdapter?
    /// Only answer for this peer (nil: any, e.g. the simulator, which takes any central).
    public let peer: BluetoothAddress?
    private let socket: AgentSocket
    /// Where each line goes too (the command's stderr).
    private let logger: Logger
    /// Packets handled per turn of the loop at most (the rest keep the socket readable).
    static let readBudget = 16

    /// The loop it answers on.
    public var loop: EventLoop { socket.loop }

    /// Opens the control socket and answers on `loop` from now on.
    ///
    /// - Parameters:
    ///   - loop: where the socket is served; the agent answers while the loop runs.
    ///   - passkey: 0…999999, for passkey entry.
    ///   - logger: told (on the loop's thread) one line per event handled.
    /// - Throws: Bluetooth absent, no CAP_NET_ADMIN (with what to do).
    public init(
        adapter: BluetoothAdapter? = nil, peer: BluetoothAddress? = nil, passkey: UInt32 = 0, loop: EventLoop,
        logger: Logger = .silent
    ) throws(TransportError) {
        precondition(passkey <= 999_999, "a passkey has six decimal digits")
        if !Self.hasNetAdmin() {
            throw TransportError(
                .systemCall,
                "pairing agent: this process lacks CAP_NET_ADMIN, so the kernel won't send it pairing requests — \(BlueZErrors.permissionHint)",
                errno: EPERM)
        }
        let fd = try MGMTSocket.openControl()
        self.adapter = adapter
        self.peer = peer
        self.passkey = passkey
        self.logger = logger
        socket = AgentSocket(fd: fd, loop: loop, close: { _ = Sys.close(fd) })
        try socket.serve { [unowned self] readiness in readable(readiness) }
    }

    deinit { stop() }

    /// Whether the effective capabilities include CAP_NET_ADMIN (bit 12), from /proc/self/status.
    static func hasNetAdmin() -> Bool {
        guard case .success(let bytes) = Sys.readFile("/proc/self/status", limit: 16384) else { return true }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let caps = UInt64(line.dropFirst(7).trimmingPrefix(while: { $0 == " " || $0 == "\t" }), radix: 16)
        else { return true }  // unknown: let the kernel decide
        return caps & (1 << 12) != 0
    }

    /// One line per event handled so far.
    public private(set) var log: [String] = []
    /// How many confirmations were accepted.
    public private(set) var confirmationsAnswered = 0
    /// How many passkey requests were answered.
    public private(set) var passkeysAnswered = 0
    /// The key events (New Long Term Key, New IRK, New CSRK) of this agent's adapter, in order:
    /// what the raw path's bond store keeps.
    public private(set) var keyEvents: [MGMTPacket] = []
    /// How many pairings the kernel reported as failed.
    public private(set) var failures = 0

    private func note(_ line: String) {
        if log.count < 1000 { log.append(line) }
        logger.info("\(line)")
    }

    /// The socket is readable (or failed): reads the packets there and answers them.
    private func readable(_ readiness: EventLoop.Readiness) {
        guard readiness.contains(.readable) else {
            note("agent: MGMT socket failed; stopping")
            socket.pause()
            return
        }
        var buffer = [UInt8](repeating: 0, count: 1024)
        for _ in 0..<Self.readBudget {
            guard socket.serving else { return }
            let r = buffer.withUnsafeMutableBytes { Sys.recv(socket.fd, $0, flags: CInt(MSG_DONTWAIT)) }
            guard case .success(let n) = r else { return }
            handle(Array(buffer[0..<min(n, buffer.count)]))
        }
    }

    /// What the agent answers to one MGMT packet, and the log line for it (pure; nil reply: none).
    ///
    /// - Parameters:
    ///   - adapter: only answer events of this controller (nil: all).
    ///   - peer: only answer pairing questions about this device (nil: any). Others are logged and
    ///     left to whoever else listens on MGMT (another program may be pairing that device).
    public static func response(
        to bytes: [UInt8], passkey: UInt32, adapter: BluetoothAdapter?, peer: BluetoothAddress? = nil
    ) -> (reply: MGMTPacket?, line: String?, event: MGMTEvent?) {
        guard let packet = try? MGMTPacket(parsing: bytes), let event = try? MGMTEvent(packet) else {
            return (nil, nil, nil)
        }
        if let adapter, packet.index != adapter.index { return (nil, nil, event) }
        let hci = "hci\(packet.index)"
        if let peer {
            switch event {
            case .userConfirmationRequest(let a, _, _) where a.address.rawValue != peer.rawValue,
                .userPasskeyRequest(let a) where a.address.rawValue != peer.rawValue:
                return (
                    nil, "agent: \(hci) pairing question for \(a) left unanswered: cuff answers only for \(peer)", event
                )
            default: break
            }
        }
        switch event {
        case .userConfirmationRequest(let a, let hint, let value):
            return (
                MGMTCommand.userConfirmationReply(index: packet.index, a),
                "agent: \(hci) confirm \(a) hint=\(hint) value=\(value) → accept", event
            )
        case .userPasskeyRequest(let a):
            return (
                MGMTCommand.userPasskeyReply(index: packet.index, a, passkey: passkey),
                "agent: \(hci) passkey request \(a) → \(passkey)", event
            )
        case .authenticationFailed(let a, let status):
            return (nil, "agent: \(hci) pairing with \(a) failed: \(MGMTCommand.describe(status: status))", event)
        case .newLongTermKey(let a, _):
            return (nil, "agent: \(hci) paired with \(a) (new LTK)", event)
        case .commandComplete(let op, let status, _) where (0x001C...0x001E).contains(op),
            .commandStatus(let op, let status) where (0x001C...0x001E).contains(op):
            return (
                nil, "agent: \(hci) reply 0x\(String(op, radix: 16)) → \(MGMTCommand.describe(status: status))", event
            )
        default:
            return (nil, nil, event)
        }
    }

    private func handle(_ bytes: [UInt8]) {
        if let packet = try? MGMTPacket(parsing: bytes), [0x000A, 0x0018, 0x0019].contains(packet.code),
            adapter == nil || packet.index == adapter?.index
        {
            if keyEvents.count < 64 { keyEvents.append(packet) }
        }
        let (reply, line, event) = Self.response(to: bytes, passkey: passkey, adapter: adapter, peer: peer)
        switch event {
        case .userConfirmationRequest? where reply != nil: confirmationsAnswered += 1
        case .userPasskeyRequest? where reply != nil: passkeysAnswered += 1
        case .authenticationFailed?: failures += 1
        default: break
        }
        if let line { note(line) }
        if let reply {
            let out = reply.encoded
            if case .failure(let e) = out.withUnsafeBytes({ Sys.send(socket.fd, $0, flags: CInt(MSG_NOSIGNAL)) }) {
                note("agent: hci\(reply.index) sending reply failed: \(e)")
            }
        }
    }

    /// Stops answering and closes the socket. Idempotent.
    public func stop() { socket.stop() }
}
