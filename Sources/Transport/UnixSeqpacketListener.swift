// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CuffCore
import Synchronization

/// A listening Unix-domain `SOCK_SEQPACKET` socket at a path; accepts ``UnixSeqpacketBearer``s.
///
/// A stale socket file left by a simulator that died is removed first; a live one (something
/// accepts on it) or a path that isn't a socket is an error rather than deleted. `close()`
/// removes the path.
public final class UnixSeqpacketListener: Sendable {
    public let path: String
    private let fdState: Mutex<CInt>
    private let maxPDUSize: Int

    /// Binds and listens at `path`.
    ///
    /// - Throws: `TransportError`: another simulator already listens there (EADDRINUSE), the path
    ///   is not a socket, no permission, the path is too long.
    public init(path: String, backlog: CInt = 8, maxPDUSize: Int = UnixSeqpacketBearer.defaultMaxPDUSize)
        throws(TransportError)
    {
        self.path = path
        self.maxPDUSize = maxPDUSize
        let address = try UnixSocketAddress.make(path, call: "bind")
        try Self.removeStale(path)
        let fd: CInt
        switch Sys.socket(
            domain: AF_UNIX,
            type: CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_CLOEXEC.rawValue) | CInt(SOCK_NONBLOCK.rawValue))
        {
        case .success(let s): fd = s
        case .failure(let e): throw TransportError.system("socket", "AF_UNIX, SOCK_SEQPACKET", e)
        }
        if case .failure(let e) = Sys.bind(fd, address) {
            _ = Sys.close(fd)
            let hint: String? =
                switch e {
                case .addressInUse: "\(path) already exists — remove it or choose another path"
                case .permissionDenied, .notPermitted, .readOnlyFileSystem:
                    "no permission to create \(path) — choose a writable directory"
                case .noSuchFileOrDirectory: "the directory of \(path) does not exist"
                default: nil
                }
            throw TransportError.system("bind", "unix:\(path)", e, hint: hint)
        }
        if case .failure(let e) = Sys.listen(fd, backlog: backlog) {
            _ = Sys.close(fd)
            _ = Sys.unlink(path)
            throw TransportError.system("listen", "unix:\(path)", e)
        }
        fdState = Mutex(fd)
    }

    deinit { close() }

    /// Removes `path` if it is a socket nobody accepts on; refuses otherwise.
    private static func removeStale(_ path: String) throws(TransportError) {
        let st: stat
        switch Sys.lstat(path) {
        case .success(let s): st = s
        case .failure(.noSuchFileOrDirectory): return
        case .failure(let e): throw TransportError.system("lstat", path, e)
        }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw TransportError(
                .systemCall,
                "bind(unix:\(path)): \(path) exists and is not a socket; refusing to replace it — choose another path",
                errno: EEXIST)
        }
        // Is someone still accepting there?
        if let probe = try? UnixSeqpacketBearer.connect(path: path) {
            probe.close()
            throw TransportError(
                .systemCall,
                "bind(unix:\(path)): another simulator is already listening at \(path) — stop it or choose another path",
                errno: EADDRINUSE)
        }
        if case .failure(let e) = Sys.unlink(path), e != .noSuchFileOrDirectory {
            throw TransportError.system("unlink", path, e, hint: "cannot remove the stale socket \(path)")
        }
    }

    /// The listening descriptor (for an ``EventLoop``); nil once closed.
    public var fileDescriptor: CInt? { fdState.openDescriptor }

    /// Waits up to `timeout` (nil: no limit) for a client.
    ///
    /// - Returns: the connected bearer, or nil when the time ran out or a signal woke the wait.
    /// - Throws: `TransportError` when the listener is closed or the kernel fails.
    public func accept(timeout: Duration?) throws(TransportError) -> UnixSeqpacketBearer? {
        guard let fd = fdState.openDescriptor else {
            throw TransportError(.notConnected, "accept(unix:\(path)): the listener is closed")
        }
        switch Sys.poll(fd, events: Int16(POLLIN), timeoutMS: Sys.pollMilliseconds(timeout)) {
        case .success(0), .failure(.interrupted): return nil
        case .success(let revents) where revents & Int16(POLLNVAL) != 0:
            throw TransportError(.notConnected, "accept(unix:\(path)): the listener is closed")
        case .success: break
        case .failure(let e): throw TransportError.system("poll", "unix:\(path)", e)
        }
        switch Sys.accept(fd) {
        case .success(let client):
            return UnixSeqpacketBearer(adopting: client, peerDescription: "unix:\(path)", maxPDUSize: maxPDUSize)
        case .failure(.wouldBlock), .failure(.connectionAborted):
            return nil
        case .failure(let e):
            throw TransportError.system(
                "accept", "unix:\(path)", e,
                hint: e == .tooManyOpenFiles ? "too many open descriptors; close clients or raise `ulimit -n`" : nil)
        }
    }

    /// Stops listening and removes the path. Idempotent.
    public func close() {
        guard let fd = fdState.takeDescriptor() else { return }
        _ = Sys.close(fd)
        _ = Sys.unlink(path)
    }
}
