// SPDX-License-Identifier: GPL-2.0-or-later

/// One attribute of a server's database: handle, type, value and permissions (Core Vol 3 Part F §3.2).
public struct Attribute: Hashable, Sendable {
    public let handle: UInt16
    public let type: BluetoothUUID
    public var value: [UInt8]
    public let permissions: AttributePermissions

    public init(handle: UInt16, type: BluetoothUUID, value: [UInt8], permissions: AttributePermissions) {
        self.handle = handle
        self.type = type
        self.value = value
        self.permissions = permissions
    }
}
