// SPDX-License-Identifier: GPL-2.0-or-later

/// A client's write of an application characteristic, as shown to a ``GATTServer`` write validator.
public struct GATTWriteRequest: Sendable, Hashable {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    public var value: [UInt8]
    /// True for a Write Request, false for a Write Command.
    public var withResponse: Bool
    /// The characteristic's CCCD state on this connection (both false when it has no CCCD), so a
    /// validator can answer ``ATTErrorCode/cccdImproperlyConfigured`` for a control point whose
    /// indications are off.
    public var notifyEnabled: Bool
    public var indicateEnabled: Bool
}
