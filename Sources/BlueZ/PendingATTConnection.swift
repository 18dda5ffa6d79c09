// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import Glibc
import Transport

/// An LE ATT connection under way, for an event loop: `connect()` on a non-blocking L2CAP socket
/// makes the kernel scan for the peer in the background and connect as soon as it advertises (what
/// BlueZ's auto-connect does), so one watcher can wait for many cuffs at once. The descriptor
/// turns writable when the link is up or the attempt failed; then ``finish()`` says which. An
/// attempt that saw no advertisement ends with ETIMEDOUT after the kernel's connect timeout.
public final class PendingATTConnection: PendingConnection {
    public let adapter: BluetoothAdapter
    public let peer: BluetoothAddress
    /// The socket to watch for writability; nil once finished or cancelled.
    public private(set) var fileDescriptor: CInt?
    let maxPDUSize: Int
    let securityTimeout: Duration

    /// Starts connecting to `peer` through `adapter`.
    ///
    /// - Throws: `TransportError` at once when the socket cannot be made or the adapter is down.
    public static func start(
        adapter: BluetoothAdapter, to peer: BluetoothAddress, maxPDUSize: Int = L2CAPATTBearer.defaultMaxPDUSize,
        securityTimeout: Duration = .seconds(35)
    ) throws(TransportError) -> PendingATTConnection {
        try start(
            adapter: adapter, local: adapter.addressIfUp(), to: peer, maxPDUSize: maxPDUSize,
            securityTimeout: securityTimeout)
    }

    /// `start` once the adapter's address is known (tests drive this one with mocks).
    static func start(
        adapter: BluetoothAdapter, local: BluetoothAddress, to peer: BluetoothAddress, maxPDUSize: Int,
        securityTimeout: Duration
    ) throws(TransportError) -> PendingATTConnection {
        let fd: CInt
        switch Sys.socket(domain: BT.af, type: BT.seqpacket | BT.cloexec | BT.nonblock, protocol: BT.protoL2CAP) {
        case .success(let s): fd = s
        case .failure(let e): throw BlueZErrors.socket("AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP", e)
        }
        if case .failure(let e) = Sys.bind(fd, L2CAPATTBearer.l2Address(local)) {
            _ = Sys.close(fd)
            throw TransportError.system(
                "bind", "\(adapter) \(local), ATT CID 4", e, hint: BlueZErrors.adapterHint(e, adapter: adapter.name))
        }
        switch Sys.connect(fd, L2CAPATTBearer.l2Address(peer), retryOnInterrupt: false) {
        case .success, .failure(.nowInProgress), .failure(.interrupted): break
        case .failure(let e):
            _ = Sys.close(fd)
            throw TransportError.system(
                "connect", "\(adapter) → \(peer) (\(peer.type)), ATT CID 4", e,
                hint: BlueZErrors.connectHint(e, peer: peer.description, adapter: adapter.name))
        }
        return PendingATTConnection(
            fd: fd, adapter: adapter, peer: peer, maxPDUSize: maxPDUSize, securityTimeout: securityTimeout)
    }

    init(fd: CInt, adapter: BluetoothAdapter, peer: BluetoothAddress, maxPDUSize: Int, securityTimeout: Duration) {
        fileDescriptor = fd
        self.adapter = adapter
        self.peer = peer
        self.maxPDUSize = maxPDUSize
        self.securityTimeout = securityTimeout
    }

    deinit { cancel() }

    /// Whether the connection is still under way (the socket not writable yet).
    public var isPending: Bool {
        guard let fd = fileDescriptor, case .success(let r) = Sys.poll(fd, events: Int16(POLLOUT), timeoutMS: 0) else {
            return false
        }
        return r == 0
    }

    /// Once the descriptor is writable: the connected bearer, or why the attempt failed (ETIMEDOUT:
    /// the peer did not advertise in time).
    public func finish() throws(TransportError) -> any PollableBearer { try finishBearer() }

    /// ``finish()`` with the concrete bearer.
    public func finishBearer() throws(TransportError) -> L2CAPATTBearer {
        guard let fd = fileDescriptor else { throw TransportError(.notConnected, "connect(\(peer)): already finished") }
        fileDescriptor = nil
        if let e = Sys.socketError(fd) {
            _ = Sys.close(fd)
            throw TransportError.system(
                "connect", "\(adapter) → \(peer) (\(peer.type)), ATT CID 4", e,
                hint: BlueZErrors.connectHint(e, peer: peer.description, adapter: adapter.name))
        }
        return L2CAPATTBearer(
            adopting: fd, adapter: adapter, peer: peer, maxPDUSize: maxPDUSize, securityTimeout: securityTimeout)
    }

    /// Gives up (closes the socket; the kernel stops scanning for the peer).
    public func cancel() {
        guard let fd = fileDescriptor else { return }
        fileDescriptor = nil
        _ = Sys.close(fd)
    }
}
