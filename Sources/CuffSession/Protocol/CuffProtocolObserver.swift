// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// What a protocol's observer gives out while it follows a captured connection.
public enum ObserverOutput: Sendable, Hashable {
    case emit(SessionOutput)
    case log(String)
    /// Shown even with `--quiet`; no fault.
    case notice(String)
}

/// A cuff protocol followed as a third party: `cuff replay` and `cuff plot` feed it one captured
/// connection's ATT PDUs in both directions (with which side sent each), its start and end, and
/// the capture's time; it gives the records the live session would have given.
///
/// Pure, like ``CuffProtocolSession``. The standard Blood Pressure Service is followed by the
/// capture reader's own observer (`SessionObserver` in Capture); another protocol supplies one
/// through ``CuffProtocol/makeObserver(configuration:discovered:)``.
public protocol CuffProtocolObserver: Sendable {
    /// The earliest capture time at which ``advance(to:inclusive:into:)`` has something to do.
    var deadline: Timestamp? { get }
    var isFinished: Bool { get }
    /// Results handed out so far.
    var measurements: Int { get }
    /// The link came up (or the first PDU of a capture that starts mid-connection was seen).
    mutating func connected(at: EventTime, into out: inout [ObserverOutput])
    /// One ATT PDU; `fromCentral` says which side sent it.
    mutating func pdu(_ bytes: [UInt8], fromCentral: Bool, at: EventTime, into out: inout [ObserverOutput])
    /// Fires every deadline up to `time` (inclusive when `inclusive`).
    mutating func advance(to time: Timestamp, inclusive: Bool, into out: inout [ObserverOutput])
    /// The link went down.
    mutating func disconnected(_ why: String?, at: EventTime, into out: inout [ObserverOutput])
}
