// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession
import Logging

/// What crossed the link, for recording a session as a capture.
public enum LinkEvent: Sendable, Hashable {
    case connected(EventTime)
    /// `sent`: from this side (the central in `cuff measure`) to the peer.
    case pdu(sent: Bool, [UInt8], EventTime)
    case disconnected(EventTime)
}

/// Where a session's outputs go: sinks (durable before returning), the progress display, a recorder.
public struct SessionHooks {
    /// Called for every record, in order; must make measurements durable before returning.
    public var emit: (SessionOutput) throws -> Void
    /// Where the session's lines go (the machines' `.log` actions, the driver's own events), at `.info`.
    public var logger: Logger
    public var link: ((LinkEvent) -> Void)?

    public init(emit: @escaping (SessionOutput) throws -> Void, log: Logger, link: ((LinkEvent) -> Void)? = nil) {
        self.emit = emit
        self.logger = log
        self.link = link
    }

    /// One line of the session.
    public func log(_ line: String) { logger.info("\(line)") }
}
