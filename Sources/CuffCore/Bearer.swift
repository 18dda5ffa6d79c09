// SPDX-License-Identifier: GPL-2.0-or-later

/// Link-layer security a bearer can be asked for; mirrors BlueZ's BT_SECURITY levels.
public enum SecurityLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case low = 1      // no encryption
    case medium = 2   // encrypted, unauthenticated (Just Works)
    case high = 3     // encrypted, authenticated (MITM protection)
    case fips = 4     // LE Secure Connections

    public static func < (a: SecurityLevel, b: SecurityLevel) -> Bool { a.rawValue < b.rawValue }
    public var description: String {
        switch self {
        case .low: "low"
        case .medium: "medium"
        case .high: "high"
        case .fips: "fips"
        }
    }
}

/// What waiting on a bearer can give.
public enum BearerEvent: Sendable, Equatable {
    /// One whole ATT PDU (one SEQPACKET record / one L2CAP SDU on CID 4).
    case pdu([UInt8])
    /// The wait ended without traffic (deadline reached, or a signal woke the wait).
    case timeout
    /// The peer closed the link or it failed; the string says why when known.
    case closed(String?)
}

/// A failure of the transport itself (not of the protocol running over it).
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case notConnected = "not_connected"
        case systemCall = "system_call"
        case unsupported
        case securityRefused = "security_refused"
        case timedOut = "timed_out"
        case oversize
    }
    public var code: Code
    public var message: String
    /// errno when a system call failed.
    public var errno: Int32?

    public init(_ code: Code, _ message: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    public var description: String { message }
}

/// The one transport seam: something that carries whole ATT PDUs both ways.
///
/// Implementations: an in-process pair, a Unix-domain `SOCK_SEQPACKET` socket, BlueZ's L2CAP ATT
/// channel (CID 4). A bearer is used from one thread at a time by its driver.
public protocol ATTBearer: AnyObject {
    /// Human-readable peer name, e.g. `unix:/tmp/cuff.sock` or `AA:BB:CC:DD:EE:FF`.
    var peerDescription: String { get }
    /// Sends one PDU.
    func send(_ pdu: [UInt8]) throws(TransportError)
    /// Waits up to `timeout` (nil: no limit) for the next event.
    func next(timeout: Duration?) throws(TransportError) -> BearerEvent
    /// Asks the link for at least `level`; returns once the link has it (or throws).
    /// Bearers without link security (Unix sockets, in-process) accept any level at once.
    func raiseSecurity(to level: SecurityLevel) throws(TransportError)
    /// The security the link has now.
    var securityLevel: SecurityLevel { get }
    /// Closes the link. Idempotent.
    func close()
}
