// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import Glibc
import Synchronization
import Transport

/// An ``ATTBearer`` over the kernel's LE L2CAP fixed channel for ATT (CID 4).
///
/// A `SOCK_SEQPACKET` socket: one ATT PDU per record, as on a Unix socketpair, and the same
/// poll-then-`recv(MSG_DONTWAIT)` engine (never sleeping in `recv`, which misbehaves while the
/// socket is in BT_CONFIG during pairing). End of link comes from POLLHUP/POLLERR with the reason
/// taken from `SO_ERROR` (ECONNRESET: the peer disconnected; ETIMEDOUT: supervision timeout).
///
/// Security: ``raiseSecurity(to:)`` sets `BT_SECURITY` *after* the connection is up and waits for
/// the socket to become writable again (it sits in BT_CONFIG until the link is encrypted). On
/// kernels that ask user space to confirm even Just Works pairing, a ``PairingAgent`` must run
/// (or bluetoothd with an agent), otherwise SMP stalls until its 30 s timeout.
public final class L2CAPATTBearer: SteppedSecurityBearer, Sendable {
    /// Largest PDU accepted by default (ATT's maximum is 517; margin for hostile peers is cheap).
    public static let defaultMaxPDUSize = 1024

    public let adapter: BluetoothAdapter
    public let peer: BluetoothAddress
    public var peerDescription: String { peer.type == .public ? peer.description : "\(peer)/random" }
    /// How long ``raiseSecurity(to:)`` waits for pairing / encryption.
    public let securityTimeout: Duration
    private let channel: SeqpacketChannel

    /// Adopts a connected L2CAP ATT socket (from connect or accept).
    init(
        adopting fd: CInt, adapter: BluetoothAdapter, peer: BluetoothAddress, maxPDUSize: Int, securityTimeout: Duration
    ) {
        self.adapter = adapter
        self.peer = peer
        self.securityTimeout = securityTimeout
        let label = peer.type == .public ? peer.description : "\(peer)/random"
        // No shutdown() before close(): on Debian's 6.1 kernel, shutdown then close of an LE ATT
        // socket whose link is already gone hit a double free in hci_chan_del (kernel BUG seen in
        // the VM). close() alone is what BlueZ's own tools do.
        channel = SeqpacketChannel(
            adopting: fd, label: label, maxPDUSize: maxPDUSize,
            closeReason: BlueZErrors.closeReason, shutdownOnClose: false)
    }

    /// Connects to `peer`'s ATT channel through `adapter`.
    ///
    /// The connect is non-blocking with our own `timeout` (the kernel's own is 40 s). A SIGINT or
    /// SIGTERM caught by ``SignalFlags`` during the wait aborts it.
    ///
    /// - Throws: `TransportError` with what to do: Bluetooth absent (EAFNOSUPPORT), no adapter,
    ///   adapter down, permission, EBUSY (bluetoothd owns the channel), ECONNREFUSED, ETIMEDOUT, ….
    public static func connect(
        adapter: BluetoothAdapter, to peer: BluetoothAddress, timeout: Duration = .seconds(20),
        maxPDUSize: Int = defaultMaxPDUSize, securityTimeout: Duration = .seconds(35)
    ) throws(TransportError) -> L2CAPATTBearer {
        try connect(
            adapter: adapter, local: adapter.addressIfUp(), to: peer, timeout: timeout,
            maxPDUSize: maxPDUSize, securityTimeout: securityTimeout)
    }

    /// `connect` once the adapter's address is known (tests drive this one with mocks).
    static func connect(
        adapter: BluetoothAdapter, local: BluetoothAddress, to peer: BluetoothAddress, timeout: Duration,
        maxPDUSize: Int, securityTimeout: Duration
    ) throws(TransportError) -> L2CAPATTBearer {
        let pending = try PendingATTConnection.start(
            adapter: adapter, local: local, to: peer, maxPDUSize: maxPDUSize, securityTimeout: securityTimeout)
        guard let fd = pending.fileDescriptor else {
            throw TransportError(.notConnected, "connect(\(peer)): no socket")
        }
        let object = "\(adapter) → \(peer) (\(peer.type)), ATT CID 4"
        let deadline = MonotonicClock.now() + timeout
        while true {
            let left = deadline - MonotonicClock.now()
            if left <= .zero {
                pending.cancel()
                throw TransportError.system(
                    "connect", object, .timedOut,
                    hint: BlueZErrors.connectHint(.timedOut, peer: peer.description, adapter: adapter.name) ?? "")
            }
            switch Sys.poll(fd, events: Int16(POLLOUT), timeoutMS: Sys.pollMilliseconds(left)) {
            case .success(0): continue
            case .success(let revents):
                if revents & Int16(POLLOUT) == 0 && Sys.socketError(fd) == nil {
                    pending.cancel()
                    throw TransportError(.notConnected, "connect(\(object)): the link closed while connecting")
                }
                return try pending.finishBearer()
            case .failure(.interrupted):
                if SignalFlags.shared.isRaised(.int) || SignalFlags.shared.isRaised(.term) {
                    pending.cancel()
                    throw TransportError(.timedOut, "connect(\(object)): interrupted by a signal", errno: EINTR)
                }
            case .failure(let e):
                pending.cancel()
                throw TransportError.system("poll", object, e)
            }
        }
    }

    /// The kernel's `sockaddr_l2` for an LE ATT endpoint.
    static func l2Address(_ address: BluetoothAddress) -> sockaddr_l2 {
        var sa = sockaddr_l2()
        sa.l2_family = sa_family_t(AF_BLUETOOTH)
        sa.l2_psm = 0
        sa.l2_bdaddr = address.bdaddr
        sa.l2_cid = BT.attCID.littleEndian
        sa.l2_bdaddr_type = address.leAddressTypeCode
        return sa
    }

    public func send(_ pdu: [UInt8]) throws(TransportError) {
        try channel.send(pdu)
    }

    public func sendNow(_ pdu: [UInt8]) throws(TransportError) -> Bool {
        try channel.sendNow(pdu)
    }

    public var fileDescriptor: CInt? { channel.descriptor }

    public func receiveNow() throws(TransportError) -> BearerEvent? {
        try channel.receiveNow()
    }

    public func next(timeout: Duration?) throws(TransportError) -> BearerEvent {
        try channel.next(timeout: timeout)
    }

    /// Raises link security to at least `level` and waits until the link has it.
    ///
    /// Sets `BT_SECURITY` (the kernel starts SMP pairing or encrypts with a stored key), then waits
    /// for POLLOUT up to ``securityTimeout``. Call it after connecting — typically when the peer
    /// answered with ATT error 0x05 or 0x0F — not before: some devices drop the link when asked to
    /// pair unprompted.
    ///
    /// - Throws: `.securityRefused` when pairing is rejected (EACCES) or the link drops during it,
    ///   `.timedOut` when nobody answers (no pairing agent?). The bearer should be closed then:
    ///   a socket whose pairing failed can stay stuck.
    public func raiseSecurity(to level: SecurityLevel) throws(TransportError) {
        guard let fd = channel.descriptor else {
            throw TransportError(.notConnected, "raiseSecurity(\(peerDescription)): the bearer is closed")
        }
        // Right after the connection completes the kernel may not have the SMP channel yet:
        // ask again for a moment, waiting in poll so a dropped link ends the wait at once.
        let settle = MonotonicClock.now() + Self.securitySettle
        while true {
            switch try beginRaisingSecurity(to: level, lastTry: MonotonicClock.now() >= settle) {
            case .done: return
            case .notReady:
                if case .success(let r) = Sys.poll(fd, events: 0, timeoutMS: 50),
                    r & (Int16(POLLHUP) | Int16(POLLERR)) != 0
                {
                    throw TransportError(
                        .notConnected,
                        "raiseSecurity(\(peerDescription), BT_SECURITY \(level)): \(BlueZErrors.closeReason(Sys.socketError(fd)))"
                    )
                }
                continue
            case .pending:
                switch channel.waitWritable(timeout: securityTimeout) {
                case .success(let revents): return try finishRaisingSecurity(to: level, timedOut: revents == 0)
                case .failure(let e): throw TransportError.system("poll", "\(peerDescription), BT_SECURITY \(level)", e)
                }
            }
        }
    }

    /// How long after connecting a link that cannot take `BT_SECURITY` yet is asked again.
    public static let securitySettle: Duration = .seconds(3)

    /// ``raiseSecurity(to:)`` with its waits on `loop`, so that what else is served there (the
    /// pairing agent answering this very pairing) goes on meanwhile. The same steps, retries and
    /// errors; returns once the link has `level`.
    public func raiseSecurity(to level: SecurityLevel, on loop: EventLoop) throws(TransportError) {
        guard let fd = channel.descriptor else {
            throw TransportError(.notConnected, "raiseSecurity(\(peerDescription)): the bearer is closed")
        }
        let settle = MonotonicClock.now() + Self.securitySettle
        var outcome: Result<Void, TransportError>?
        var timer: EventLoop.TimerID?
        func end(_ result: Result<Void, TransportError>) {
            if let t = timer { loop.cancel(t) }
            timer = nil
            loop.unwatch(fd)
            if outcome == nil { outcome = result }
        }
        func finish(timedOut: Bool) {
            end(Result { () throws(TransportError) in try finishRaisingSecurity(to: level, timedOut: timedOut) })
        }
        func ask() {
            timer = nil
            do {
                switch try beginRaisingSecurity(to: level, lastTry: MonotonicClock.now() >= settle) {
                case .done: end(.success(()))
                case .notReady:
                    // Asked again shortly; a dropped link ends the wait at once.
                    try loop.watch(fd, readable: false, writable: false) { _ in
                        end(
                            .failure(
                                TransportError(
                                    .notConnected,
                                    "raiseSecurity(\(self.peerDescription), BT_SECURITY \(level)): \(BlueZErrors.closeReason(Sys.socketError(fd)))"
                                )))
                    }
                    timer = loop.schedule(at: MonotonicClock.now() + .milliseconds(50)) { ask() }
                case .pending:
                    try loop.watch(fd, readable: false, writable: true) { _ in finish(timedOut: false) }
                    timer = loop.schedule(at: MonotonicClock.now() + securityTimeout) { finish(timedOut: true) }
                }
            } catch {
                end(.failure(error))
            }
        }
        ask()
        do {
            try loop.run { outcome != nil }
        } catch {
            end(.failure(error))
        }
        try outcome?.get()
    }

    public func beginRaisingSecurity(to level: SecurityLevel, lastTry: Bool) throws(TransportError) -> SecurityProgress
    {
        guard let fd = channel.descriptor else {
            throw TransportError(.notConnected, "raiseSecurity(\(peerDescription)): the bearer is closed")
        }
        if securityLevel >= level { return .done }
        var request = bt_security()
        request.level = UInt8(level.rawValue)
        request.key_size = 0
        switch Sys.setsockopt(fd, level: BT.solBluetooth, name: BT.optSecurity, request) {
        case .success: return .pending
        // "Security requested but not available": no SMP channel on the link yet.
        case .failure(.invalidArgument) where !lastTry: return securityLevel >= level ? .done : .notReady
        case .failure(let e):
            throw TransportError.system(
                "setsockopt", "\(peerDescription), BT_SECURITY \(level)", e,
                hint: e == .invalidArgument
                    ? "the kernel has no SMP channel on this link: was \(adapter) brought up with `hciconfig up` (HCIDEVUP) rather than MGMT? Power-cycle it with `btmgmt -i \(adapter) power off` and `power on`"
                    : nil)
        }
    }

    public func finishRaisingSecurity(to level: SecurityLevel, timedOut: Bool) throws(TransportError) {
        let what = "\(peerDescription), BT_SECURITY \(level)"
        guard let fd = channel.descriptor else {
            throw TransportError(.notConnected, "raiseSecurity(\(what)): the bearer is closed")
        }
        if timedOut {
            throw TransportError(
                .timedOut,
                "raiseSecurity(\(what)): pairing did not finish within \(securityTimeout) — is a pairing agent running (cuff starts one when run as root; with bluetoothd, `bluetoothctl agent NoInputNoOutput` + `default-agent`)?",
                errno: ETIMEDOUT)
        }
        let revents: Int16
        switch Sys.poll(fd, events: Int16(POLLOUT), timeoutMS: 0) {
        case .success(let r): revents = r
        case .failure(let e): throw TransportError.system("poll", what, e)
        }
        if revents & (Int16(POLLERR) | Int16(POLLHUP)) != 0 || revents & Int16(POLLOUT) == 0 {
            let e = Sys.socketError(fd)
            throw TransportError(
                .securityRefused,
                "raiseSecurity(\(what)): \(BlueZErrors.closeReason(e))"
                    + (e == .permissionDenied
                        ? " — "
                            + (BlueZErrors.connectHint(.permissionDenied, peer: peer.description, adapter: adapter.name)
                                ?? "") : ""),
                errno: e?.rawValue)
        }
        let now = securityLevel
        guard now >= level else {
            throw TransportError(
                .securityRefused, "raiseSecurity(\(what)): the link came back at level \(now), below \(level)")
        }
    }

    /// The link's security now (`BT_SECURITY`); `.low` when unknown.
    public var securityLevel: SecurityLevel {
        guard let fd = channel.descriptor,
            case .success(let s) = Sys.getsockopt(
                fd, level: BT.solBluetooth, name: BT.optSecurity, initial: bt_security())
        else { return .low }
        return SecurityLevel(rawValue: Int(s.level)) ?? .low
    }

    public func close() {
        channel.close()
    }
}
