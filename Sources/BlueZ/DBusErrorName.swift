// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// A D-Bus error name (`org.bluez.Error.NotPermitted`), parsed once from the error reply into
/// ``TransportError/remoteErrorName`` and matched by value, never by searching message text.
///
/// A struct, so names cuff does not know survive and new ones are not a breaking change.
public struct DBusErrorName: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// bluetoothd: the object (a device) does not exist.
    public static let doesNotExist = DBusErrorName(rawValue: "org.bluez.Error.DoesNotExist")
    public static let notAuthorized = DBusErrorName(rawValue: "org.bluez.Error.NotAuthorized")
    public static let notPermitted = DBusErrorName(rawValue: "org.bluez.Error.NotPermitted")
    public static let invalidOffset = DBusErrorName(rawValue: "org.bluez.Error.InvalidOffset")
    public static let notSupported = DBusErrorName(rawValue: "org.bluez.Error.NotSupported")
    public static let invalidValueLength = DBusErrorName(rawValue: "org.bluez.Error.InvalidValueLength")
    /// The bus: no object at that path.
    public static let unknownObject = DBusErrorName(rawValue: "org.freedesktop.DBus.Error.UnknownObject")
    /// The bus: nobody owns that name (bluetoothd is not running).
    public static let nameHasNoOwner = DBusErrorName(rawValue: "org.freedesktop.DBus.Error.NameHasNoOwner")
}

extension TransportError {
    /// ``remoteErrorName`` as a ``DBusErrorName``.
    public var dbusError: DBusErrorName? { remoteErrorName.map(DBusErrorName.init(rawValue:)) }
}
