// SPDX-License-Identifier: GPL-2.0-or-later

/// What a ``GATTServer`` asks its driver to do, or tells the application.
public enum GATTServerAction: Sendable, Hashable {
    /// Send this PDU on the bearer.
    case send([UInt8])
    /// A client wrote an application characteristic value (CCCD writes are reported as
    /// ``subscriptionChanged(valueHandle:uuid:notify:indicate:)`` instead).
    case written(handle: UInt16, uuid: BluetoothUUID, value: [UInt8], withResponse: Bool)
    /// A client wrote the CCCD of the characteristic whose value is at `valueHandle`.
    case subscriptionChanged(valueHandle: UInt16, uuid: BluetoothUUID, notify: Bool, indicate: Bool)
    /// The client confirmed the indication of `handle`.
    case indicationConfirmed(handle: UInt16)
    /// The indication of `handle` was not confirmed within 30 s; the server sends no more
    /// indications on this link (Core Vol 3 Part F §3.3.3). The driver should close the bearer.
    case indicationTimedOut(handle: UInt16)
    /// A notification or indication was not sent.
    case dropped(handle: UInt16, reason: DropReason)
    /// The client broke the protocol (for example a confirmation with no indication in flight);
    /// the PDU was ignored.
    case protocolViolation(String)

    public enum DropReason: String, Sendable, Hashable {
        /// The client has not enabled it in the CCCD.
        case notSubscribed = "not_subscribed"
        /// The handle is not a characteristic value that supports it.
        case notSupported = "not_supported"
        /// The indication queue is full: an error the application should hear about.
        case queueFull = "queue_full"
        /// An earlier indication timed out, so indications are stopped on this link.
        case transactionTimedOut = "transaction_timed_out"
    }
}
