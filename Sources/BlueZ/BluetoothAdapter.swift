// SPDX-License-Identifier: GPL-2.0-or-later

import CBlueZ
import CuffCore
import Glibc
import Transport

/// A local Bluetooth controller, `hciN`.
public struct BluetoothAdapter: Sendable, Hashable, CustomStringConvertible {
    /// The kernel's device index (the N of hciN).
    public let index: UInt16

    public init(index: UInt16) { self.index = index }

    /// Parses `hci0` or `0`.
    ///
    /// - Throws: `TransportError(.unsupported)` for anything else.
    public init(parsing text: String) throws(TransportError) {
        let digits = text.hasPrefix("hci") ? Substring(text.dropFirst(3)) : Substring(text)
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber), let n = UInt16(digits),
            n < 0xFFFF
        else {
            throw TransportError(.unsupported, "invalid adapter \"\(text)\": expected hciN, e.g. hci0")
        }
        index = n
    }

    /// `hciN`.
    public var name: String { "hci\(index)" }
    public var description: String { name }

    /// What the kernel reports about an adapter.
    public struct Info: Sendable, Hashable {
        public var adapter: BluetoothAdapter
        /// The controller's public address (00:00:00:00:00:00 until it has been up once).
        public var address: BluetoothAddress
        /// HCI_UP: powered and usable.
        public var isUp: Bool
    }

    /// Reads the adapter's address and state (`HCIGETDEVINFO`).
    ///
    /// - Throws: no Bluetooth in the kernel (EAFNOSUPPORT), no such adapter (ENODEV), ….
    public func info() throws(TransportError) -> Info {
        let fd = try Self.controlSocket()
        defer { _ = Sys.close(fd) }
        var di = hci_dev_info()
        di.dev_id = index
        let r = withUnsafeMutableBytes(of: &di) { Sys.ioctl(fd, cuff_ioctl_hcigetdevinfo(), $0.baseAddress!) }
        if case .failure(let e) = r {
            throw TransportError.system(
                "ioctl", "\(name), HCIGETDEVINFO", e, hint: BlueZErrors.adapterHint(e, adapter: name))
        }
        return Info(adapter: self, address: BluetoothAddress(di.bdaddr), isUp: di.flags & (1 << UInt32(HCI_UP)) != 0)
    }

    /// The adapter's address, checking that it is up.
    ///
    /// - Throws: as ``info()``, and "adapter down" with what to do.
    public func addressIfUp() throws(TransportError) -> BluetoothAddress {
        let i = try info()
        guard i.isUp else {
            throw TransportError(
                .notConnected, "\(name) is down — " + (BlueZErrors.adapterHint(.networkDown, adapter: name) ?? ""),
                errno: ENETDOWN)
        }
        return i.address
    }

    /// Powers the adapter on through MGMT (Set Powered), as `btmgmt power on` and bluetoothd do.
    /// Does nothing when MGMT already reports it powered. Needs CAP_NET_ADMIN.
    ///
    /// Not `HCIDEVUP` (`hciconfig up`): that path brings the controller up without the kernel's
    /// "powered" sequence, which is where the LE SMP channel is registered — raising security on
    /// such an adapter fails with EINVAL ("security requested but not available").
    public func powerOn() throws(TransportError) {
        let mgmt = try MGMTSocket()
        defer { mgmt.close() }
        let info = try mgmt.execute(MGMTCommand.readControllerInfo(index: index))
        if MGMTCommand.isPowered(controllerInfo: info) == true { return }
        try mgmt.execute(MGMTCommand.setPowered(index: index, true), timeout: .seconds(10))
    }

    /// Makes the adapter bondable (MGMT Set Bondable), as bluetoothd does at start: without it
    /// the kernel pairs without bonding, hands out no keys to keep and drops them at disconnect.
    /// Returns whether it changed anything. Needs CAP_NET_ADMIN.
    @discardableResult
    public func makeBondable() throws(TransportError) -> Bool {
        let mgmt = try MGMTSocket()
        defer { mgmt.close() }
        let info = try mgmt.execute(MGMTCommand.readControllerInfo(index: index))
        if MGMTCommand.isBondable(controllerInfo: info) == true { return false }
        try mgmt.execute(MGMTCommand.setBondable(index: index, true))
        return true
    }

    /// All adapters the kernel knows (`HCIGETDEVLIST`), in index order.
    public static func list() throws(TransportError) -> [BluetoothAdapter] {
        let fd = try controlSocket()
        defer { _ = Sys.close(fd) }
        // struct hci_dev_list_req { u16 dev_num; struct hci_dev_req { u16 dev_id; u32 dev_opt; } dev_req[]; }
        let maxDevices = 16
        var buffer = [UInt8](repeating: 0, count: 4 + 8 * maxDevices)
        buffer[0] = UInt8(maxDevices)
        let r = buffer.withUnsafeMutableBytes { Sys.ioctl(fd, cuff_ioctl_hcigetdevlist(), $0.baseAddress!) }
        if case .failure(let e) = r {
            throw TransportError.system("ioctl", "HCIGETDEVLIST", e, hint: BlueZErrors.adapterHint(e, adapter: "hci*"))
        }
        let count = min(Int(buffer[0]) | Int(buffer[1]) << 8, maxDevices)
        return (0..<count).map { i in
            BluetoothAdapter(index: UInt16(buffer[4 + 8 * i]) | UInt16(buffer[5 + 8 * i]) << 8)
        }.sorted { $0.index < $1.index }
    }

    /// An unbound raw HCI socket, for ioctls.
    static func controlSocket() throws(TransportError) -> CInt {
        switch Sys.socket(domain: BT.af, type: BT.raw | BT.cloexec, protocol: BT.protoHCI) {
        case .success(let fd): return fd
        case .failure(let e): throw BlueZErrors.socket("AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI", e)
        }
    }
}
