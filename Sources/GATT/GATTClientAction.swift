// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// What a ``GATTClient`` asks its driver to do, or tells the application.
public enum GATTClientAction: Sendable, Hashable {
    /// Send this PDU on the bearer.
    case send([UInt8])
    /// A procedure finished.
    case completed(GATTRequestID, Result<GATTClientResponse, GATTClientError>)
    /// A Handle Value Notification.
    case notification(handle: UInt16, value: [UInt8])
    /// A Handle Value Indication. The client does not confirm it: call
    /// ``GATTClient/confirmIndication()`` once the value is safe.
    case indication(handle: UInt16, value: [UInt8])
    /// The server wants more security: raise the link to this level, then call
    /// ``GATTClient/securityRaised(level:now:)`` or ``GATTClient/securityRefused(now:)``.
    case raiseSecurity(to: SecurityLevel)
    /// The bearer is unusable (timeout, protocol violation): close it. Every procedure has completed.
    case failed(GATTClientError)
}
