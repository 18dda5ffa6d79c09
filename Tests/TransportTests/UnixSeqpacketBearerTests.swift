// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffTestSupport
import Glibc
import Testing
import Transport

@Suite("UnixSeqpacketBearer")
struct UnixSeqpacketBearerTests {
    @Test func exchangesPDUsBothWays() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { a.close(); b.close() }
        try a.send([0x02, 0x17, 0x00])  // Exchange MTU Request, MTU 23
        #expect(try b.next(timeout: .seconds(5)) == .pdu([0x02, 0x17, 0x00]))
        try b.send([0x03, 0xF7, 0x00])  // Exchange MTU Response, MTU 247
        #expect(try a.next(timeout: .seconds(5)) == .pdu([0x03, 0xF7, 0x00]))
    }

    @Test func keepsRecordBoundariesIncludingEmptyRecords() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { a.close(); b.close() }
        let records: [[UInt8]] = [
            [0x1D, 0x03, 0x00, 0x00, 0x78, 0x00], [], [0x1E], Array(repeating: 0xAB, count: 1024),
        ]
        for r in records { try a.send(r) }
        for r in records { #expect(try b.next(timeout: .seconds(5)) == .pdu(r)) }
        #expect(try b.next(timeout: .zero) == .timeout)
    }

    @Test func refusesToSendOversizePDU() throws {
        let (a, b) = try UnixSeqpacketBearer.pair(maxPDUSize: 23)
        defer { a.close(); b.close() }
        #expect(#expect(throws: TransportError.self) { try a.send(Array(repeating: 0, count: 24)) }?.code == .oversize)
        do {
            try a.send(Array(repeating: 0, count: 24))
        } catch {
            #expect(error.code == .oversize)
            #expect(error.message.contains("24 bytes"))
        }
        try a.send(Array(repeating: 0, count: 23))
        #expect(try b.next(timeout: .seconds(5)) == .pdu(Array(repeating: 0, count: 23)))
    }

    @Test func detectsOversizeRecordFromPeerAndStaysUsable() throws {
        var fds: [CInt] = [-1, -1]
        #expect(socketpair(AF_UNIX, CInt(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
        // A hostile peer sending more than we accept.
        let big = UnixSeqpacketBearer(adopting: fds[0], peerDescription: "big", maxPDUSize: 4096)
        let limited = UnixSeqpacketBearer(adopting: fds[1], peerDescription: "limited", maxPDUSize: 16)
        defer { big.close(); limited.close() }
        try big.send(Array(repeating: 0x55, count: 600))
        try big.send([0x1E])
        do {
            _ = try limited.next(timeout: .seconds(5))
            Issue.record("expected .oversize")
        } catch {
            #expect(error.code == .oversize)
            #expect(error.message.contains("600-byte record"))
        }
        #expect(try limited.next(timeout: .seconds(5)) == .pdu([0x1E]))
    }

    @Test func timeoutWithoutTrafficReturnsTimeout() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { a.close(); b.close() }
        let start = MonotonicClock.now()
        #expect(try a.next(timeout: .milliseconds(20)) == .timeout)
        #expect(MonotonicClock.now() - start >= .milliseconds(20))
        #expect(try a.next(timeout: .zero) == .timeout)
    }

    @Test func peerCloseWakesAWaitingReader() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { b.close() }
        let waiter = Background { Result { () throws(TransportError) in try b.next(timeout: .seconds(30)) } }
        a.close()
        let event = try #require(waiter.join()).get()
        guard case .closed(let reason) = event else {
            Issue.record("expected .closed, got \(event)")
            return
        }
        #expect(reason == "peer closed the connection")
        // Stays closed.
        guard case .closed = try b.next(timeout: .zero) else {
            Issue.record("expected .closed again")
            return
        }
    }

    @Test func queuedPDUsArriveBeforeTheClose() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { b.close() }
        try a.send([0x1D, 0x01])
        try a.send([])
        a.close()
        #expect(try b.next(timeout: .seconds(5)) == .pdu([0x1D, 0x01]))
        // A 0-byte record followed by hang-up is indistinguishable from end-of-link: we report closed.
        guard case .closed = try b.next(timeout: .seconds(5)) else {
            Issue.record("expected .closed")
            return
        }
    }

    @Test func localCloseIsIdempotentAndReported() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { b.close() }
        a.close()
        a.close()
        #expect(try a.next(timeout: .zero) == .closed("closed locally"))
        #expect(#expect(throws: TransportError.self) { try a.send([0x01]) }?.code == .notConnected)
        #expect(#expect(throws: TransportError.self) { try a.raiseSecurity(to: .medium) }?.code == .notConnected)
    }

    @Test func sendingToAClosedPeerIsNotConnected() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { a.close() }
        b.close()
        do {
            try a.send([0x0A, 0x03, 0x00])
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .notConnected)
            #expect(error.errno == EPIPE)
            #expect(error.message.hasPrefix("send(unix:socketpair[0]): Broken pipe (EPIPE)"))
        }
    }

    @Test func peerThatNeverReadsMakesSendTimeOut() throws {
        let (a, b) = try UnixSeqpacketBearer.pair(sendTimeout: .milliseconds(30))
        defer { a.close(); b.close() }
        var sent = 0
        var failure: TransportError?
        while sent < 1_000_000 {
            do { try a.send(Array(repeating: 0, count: 512)) } catch { failure = error; break }
            sent += 1
        }
        #expect(failure?.code == .timedOut)
        #expect(sent > 0)
    }

    @Test func securityRequestsAreGrantedAtOnce() throws {
        let (a, b) = try UnixSeqpacketBearer.pair()
        defer { a.close(); b.close() }
        #expect(a.securityLevel == .low)
        try a.raiseSecurity(to: .medium)
        #expect(a.securityLevel == .medium)
        try a.raiseSecurity(to: .low)
        #expect(a.securityLevel == .medium)
    }
}
