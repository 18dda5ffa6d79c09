// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import CuffLogging
import Glibc
import Logging
import Synchronization
import Transport

/// Answers the kernel's pairing questions on the MGMT control socket, on its own thread.
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
/// Start it before raising security; events are queued from `init` on, so there is no race.
public final class PairingAgent: Sendable {
    private struct State {
        var log: [String] = []
        var confirmations = 0
        var passkeys = 0
        var failures = 0
        var keyEvents: [MGMTPacket] = []
    }

    /// The passkey given for User Passkey Requests.
    public let passkey: UInt32
    /// Only answer for this adapter (nil: all).
    public let adapter: BluetoothAdapter?
    /// Only answer for this peer (nil: any, e.g. the simulator, which takes any central).
    public let peer: BluetoothAddress?
    private let state = Mutex(State())
    private let mgmtFD: CInt
    private let wakeFDs: (CInt, CInt)
    private let thread: Mutex<OSThread?> = Mutex(nil)
    /// Where each line goes too (the command's stderr).
    private let logger: Logger

    /// Opens the control socket and starts answering.
    ///
    /// - Parameters:
    ///   - passkey: 0…999999, for passkey entry.
    ///   - logger: told (on the agent's thread) one line per event handled.
    /// - Throws: Bluetooth absent, no CAP_NET_ADMIN (with what to do), thread creation failure.
    public init(
        adapter: BluetoothAdapter? = nil, peer: BluetoothAddress? = nil, passkey: UInt32 = 0, logger: Logger = .silent
    ) throws(TransportError) {
        precondition(passkey <= 999_999, "a passkey has six decimal digits")
        self.adapter = adapter
        self.peer = peer
        self.passkey = passkey
        self.logger = logger
        if !Self.hasNetAdmin() {
            throw TransportError(
                .systemCall,
                "pairing agent: this process lacks CAP_NET_ADMIN, so the kernel won't send it pairing requests — \(BlueZErrors.permissionHint)",
                errno: EPERM)
        }
        let fd = try MGMTSocket.openControl()
        let wake: (CInt, CInt)
        switch Sys.socketpair(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue) | BT.cloexec) {
        case .success(let pair): wake = pair
        case .failure(let e):
            _ = Sys.close(fd)
            throw TransportError.system("socketpair", "pairing agent wake-up", e)
        }
        mgmtFD = fd
        wakeFDs = wake
        guard let t = OSThread.start({ [self] in run() }) else {
            _ = Sys.close(fd)
            _ = Sys.close(wake.0)
            _ = Sys.close(wake.1)
            throw TransportError(.systemCall, "pairing agent: cannot start a thread")
        }
        thread.withLock { $0 = t }
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
    public var log: [String] { state.withLock { $0.log } }
    /// How many confirmations were accepted.
    public var confirmationsAnswered: Int { state.withLock { $0.confirmations } }
    /// How many passkey requests were answered.
    public var passkeysAnswered: Int { state.withLock { $0.passkeys } }
    /// The key events (New Long Term Key, New IRK, New CSRK) of this agent's adapter, in order:
    /// what the raw path's bond store keeps.
    public var keyEvents: [MGMTPacket] { state.withLock { $0.keyEvents } }
    /// How many pairings the kernel reported as failed.
    public var failures: Int { state.withLock { $0.failures } }

    private func note(_ line: String) {
        state.withLock { s in
            if s.log.count < 1000 { s.log.append(line) }
        }
        logger.info("\(line)")
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            var fds = [
                pollfd(fd: mgmtFD, events: Int16(POLLIN), revents: 0),
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
            if fds[0].revents & Int16(POLLIN) != 0 {
                let r = buffer.withUnsafeMutableBytes { Sys.recv(mgmtFD, $0, flags: CInt(MSG_DONTWAIT)) }
                guard case .success(let n) = r else { continue }
                handle(Array(buffer[0..<min(n, buffer.count)]))
            } else if fds[0].revents != 0 {
                note("agent: MGMT socket failed; stopping")
                return
            }
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
            state.withLock { s in
                if s.keyEvents.count < 64 { s.keyEvents.append(packet) }
            }
        }
        let (reply, line, event) = Self.response(to: bytes, passkey: passkey, adapter: adapter, peer: peer)
        switch event {
        case .userConfirmationRequest? where reply != nil: state.withLock { $0.confirmations += 1 }
        case .userPasskeyRequest? where reply != nil: state.withLock { $0.passkeys += 1 }
        case .authenticationFailed?: state.withLock { $0.failures += 1 }
        default: break
        }
        if let line { note(line) }
        if let reply {
            let out = reply.encoded
            if case .failure(let e) = out.withUnsafeBytes({ Sys.send(mgmtFD, $0, flags: CInt(MSG_NOSIGNAL)) }) {
                note("agent: hci\(reply.index) sending reply failed: \(e)")
            }
        }
    }

    /// Stops the thread and closes the socket. Idempotent.
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
        _ = Sys.close(mgmtFD)
        _ = Sys.close(wakeFDs.0)
        _ = Sys.close(wakeFDs.1)
    }
}
