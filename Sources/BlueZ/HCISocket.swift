// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import Glibc
import Synchronization
import Transport

/// Which packets a raw HCI socket lets through (`struct hci_filter`).
public struct HCIFilter: Sendable, Hashable {
    public var typeMask: UInt32 = 0
    public var eventMask: (UInt32, UInt32) = (0, 0)
    public var opcode: UInt16 = 0

    /// Only HCI event packets (type 0x04) with the given event codes.
    public init(events: [UInt8]) {
        typeMask = 1 << 0x04
        for e in events {
            if e < 32 { eventMask.0 |= 1 << UInt32(e) } else if e < 64 { eventMask.1 |= 1 << UInt32(e - 32) }
        }
    }

    /// Command Complete, Command Status, Disconnection Complete, LE Meta.
    public static let leDefault = HCIFilter(events: [0x0E, 0x0F, 0x05, 0x3E])

    var cValue: hci_filter {
        var f = hci_filter()
        f.type_mask = typeMask
        f.event_mask = eventMask
        f.opcode = opcode
        return f
    }

    public static func == (a: HCIFilter, b: HCIFilter) -> Bool {
        a.typeMask == b.typeMask && a.eventMask == b.eventMask && a.opcode == b.opcode
    }

    public func hash(into h: inout Hasher) {
        h.combine(typeMask)
        h.combine(eventMask.0)
        h.combine(eventMask.1)
        h.combine(opcode)
    }
}

/// A raw HCI socket bound to one adapter (`HCI_CHANNEL_RAW`): send commands, read events.
///
/// Sending commands needs CAP_NET_RAW. The kernel stays in charge of the adapter and sees the
/// results of our commands too, so its own state (scanning, advertising) stays consistent.
public final class HCISocket: Sendable {
    public let adapter: BluetoothAdapter
    private let fdState: Mutex<CInt>

    /// A raw HCI socket bound to `device` (an adapter index, or `BT.devNone`) on `channel`: the
    /// one place HCI and MGMT sockets are opened, with the same errors and hints for all.
    static func openBound(
        device: UInt16, channel: UInt16, socketLabel: String, bindLabel: String, adapterName: String
    ) throws(TransportError) -> CInt {
        let fd: CInt
        switch Sys.socket(domain: BT.af, type: BT.raw | BT.cloexec, protocol: BT.protoHCI) {
        case .success(let s): fd = s
        case .failure(let e): throw BlueZErrors.socket(socketLabel, e)
        }
        var address = sockaddr_hci()
        address.hci_family = sa_family_t(AF_BLUETOOTH)
        address.hci_dev = device
        address.hci_channel = channel
        if case .failure(let e) = Sys.bind(fd, address) {
            _ = Sys.close(fd)
            throw TransportError.system("bind", bindLabel, e, hint: BlueZErrors.adapterHint(e, adapter: adapterName))
        }
        return fd
    }

    /// Opens and binds the socket; lets through `filter`'s events only.
    public init(adapter: BluetoothAdapter, filter: HCIFilter = .leDefault) throws(TransportError) {
        self.adapter = adapter
        let fd = try HCISocket.openBound(
            device: adapter.index, channel: BT.channelRaw, socketLabel: "AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI",
            bindLabel: "\(adapter), HCI_CHANNEL_RAW", adapterName: adapter.name)
        if case .failure(let e) = Sys.setsockopt(fd, level: BT.solHCI, name: BT.optHCIFilter, filter.cValue) {
            _ = Sys.close(fd)
            throw TransportError.system("setsockopt", "\(adapter), HCI_FILTER", e)
        }
        fdState = Mutex(fd)
    }

    deinit { close() }

    private func descriptor(_ call: String) throws(TransportError) -> CInt {
        guard let fd = fdState.openDescriptor else {
            throw TransportError(.notConnected, "\(call)(\(adapter), HCI): the socket is closed")
        }
        return fd
    }

    /// Writes one command packet.
    public func send(_ command: HCICommand) throws(TransportError) {
        let fd = try descriptor("send")
        let packet = command.packet
        if case .failure(let e) = packet.withUnsafeBytes({ Sys.send(fd, $0, flags: CInt(MSG_NOSIGNAL)) }) {
            throw TransportError.system(
                "send", "\(adapter), \(command)", e, hint: BlueZErrors.adapterHint(e, adapter: adapter.name))
        }
    }

    /// Sends `command` and waits for its Command Complete (or failing Command Status).
    ///
    /// - Returns: the return parameters after the status byte.
    /// - Throws: `TransportError` naming the HCI status when the controller refuses, `.timedOut`
    ///   when it doesn't answer. Unrelated events read meanwhile are dropped.
    @discardableResult
    public func execute(_ command: HCICommand, timeout: Duration = .seconds(2)) throws(TransportError) -> [UInt8] {
        try send(command)
        let deadline = MonotonicClock.now() + timeout
        while true {
            let left = deadline - MonotonicClock.now()
            guard left > .zero, let event = try nextEvent(timeout: left) else {
                if MonotonicClock.now() < deadline { continue }
                throw TransportError(.timedOut, "\(adapter): no answer to \(command) within \(timeout)")
            }
            switch event {
            case .commandComplete(let op, let ret) where op == command.opcode:
                let status = ret.first ?? 0
                guard status == 0 else { throw HCISocket.refused(command, status, adapter: adapter) }
                return Array(ret.dropFirst())
            case .commandStatus(let status, let op) where op == command.opcode && status != 0:
                throw HCISocket.refused(command, status, adapter: adapter)
            default:
                continue
            }
        }
    }

    static func refused(_ command: HCICommand, _ status: UInt8, adapter: BluetoothAdapter) -> TransportError {
        var message = "\(adapter) refused \(command): \(HCIStatus.describe(status))"
        if status == HCIStatus.commandDisallowed {
            message +=
                " — the controller is busy with another scan/advertising set (bluetoothd, or the kernel using extended commands); stop bluetoothd or use `btmgmt`"
        }
        return TransportError(.systemCall, message, hciStatus: status)
    }

    /// The next event, or nil when `timeout` passed or a signal woke the wait.
    public func nextEvent(timeout: Duration?) throws(TransportError) -> HCIEvent? {
        let fd = try descriptor("recv")
        switch Sys.poll(fd, events: Int16(POLLIN), timeoutMS: Sys.pollMilliseconds(timeout)) {
        case .success(0), .failure(.interrupted): return nil
        case .success(let revents) where revents & Int16(POLLIN) == 0:
            let e = Sys.socketError(fd)
            throw TransportError(
                .notConnected,
                "\(adapter): HCI socket failed: \(e.map(\.description) ?? "hang-up") — was the adapter removed?",
                errno: e?.rawValue)
        case .success: break
        case .failure(let e): throw TransportError.system("poll", "\(adapter), HCI", e)
        }
        var buffer = [UInt8](repeating: 0, count: 260)
        let r = buffer.withUnsafeMutableBytes { Sys.recv(fd, $0, flags: CInt(MSG_DONTWAIT)) }
        switch r {
        case .success(let n):
            do {
                return try HCIEvent(packet: Array(buffer[0..<min(n, buffer.count)]))
            } catch {
                return .other(code: 0xFF, parameters: [])  // not an event we can read: skip it
            }
        case .failure(.wouldBlock), .failure(.interrupted):
            return nil
        case .failure(let e):
            throw TransportError.system(
                "recv", "\(adapter), HCI", e, hint: BlueZErrors.adapterHint(e, adapter: adapter.name))
        }
    }

    /// Closes the socket. Idempotent.
    public func close() {
        if let fd = fdState.takeDescriptor() { _ = Sys.close(fd) }
    }
}
