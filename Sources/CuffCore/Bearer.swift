// SPDX-License-Identifier: GPL-2.0-or-later

/// Link-layer security a bearer can be asked for; mirrors BlueZ's BT_SECURITY levels.
public enum SecurityLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case low = 1  // no encryption
    case medium = 2  // encrypted, unauthenticated (Just Works)
    case high = 3  // encrypted, authenticated (MITM protection)
    case fips = 4  // LE Secure Connections

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
///
/// Matched by code, never by message text: ``code`` says what kind of failure it was, ``errno``
/// the system call's error number, and, when a peer refused the request, its own answer —
/// ``hciStatus`` (a controller), ``mgmtStatus`` (the kernel's management interface) or
/// ``remoteErrorName`` (a D-Bus error name from bluetoothd, parsed once where the reply arrives).
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure: a struct, not an enum, so a new code is not a breaking change
    /// (swift-asn1's `ASN1Error.ErrorCode` style). The raw value is stable text.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let notConnected = Code(rawValue: "not_connected")
        public static let systemCall = Code(rawValue: "system_call")
        public static let unsupported = Code(rawValue: "unsupported")
        public static let securityRefused = Code(rawValue: "security_refused")
        public static let timedOut = Code(rawValue: "timed_out")
        public static let oversize = Code(rawValue: "oversize")
    }
    public var code: Code
    public var message: String
    /// errno when a system call failed (the `Errno` of Transport: `TransportError.systemErrno`).
    public var errno: Int32?
    /// The status a Bluetooth controller answered an HCI command with (Core Vol 1 Part F), when it refused.
    public var hciStatus: UInt8?
    /// The status the kernel's management interface answered with (mgmt-api.txt), when it refused.
    public var mgmtStatus: UInt8?
    /// The D-Bus error name of an error reply (`org.bluez.Error.NotPermitted`).
    public var remoteErrorName: String?

    public init(
        _ code: Code, _ message: String, errno: Int32? = nil, hciStatus: UInt8? = nil, mgmtStatus: UInt8? = nil,
        remoteErrorName: String? = nil
    ) {
        self.code = code
        self.message = message
        self.errno = errno
        self.hciStatus = hciStatus
        self.mgmtStatus = mgmtStatus
        self.remoteErrorName = remoteErrorName
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
