// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CuffCore
import Synchronization

/// Record-preserving I/O over one connected socket descriptor (AF_UNIX or L2CAP SOCK_SEQPACKET).
///
/// The engine both ``UnixSeqpacketBearer`` and BlueZ's L2CAP bearer run on:
/// * `next(timeout:)` waits in `poll`, never in `recv`, then reads with `MSG_DONTWAIT | MSG_TRUNC`
///   into a buffer one byte larger than the PDU limit, so a larger record is detected (and
///   dropped) instead of silently cut.
/// * Data already queued is delivered before a hang-up is reported. End of link is recognised
///   from POLLHUP / POLLRDHUP / POLLERR, not from a 0-byte `recv` alone (a 0-byte record is
///   legal); a 0-byte `recv` on a hung-up socket is the end.
/// * EINTR during the wait gives `.timeout`, so a driver can look at its stop flags.
/// * `send` is one record, `MSG_NOSIGNAL | MSG_DONTWAIT`; when the socket buffer is full it waits
///   for POLLOUT up to `sendTimeout`, so a peer that never reads can't hang us.
package final class SeqpacketChannel: Sendable {
    private let fdState: Mutex<CInt>
    /// The largest record accepted either way, in bytes.
    package let maxPDUSize: Int
    /// How long `send` waits for room in the socket buffer.
    package let sendTimeout: Duration
    /// Names the link in error messages, e.g. `unix:/tmp/cuff.sock`.
    package let label: String
    /// Turns the socket's pending error (or nil) into the `.closed` reason.
    private let closeReason: @Sendable (Errno?) -> String
    /// Whether `close()` calls `shutdown(SHUT_RDWR)` first (wakes a reader on another thread).
    private let shutdownOnClose: Bool

    package init(
        adopting fd: CInt, label: String, maxPDUSize: Int = 1024, sendTimeout: Duration = .seconds(5),
        closeReason: @escaping @Sendable (Errno?) -> String = SeqpacketChannel.defaultCloseReason,
        shutdownOnClose: Bool = true
    ) {
        precondition(maxPDUSize > 0, "maxPDUSize must be positive")
        fdState = Mutex(fd)
        self.label = label
        self.maxPDUSize = maxPDUSize
        self.sendTimeout = sendTimeout
        self.closeReason = closeReason
        self.shutdownOnClose = shutdownOnClose
    }

    deinit {
        close()
    }

    package static func defaultCloseReason(_ error: Errno?) -> String {
        if let error { return "link failed: \(error)" }
        return "peer closed the connection"
    }

    /// The descriptor, or nil once closed.
    package var descriptor: CInt? {
        let fd = fdState.withLock { $0 }
        return fd >= 0 ? fd : nil
    }

    package func send(_ pdu: [UInt8]) throws(TransportError) {
        let deadline = MonotonicClock.now() + sendTimeout
        while try !sendNow(pdu) {
            let left = deadline - MonotonicClock.now()
            if left <= .zero {
                throw TransportError(
                    .timedOut, "send(\(label)): the peer has not read for \(sendTimeout); socket buffer full")
            }
            guard let fd = descriptor else { continue }  // closed meanwhile: sendNow says so
            _ = Sys.poll(fd, events: Int16(POLLOUT), timeoutMS: Sys.pollMilliseconds(left))
        }
    }

    /// One record without waiting: true when it went out, false when the socket buffer is full
    /// (the peer has not read; try again once the descriptor is writable).
    package func sendNow(_ pdu: [UInt8]) throws(TransportError) -> Bool {
        guard pdu.count <= maxPDUSize else {
            throw TransportError(
                .oversize, "send(\(label)): PDU of \(pdu.count) bytes exceeds the \(maxPDUSize)-byte limit")
        }
        guard let fd = descriptor else {
            throw TransportError(.notConnected, "send(\(label)): the bearer is closed")
        }
        switch pdu.withUnsafeBytes({ Sys.send(fd, $0, flags: CInt(MSG_NOSIGNAL) | CInt(MSG_DONTWAIT)) }) {
        case .success(let n):
            if n != pdu.count {
                throw TransportError(.systemCall, "send(\(label)): only \(n) of \(pdu.count) bytes went out")
            }
            return true
        case .failure(.wouldBlock):
            return false
        case .failure(let e):
            throw TransportError.system("send", label, e, hint: sendHint(e))
        }
    }

    private func sendHint(_ e: Errno) -> String? {
        switch e {
        case .brokenPipe, .connectionReset, .socketNotConnected: "the peer is gone; reconnect"
        case .messageTooLong: "the PDU is larger than the link allows"
        default: nil
        }
    }

    package func next(timeout: Duration?) throws(TransportError) -> BearerEvent {
        guard let fd = descriptor else { return .closed("closed locally") }
        let deadline = timeout.map { MonotonicClock.now() + $0 }
        while true {
            let wait = deadline.map { $0 - MonotonicClock.now() }
            let revents: Int16
            switch Sys.poll(fd, events: Int16(POLLIN) | pollRDHUP, timeoutMS: Sys.pollMilliseconds(wait)) {
            case .success(let r): revents = r
            case .failure(.interrupted): return .timeout
            case .failure(let e): throw TransportError.system("poll", label, e)
            }
            if revents == 0 { return .timeout }
            if revents & Int16(POLLNVAL) != 0 { return .closed("closed locally") }
            let hungUp = revents & (Int16(POLLHUP) | pollRDHUP | Int16(POLLERR)) != 0
            if revents & Int16(POLLIN) != 0 {
                switch receive(fd) {
                case .success(let pdu?):
                    if pdu.isEmpty && hungUp { return .closed(closeReason(Sys.socketError(fd))) }
                    return .pdu(pdu)
                case .success(nil):
                    break  // spurious wake-up: nothing queued after all
                case .failure(let error):
                    if error.code == .oversize { throw error }
                    if let e = error.errno.map(Errno.init(rawValue:)), Self.isLinkLoss(e) {
                        return .closed(closeReason(e))
                    }
                    throw error
                }
            } else if hungUp {
                return .closed(closeReason(Sys.socketError(fd)))
            }
            if let deadline, MonotonicClock.now() >= deadline { return .timeout }
        }
    }

    /// The next PDU or end of link without waiting; nil when nothing is queued (or a signal came).
    package func receiveNow() throws(TransportError) -> BearerEvent? {
        let e = try next(timeout: .zero)
        if case .timeout = e { return nil }
        return e
    }

    /// Errors from `recv` that mean the link is gone rather than that the call was wrong.
    package static func isLinkLoss(_ e: Errno) -> Bool {
        switch e {
        case .connectionReset, .socketNotConnected, .timedOut, .brokenPipe, .connectionAborted, .hostIsDown,
            .noRouteToHost:
            true
        default:
            false
        }
    }

    /// One record, or nil when nothing was queued (EAGAIN).
    private func receive(_ fd: CInt) -> Result<[UInt8]?, TransportError> {
        let capacity = maxPDUSize + 1
        var length = 0
        var failure: Errno?
        let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            switch Sys.recv(fd, UnsafeMutableRawBufferPointer(buffer), flags: CInt(MSG_DONTWAIT) | CInt(MSG_TRUNC)) {
            case .success(let n):
                length = n
                count = min(n, capacity)
            case .failure(let e):
                failure = e
                count = 0
            }
        }
        if let failure {
            if failure == .wouldBlock { return .success(nil) }
            return .failure(TransportError.system("recv", label, failure))
        }
        if length > maxPDUSize {
            return .failure(
                TransportError(
                    .oversize,
                    "recv(\(label)): peer sent a \(length)-byte record, over the \(maxPDUSize)-byte limit"
                ))
        }
        return .success(bytes)
    }

    /// Waits until the socket is writable (or failed). Returns the `revents`, 0 on timeout; EINTR
    /// is retried with the remaining time.
    package func waitWritable(timeout: Duration?) -> Result<Int16, Errno> {
        guard let fd = descriptor else { return .failure(.badFileDescriptor) }
        let deadline = timeout.map { MonotonicClock.now() + $0 }
        while true {
            let wait = deadline.map { $0 - MonotonicClock.now() }
            switch Sys.poll(fd, events: Int16(POLLOUT), timeoutMS: Sys.pollMilliseconds(wait)) {
            case .failure(.interrupted):
                if let deadline, MonotonicClock.now() >= deadline { return .success(0) }
                continue
            case let other: return other
            }
        }
    }

    /// Shuts the socket down (waking any waiter, unless disabled) and closes it. Idempotent.
    package func close() {
        guard let fd = fdState.takeDescriptor() else { return }
        if shutdownOnClose { _ = Sys.shutdown(fd, how: CInt(SHUT_RDWR)) }
        _ = Sys.close(fd)
    }
}

/// `POLLRDHUP` (Linux, needs `_GNU_SOURCE` in C, so Glibc doesn't export it): peer shut down writing.
package let pollRDHUP: Int16 = 0x2000
