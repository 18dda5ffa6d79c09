// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// What a cuff protocol's central session asks its driver to do, in order.
///
/// The driver executes each action before the next. `.emit` of a measurement must be durable
/// before any later `.send` goes out: nothing is confirmed to a cuff before it is stored.
public enum CentralAction: Sendable, Hashable {
    /// Send this ATT PDU.
    case send([UInt8])
    /// Raise the link's security, then call ``CuffProtocolSession/securityRaised(_:at:)`` or
    /// ``CuffProtocolSession/securityRefused(_:at:)``.
    case raiseSecurity(SecurityLevel)
    /// Hand this to every sink; it must be durable before the next `.send` goes out.
    case emit(SessionOutput)
    /// Close the link.
    case disconnect
    case log(String)
    /// The session is over with this outcome (the driver closes the link once nothing waits).
    case finished(SessionOutcome)
}
