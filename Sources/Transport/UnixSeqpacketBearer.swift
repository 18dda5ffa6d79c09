// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CuffCore
import Synchronization

/// An ``ATTBearer`` over a Unix-domain `SOCK_SEQPACKET` socket: one ATT PDU per record.
///
/// Stands in for the L2CAP ATT channel (CID 4) between a simulator and a client on one machine,
/// and in tests (`pair()`), as BlueZ's own unit tests do. Security requests are granted at once:
/// the link has no encryption to negotiate.
///
/// `close()` may be called from another thread to wake a waiting `next(timeout:)`.
public final class UnixSeqpacketBearer: ATTBearer, Sendable {
    /// Default largest PDU accepted either way.
    public static let defaultMaxPDUSize = 1024

    private let channel: SeqpacketChannel
    private let level = Mutex(SecurityLevel.low)
    public let peerDescription: String

    /// Adopts a connected `SOCK_SEQPACKET` descriptor; the bearer closes it.
    ///
    /// - Parameters:
    ///   - fd: a connected socket descriptor.
    ///   - peerDescription: how to name the peer in messages.
    ///   - maxPDUSize: the largest record accepted either way; larger ones are `.oversize`.
    ///   - sendTimeout: how long `send` waits for a peer that doesn't read before `.timedOut`.
    public init(
        adopting fd: CInt, peerDescription: String,
        maxPDUSize: Int = UnixSeqpacketBearer.defaultMaxPDUSize, sendTimeout: Duration = .seconds(5)
    ) {
        self.peerDescription = peerDescription
        channel = SeqpacketChannel(
            adopting: fd, label: peerDescription, maxPDUSize: maxPDUSize, sendTimeout: sendTimeout)
    }

    /// A connected pair (`socketpair(AF_UNIX, SOCK_SEQPACKET)`), e.g. simulator ↔ client in tests.
    ///
    /// - Throws: `TransportError` when the kernel refuses (descriptor limit, …).
    public static func pair(
        maxPDUSize: Int = defaultMaxPDUSize, sendTimeout: Duration = .seconds(5)
    ) throws(TransportError) -> (UnixSeqpacketBearer, UnixSeqpacketBearer) {
        switch Sys.socketpair(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_CLOEXEC.rawValue)) {
        case .success(let (a, b)):
            return (
                UnixSeqpacketBearer(
                    adopting: a, peerDescription: "unix:socketpair[0]", maxPDUSize: maxPDUSize, sendTimeout: sendTimeout
                ),
                UnixSeqpacketBearer(
                    adopting: b, peerDescription: "unix:socketpair[1]", maxPDUSize: maxPDUSize, sendTimeout: sendTimeout
                )
            )
        case .failure(let e):
            throw TransportError.system(
                "socketpair", "AF_UNIX, SOCK_SEQPACKET", e,
                hint: e == .tooManyOpenFiles ? "close some descriptors or raise `ulimit -n`" : nil)
        }
    }

    /// Connects to a simulator listening on a Unix socket path.
    ///
    /// - Throws: `TransportError` whose message says what to do: ENOENT (nobody listening there),
    ///   ECONNREFUSED (stale socket file), EACCES (permissions), a path too long, ….
    public static func connect(path: String, maxPDUSize: Int = defaultMaxPDUSize, sendTimeout: Duration = .seconds(5))
        throws(TransportError) -> UnixSeqpacketBearer
    {
        let address = try UnixSocketAddress.make(path, call: "connect")
        let fd: CInt
        switch Sys.socket(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_CLOEXEC.rawValue)) {
        case .success(let s): fd = s
        case .failure(let e): throw TransportError.system("socket", "AF_UNIX, SOCK_SEQPACKET", e)
        }
        switch Sys.connect(fd, address) {
        case .success:
            return UnixSeqpacketBearer(
                adopting: fd, peerDescription: "unix:\(path)", maxPDUSize: maxPDUSize, sendTimeout: sendTimeout)
        case .failure(let e):
            _ = Sys.close(fd)
            throw TransportError.system("connect", "unix:\(path)", e, hint: connectHint(e, path: path))
        }
    }

    static func connectHint(_ e: Errno, path: String) -> String? {
        switch e {
        case .noSuchFileOrDirectory:
            "no simulator listening at \(path) — start `cuff simulate --listen unix:\(path)`"
        case .connectionRefused:
            "\(path) exists but nobody accepts on it (a stale socket from a simulator that exited?) — restart `cuff simulate --listen unix:\(path)`"
        case .permissionDenied, .notPermitted:
            "no permission to use \(path) — check the permissions of the socket and of its directory"
        case .protocolNotSupported, .notSupported, .invalidArgument:
            "\(path) is not a SOCK_SEQPACKET socket — is it another program's socket?"
        case .wouldBlock:
            "the simulator's accept queue is full — try again"
        case .notDirectory:
            "a component of \(path) is not a directory"
        default:
            nil
        }
    }

    public func send(_ pdu: [UInt8]) throws(TransportError) {
        try channel.send(pdu)
    }

    public func sendNow(_ pdu: [UInt8]) throws(TransportError) -> Bool {
        try channel.sendNow(pdu)
    }

    public func next(timeout: Duration?) throws(TransportError) -> BearerEvent {
        try channel.next(timeout: timeout)
    }

    public var fileDescriptor: CInt? { channel.descriptor }

    public func receiveNow() throws(TransportError) -> BearerEvent? {
        try channel.receiveNow()
    }

    public func raiseSecurity(to level: SecurityLevel) throws(TransportError) {
        guard channel.descriptor != nil else {
            throw TransportError(.notConnected, "raiseSecurity(\(peerDescription)): the bearer is closed")
        }
        self.level.withLock { $0 = max($0, level) }
    }

    public var securityLevel: SecurityLevel { level.withLock { $0 } }

    /// The largest PDU this bearer accepts.
    public var maxPDUSize: Int { channel.maxPDUSize }

    public func close() {
        channel.close()
    }
}
