// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession

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
    public var log: (String) -> Void
    public var link: ((LinkEvent) -> Void)?

    public init(emit: @escaping (SessionOutput) throws -> Void, log: @escaping (String) -> Void, link: ((LinkEvent) -> Void)? = nil) {
        self.emit = emit
        self.log = log
        self.link = link
    }
}
