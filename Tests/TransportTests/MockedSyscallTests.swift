// SPDX-License-Identifier: GPL-2.0-or-later
//
// Errno paths a real kernel won't give on demand, through the debug-build mock table.

#if DEBUG
    import CuffCore
    import CuffTestSupport
    import Glibc
    import Testing
    @testable import Transport

    @Suite("Mocked system calls")
    struct MockedSyscallTests {
        @Test func socketRetriesEINTRAndKeepsOtherErrno() throws {
            let retry = SyscallMock(["socket": [.fail(.interrupted), .fail(.interrupted), .real]])
            let fd = try retry.run { try Sys.socket(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue)).get() }
            close(fd)
            #expect(retry.names == ["socket", "socket", "socket"])

            let family = SyscallMock(["socket": [.fail(.addressFamilyNotSupported)]])
            #expect(
                family.run { Sys.socket(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue)) }
                    == .failure(.addressFamilyNotSupported))
        }

        @Test func closeIsNeverRetried() {
            let mock = SyscallMock(["close": [.fail(.interrupted)]])
            let result = mock.run { Sys.close(12345) }
            guard case .failure(let e) = result else { Issue.record("expected failure"); return }
            #expect(e == .interrupted)
            #expect(mock.names == ["close"])
        }

        @Test func socketpairFailureNamesTheCall() {
            let mock = SyscallMock(["socketpair": [.fail(.tooManyOpenFiles)]])
            let error = mock.run { #expect(throws: TransportError.self) { _ = try UnixSeqpacketBearer.pair() } }
            #expect(error?.code == .systemCall)
            #expect(error?.errno == EMFILE)
            #expect(
                error?.message
                    == "socketpair(AF_UNIX, SOCK_SEQPACKET): Too many open files (EMFILE) — close some descriptors or raise `ulimit -n`"
            )
        }

        @Test(arguments: [
            (Errno.connectionRefused, TransportError.Code.systemCall, "stale socket"),
            (Errno.permissionDenied, TransportError.Code.systemCall, "no permission"),
            (Errno.timedOut, TransportError.Code.timedOut, "Connection timed out (ETIMEDOUT)"),
            (Errno.resourceBusy, TransportError.Code.systemCall, "Device or resource busy (EBUSY)"),
            (Errno.addressFamilyNotSupported, TransportError.Code.unsupported, "(EAFNOSUPPORT)"),
        ])
        func connectErrorsAreTypedAndExplained(errno: Errno, code: TransportError.Code, fragment: String) {
            let mock = SyscallMock(["connect": [.fail(errno)]])
            let error = mock.run {
                #expect(throws: TransportError.self) { _ = try UnixSeqpacketBearer.connect(path: "/run/cuff.sock") }
            }
            #expect(error?.code == code)
            #expect(error?.errno == errno.rawValue)
            #expect(error?.message.hasPrefix("connect(unix:/run/cuff.sock): ") == true)
            #expect(error?.message.contains(fragment) == true, "\(error?.message ?? "")")
            // The socket made for the attempt was closed again.
            #expect(mock.names == ["socket", "connect", "close"])
        }

        @Test func connectRetriesEINTR() throws {
            let dir = try ScratchDirectory()
            defer { dir.remove() }
            let listener = try UnixSeqpacketListener(path: dir.path("s"))
            defer { listener.close() }
            let mock = SyscallMock(["connect": [.fail(.interrupted)]])
            let client = try mock.run { try UnixSeqpacketBearer.connect(path: dir.path("s")) }
            client.close()
            #expect(mock.names == ["socket", "connect", "connect"])
        }

        @Test func pollInterruptedBySignalIsATimeout() throws {
            let (a, b) = try UnixSeqpacketBearer.pair()
            defer { a.close(); b.close() }
            try b.send([0x1E])  // even with data queued, an interrupted wait reports .timeout first
            let mock = SyscallMock(["poll": [.fail(.interrupted)]])
            #expect(try mock.run { try a.next(timeout: nil) } == .timeout)
            #expect(mock.names == ["poll"])
            #expect(try a.next(timeout: .zero) == .pdu([0x1E]))
        }

        @Test func recvLinkLossBecomesClosedWithReason() throws {
            let (a, b) = try UnixSeqpacketBearer.pair()
            defer { a.close(); b.close() }
            try b.send([0x1E])
            let mock = SyscallMock(["recv": [.fail(.connectionReset)]])
            #expect(
                try mock.run { try a.next(timeout: .seconds(1)) }
                    == .closed("link failed: Connection reset by peer (ECONNRESET)"))
        }

        @Test func recvOtherFailureThrowsWithErrno() throws {
            let (a, b) = try UnixSeqpacketBearer.pair()
            defer { a.close(); b.close() }
            try b.send([0x1E])
            let mock = SyscallMock(["recv": [.fail(.noMemory)]])
            let error = mock.run { #expect(throws: TransportError.self) { _ = try a.next(timeout: .seconds(1)) } }
            #expect(error?.errno == ENOMEM)
            #expect(error?.message.hasPrefix("recv(unix:socketpair[0]): ") == true)
        }

        @Test func spuriousWakeupWithNothingQueuedKeepsWaiting() throws {
            let (a, b) = try UnixSeqpacketBearer.pair()
            defer { a.close(); b.close() }
            try b.send([0x1E])
            // First recv says "nothing after all"; the bearer polls again and reads the record.
            let mock = SyscallMock(["recv": [.fail(.wouldBlock)]])
            #expect(try mock.run { try a.next(timeout: .seconds(1)) } == .pdu([0x1E]))
            #expect(mock.names == ["poll", "recv", "poll", "recv"])
        }

        @Test func sendRetriesEINTRAndReportsENOBUFS() throws {
            let (a, b) = try UnixSeqpacketBearer.pair()
            defer { a.close(); b.close() }
            let retry = SyscallMock(["send": [.fail(.interrupted)]])
            try retry.run { try a.send([0x01]) }
            #expect(retry.names == ["send", "send"])
            #expect(try b.next(timeout: .seconds(1)) == .pdu([0x01]))

            let nobufs = SyscallMock(["send": [.fail(.noBufferSpace)]])
            let error = nobufs.run { #expect(throws: TransportError.self) { try a.send([0x01]) } }
            #expect(error?.errno == ENOBUFS)
        }

        @Test func acceptInterruptedReturnsNil() throws {
            let dir = try ScratchDirectory()
            defer { dir.remove() }
            let listener = try UnixSeqpacketListener(path: dir.path("s"))
            defer { listener.close() }
            let mock = SyscallMock(["poll": [.fail(.interrupted)]])
            #expect(try mock.run { try listener.accept(timeout: nil) } == nil)
        }

        @Test func bindBusyAndAccessAreExplained() throws {
            let dir = try ScratchDirectory()
            defer { dir.remove() }
            let busy = SyscallMock(["bind": [.fail(.addressInUse)]])
            let e1 = busy.run {
                #expect(throws: TransportError.self) { _ = try UnixSeqpacketListener(path: dir.path("s")) }
            }
            #expect(e1?.message.contains("already exists") == true)
            let access = SyscallMock(["bind": [.fail(.permissionDenied)]])
            let e2 = access.run {
                #expect(throws: TransportError.self) { _ = try UnixSeqpacketListener(path: dir.path("s")) }
            }
            #expect(e2?.message.contains("choose a writable directory") == true)
            #expect(access.names.last == "close")
        }

        @Test func sigactionFailureIsReported() {
            let mock = SyscallMock(["sigaction": [.fail(.invalidArgument)]])
            let error = mock.run { #expect(throws: TransportError.self) { try SignalFlags.shared.install([.usr1]) } }
            #expect(error?.message == "sigaction(SIGUSR1): Invalid argument (EINVAL)")
        }

        @Test func errnoNamesAndDescriptions() {
            #expect(Errno.connectionRefused.description == "Connection refused (ECONNREFUSED)")
            #expect(Errno(rawValue: 4095).name == "errno 4095")
            #expect(Errno.rfkill.name == "ERFKILL")
        }

        @Test func pollMillisecondsRoundsUpAndClamps() {
            #expect(Sys.pollMilliseconds(nil) == -1)
            #expect(Sys.pollMilliseconds(.zero) == 0)
            #expect(Sys.pollMilliseconds(.nanoseconds(-5)) == 0)
            #expect(Sys.pollMilliseconds(.nanoseconds(1)) == 1)
            #expect(Sys.pollMilliseconds(.milliseconds(1500)) == 1500)
            #expect(Sys.pollMilliseconds(.seconds(1_000_000_000)) == CInt.max)
        }
    }
#endif
