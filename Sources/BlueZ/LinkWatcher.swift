// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// Watches one adapter's raw HCI events for LE links where we are the peripheral: the
/// simulator's way to notice a central that connected but whose ATT channel went to someone
/// else (bluetoothd, when its ATT listener was registered after ours), instead of waiting
/// silently for it.
public final class LinkWatcher {
    /// An LE link where the local controller is the peripheral.
    public struct IncomingLink: Sendable, Hashable {
        public var handle: UInt16
        public var peer: BluetoothAddress
    }

    /// What one HCI event says about incoming links.
    public enum Notice: Sendable, Hashable {
        case connected(IncomingLink)
        case disconnected(handle: UInt16)
    }

    private let socket: HCISocket

    public init(adapter: BluetoothAdapter) throws(TransportError) {
        socket = try HCISocket(adapter: adapter, filter: HCIFilter(events: [0x05, 0x3E]))
    }

    deinit { socket.close() }

    /// LE Connection Complete (subevent 0x01) and LE Enhanced Connection Complete (0x0A) with
    /// status 0 and role peripheral (0x01); Disconnection Complete. Pure.
    public static func notice(_ event: HCIEvent) -> Notice? {
        switch event {
        case .leMeta(let sub, let p) where (sub == 0x01 || sub == 0x0A) && p.count >= 11:
            guard p[0] == 0, p[3] == 0x01 else { return nil }
            let handle = (UInt16(p[1]) | UInt16(p[2]) << 8) & 0x0FFF
            let type: BluetoothAddress.AddressType = p[4] & 0x01 == 1 ? .random : .public
            return .connected(
                IncomingLink(handle: handle, peer: BluetoothAddress(littleEndianOctets: p[5..<11], type: type)))
        case .disconnectionComplete(let status, let handle, _) where status == 0:
            return .disconnected(handle: handle)
        default:
            return nil
        }
    }

    /// The notices waiting now (never blocks).
    public func drain() throws(TransportError) -> [Notice] {
        var out: [Notice] = []
        while out.count < 64, let event = try socket.nextEvent(timeout: .zero) {
            if let n = Self.notice(event) { out.append(n) }
        }
        return out
    }

    public func close() { socket.close() }
}
