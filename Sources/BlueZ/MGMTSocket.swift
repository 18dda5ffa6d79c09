// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import Glibc
import Synchronization
import Transport

/// The kernel's MGMT control socket (`HCI_CHANNEL_CONTROL`): send a command, wait for its reply.
///
/// Commands that change state need CAP_NET_ADMIN (the kernel answers "permission denied",
/// status 0x14, otherwise).
public final class MGMTSocket: Sendable {
    private let fdState: Mutex<CInt>

    /// The kernel's management channel (HCI_CHANNEL_CONTROL, no adapter), opened and bound.
    static func openControl() throws(TransportError) -> CInt {
        try HCISocket.openBound(
            device: BT.devNone, channel: BT.channelControl, socketLabel: "AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI (MGMT)",
            bindLabel: "HCI_CHANNEL_CONTROL", adapterName: "MGMT")
    }

    public init() throws(TransportError) {
        let fd = try MGMTSocket.openControl()
        fdState = Mutex(fd)
    }

    deinit { close() }

    /// Sends `command` and waits for its Command Complete / Command Status.
    ///
    /// - Returns: the return parameters of a successful Command Complete.
    /// - Throws: the MGMT status, explained, or `.timedOut`.
    @discardableResult
    public func execute(_ command: MGMTPacket, timeout: Duration = .seconds(5)) throws(TransportError) -> [UInt8] {
        guard let fd = fdState.openDescriptor else {
            throw TransportError(.notConnected, "MGMT: the socket is closed")
        }
        let name = "MGMT command 0x\(String(command.code, radix: 16)) on hci\(command.index)"
        let out = command.encoded
        if case .failure(let e) = out.withUnsafeBytes({ Sys.send(fd, $0, flags: CInt(MSG_NOSIGNAL)) }) {
            throw TransportError.system(
                "send", name, e, hint: BlueZErrors.adapterHint(e, adapter: "hci\(command.index)"))
        }
        let deadline = MonotonicClock.now() + timeout
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            let left = deadline - MonotonicClock.now()
            guard left > .zero else { throw TransportError(.timedOut, "\(name): no reply within \(timeout)") }
            switch Sys.poll(fd, events: Int16(POLLIN), timeoutMS: Sys.pollMilliseconds(left)) {
            case .success(0), .failure(.interrupted): continue
            case .success: break
            case .failure(let e): throw TransportError.system("poll", name, e)
            }
            guard case .success(let n) = buffer.withUnsafeMutableBytes({ Sys.recv(fd, $0, flags: CInt(MSG_DONTWAIT)) }),
                let packet = try? MGMTPacket(parsing: Array(buffer[0..<min(n, buffer.count)])),
                packet.index == command.index,
                let event = try? MGMTEvent(packet)
            else { continue }
            switch event {
            case .commandComplete(let op, let status, let ret) where op == command.code:
                guard status == 0 else { throw Self.refused(name, status, index: command.index) }
                return ret
            case .commandStatus(let op, let status) where op == command.code:
                throw Self.refused(name, status, index: command.index)
            default:
                continue
            }
        }
    }

    static func refused(_ name: String, _ status: UInt8, index: UInt16) -> TransportError {
        let hint: String? =
            switch status {
            case 0x11: BlueZErrors.adapterHint(.noSuchDevice, adapter: "hci\(index)")
            case 0x14: BlueZErrors.permissionHint
            case 0x12: BlueZErrors.adapterHint(.rfkill, adapter: "hci\(index)")
            case 0x0A: "the adapter is busy; try again"
            default: nil
            }
        return TransportError(
            .systemCall, "\(name): \(MGMTCommand.describe(status: status))" + (hint.map { " — " + $0 } ?? ""),
            mgmtStatus: status)
    }

    /// Closes the socket. Idempotent.
    public func close() {
        if let fd = fdState.takeDescriptor() { _ = Sys.close(fd) }
    }
}

extension MGMTCommand {
    /// Read Controller Information (0x0004).
    public static func readControllerInfo(index: UInt16) -> MGMTPacket {
        MGMTPacket(code: 0x0004, index: index)
    }

    /// Set Powered (0x0005).
    public static func setPowered(index: UInt16, _ on: Bool) -> MGMTPacket {
        MGMTPacket(code: 0x0005, index: index, parameters: [on ? 1 : 0])
    }

    /// Set Bondable (0x0009).
    public static func setBondable(index: UInt16, _ on: Bool) -> MGMTPacket {
        MGMTPacket(code: 0x0009, index: index, parameters: [on ? 1 : 0])
    }

    /// Current Settings bit 4 of a Read Controller Information reply: bondable.
    public static func isBondable(controllerInfo ret: [UInt8]) -> Bool? {
        guard ret.count >= 17 else { return nil }
        return ret[13] & 0x10 != 0
    }

    /// Current Settings bit 0 of a Read Controller Information reply: powered.
    public static func isPowered(controllerInfo ret: [UInt8]) -> Bool? {
        // address(6) version(1) manufacturer(2) supported(4) current(4) …
        guard ret.count >= 17 else { return nil }
        return ret[13] & 0x01 != 0
    }
}
