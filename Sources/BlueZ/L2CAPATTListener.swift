// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import Glibc
import Synchronization
import Transport

/// Listens on an adapter's LE ATT channel (CID 4) and accepts centrals as ``L2CAPATTBearer``s.
///
/// bluetoothd listens on the same channel for its own GATT server and only one listener gets each
/// link: stop bluetoothd (as bleno requires) for a simulator to see connections reliably. Turning
/// advertising on is separate (``LEAdvertiser``).
public final class L2CAPATTListener: Sendable {
    public let adapter: BluetoothAdapter
    public let address: BluetoothAddress
    private let fdState: Mutex<CInt>
    private let maxPDUSize: Int
    private let securityTimeout: Duration

    /// Binds CID 4 on `adapter` (which must be up) and listens.
    ///
    /// - Throws: Bluetooth absent, no adapter, adapter down, permission, address in use.
    public init(
        adapter: BluetoothAdapter, backlog: CInt = 1,
        maxPDUSize: Int = L2CAPATTBearer.defaultMaxPDUSize, securityTimeout: Duration = .seconds(35)
    ) throws(TransportError) {
        self.adapter = adapter
        self.maxPDUSize = maxPDUSize
        self.securityTimeout = securityTimeout
        address = try adapter.addressIfUp()
        let fd: CInt
        switch Sys.socket(domain: BT.af, type: BT.seqpacket | BT.cloexec | BT.nonblock, protocol: BT.protoL2CAP) {
        case .success(let s): fd = s
        case .failure(let e): throw BlueZErrors.socket("AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP", e)
        }
        if case .failure(let e) = Sys.bind(fd, L2CAPATTBearer.l2Address(address)) {
            _ = Sys.close(fd)
            let hint =
                e == .addressInUse
                ? "another program already listens for ATT on \(adapter) — stop bluetoothd (`systemctl stop bluetooth`) or the other simulator"
                : BlueZErrors.adapterHint(e, adapter: adapter.name)
            throw TransportError.system("bind", "\(adapter) \(address), ATT CID 4", e, hint: hint)
        }
        if case .failure(let e) = Sys.listen(fd, backlog: backlog) {
            _ = Sys.close(fd)
            throw TransportError.system(
                "listen", "\(adapter), ATT CID 4", e, hint: BlueZErrors.adapterHint(e, adapter: adapter.name))
        }
        fdState = Mutex(fd)
    }

    deinit { close() }

    /// The listening socket, for an event loop to wait on (readable: a central is waiting to be
    /// accepted, with `accept(timeout: .zero)`); nil once closed.
    public var fileDescriptor: CInt? { fdState.openDescriptor }

    /// Waits up to `timeout` (nil: no limit) for a central to connect.
    ///
    /// - Returns: the bearer, or nil when the time ran out or a signal woke the wait.
    public func accept(timeout: Duration?) throws(TransportError) -> L2CAPATTBearer? {
        guard let fd = fdState.openDescriptor else {
            throw TransportError(.notConnected, "accept(\(adapter), ATT CID 4): the listener is closed")
        }
        switch Sys.poll(fd, events: Int16(POLLIN), timeoutMS: Sys.pollMilliseconds(timeout)) {
        case .success(0), .failure(.interrupted): return nil
        case .success(let revents) where revents & Int16(POLLIN) == 0:
            let e = Sys.socketError(fd)
            throw TransportError(
                .notConnected,
                "accept(\(adapter), ATT CID 4): the listening socket failed: \(BlueZErrors.closeReason(e)) — is \(adapter) still up?",
                errno: e?.rawValue)
        case .success: break
        case .failure(let e): throw TransportError.system("poll", "\(adapter), ATT CID 4", e)
        }
        var peer = sockaddr_l2()
        switch Sys.accept(fd, peer: &peer) {
        case .success(let client):
            let type: BluetoothAddress.AddressType = peer.l2_bdaddr_type == UInt8(BDADDR_LE_RANDOM) ? .random : .public
            return L2CAPATTBearer(
                adopting: client, adapter: adapter, peer: BluetoothAddress(peer.l2_bdaddr, type: type),
                maxPDUSize: maxPDUSize, securityTimeout: securityTimeout)
        case .failure(.wouldBlock), .failure(.connectionAborted):
            return nil
        case .failure(let e):
            throw TransportError.system("accept", "\(adapter), ATT CID 4", e)
        }
    }

    /// Stops listening. Idempotent.
    public func close() {
        if let fd = fdState.takeDescriptor() { _ = Sys.close(fd) }
    }
}
