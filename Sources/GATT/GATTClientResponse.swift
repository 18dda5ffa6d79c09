// SPDX-License-Identifier: GPL-2.0-or-later

/// What a procedure produced.
public enum GATTClientResponse: Sendable, Hashable {
    /// Exchange MTU: the ATT_MTU now in use.
    case mtu(UInt16)
    /// Discovery.
    case profile(GATTProfile)
    /// Read (all parts of a long value).
    case value([UInt8])
    /// Write, write without response, subscribe.
    case written
}
