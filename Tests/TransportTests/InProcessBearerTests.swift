// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffTestSupport
import Testing
import Transport

@Suite("InProcessBearer")
struct InProcessBearerTests {
    @Test func exchangesPDUsBothWaysKeepingBoundaries() throws {
        let (a, b) = InProcessBearer.pair()
        try a.send([0x02, 0x17, 0x00])
        try a.send([])
        try b.send([0x03, 0xF7, 0x00])
        #expect(try b.next(timeout: .zero) == .pdu([0x02, 0x17, 0x00]))
        #expect(try b.next(timeout: .zero) == .pdu([]))
        #expect(try b.next(timeout: .zero) == .timeout)
        #expect(try a.next(timeout: .seconds(1)) == .pdu([0x03, 0xF7, 0x00]))
    }

    @Test func manyPDUsStayInOrder() throws {
        let (a, b) = InProcessBearer.pair(capacity: 500)
        for i in 0..<300 { try a.send([UInt8(i & 0xFF), UInt8(i >> 8)]) }
        for i in 0..<300 { #expect(try b.next(timeout: .zero) == .pdu([UInt8(i & 0xFF), UInt8(i >> 8)])) }
    }

    @Test func oversizeAndFullQueueAreErrorsNotGrowth() throws {
        let (a, b) = InProcessBearer.pair(maxPDUSize: 23, capacity: 2)
        #expect(#expect(throws: TransportError.self) { try a.send(Array(repeating: 0, count: 24)) }?.code == .oversize)
        try a.send([1])
        try a.send([2])
        #expect(#expect(throws: TransportError.self) { try a.send([3]) }?.code == .timedOut)
        #expect(try b.next(timeout: .zero) == .pdu([1]))
        try a.send([3])
    }

    @Test func timeoutReturnsTimeout() throws {
        let (a, _) = InProcessBearer.pair()
        let start = MonotonicClock.now()
        #expect(try a.next(timeout: .milliseconds(20)) == .timeout)
        #expect(MonotonicClock.now() - start >= .milliseconds(20))
    }

    @Test func closePropagatesAfterQueuedPDUs() throws {
        let (a, b) = InProcessBearer.pair()
        try a.send([0x1D])
        a.close()
        #expect(try b.next(timeout: .zero) == .pdu([0x1D]))
        #expect(try b.next(timeout: .zero) == .closed("peer closed the connection"))
        #expect(try a.next(timeout: .zero) == .closed("closed locally"))
        #expect(#expect(throws: TransportError.self) { try b.send([0x1E]) }?.code == .notConnected)
        #expect(#expect(throws: TransportError.self) { try a.send([0x1E]) }?.code == .notConnected)
    }

    @Test func closeWakesAWaitingReaderOnAnotherThread() throws {
        let (a, b) = InProcessBearer.pair()
        let waiter = Background { Result { () throws(TransportError) in try b.next(timeout: nil) } }
        a.close()
        #expect(try #require(waiter.join()).get() == .closed("peer closed the connection"))
    }

    @Test func sendWakesAWaitingReaderOnAnotherThread() throws {
        let (a, b) = InProcessBearer.pair()
        let waiter = Background { Result { () throws(TransportError) in try b.next(timeout: .seconds(30)) } }
        try a.send([0x0A, 0x03, 0x00])
        #expect(try #require(waiter.join()).get() == .pdu([0x0A, 0x03, 0x00]))
    }

    @Test func securityIsGrantedAtOnce() throws {
        let (a, _) = InProcessBearer.pair()
        try a.raiseSecurity(to: .high)
        #expect(a.securityLevel == .high)
    }
}
