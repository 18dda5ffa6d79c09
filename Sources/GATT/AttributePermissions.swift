// SPDX-License-Identifier: GPL-2.0-or-later

/// What a server lets a client do with an attribute (Core Vol 3 Part F §3.2.5, Part G §8.1).
///
/// Permissions are not on the wire; the server enforces them. Encryption needs a link at
/// ``SecurityLevel/medium`` or above, authentication ``SecurityLevel/high`` or above.
public struct AttributePermissions: OptionSet, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let read = AttributePermissions(rawValue: 0x01)
    public static let write = AttributePermissions(rawValue: 0x02)
    public static let readEncrypted = AttributePermissions(rawValue: 0x04)
    public static let writeEncrypted = AttributePermissions(rawValue: 0x08)
    public static let readAuthenticated = AttributePermissions(rawValue: 0x10)
    public static let writeAuthenticated = AttributePermissions(rawValue: 0x20)

    public static let readWrite: AttributePermissions = [.read, .write]
    /// Reads and writes need an encrypted link.
    public static let encryptionRequired: AttributePermissions = [.readEncrypted, .writeEncrypted]
    /// Reads and writes need an authenticated (MITM-protected) link.
    public static let authenticationRequired: AttributePermissions = [.readAuthenticated, .writeAuthenticated]
}
