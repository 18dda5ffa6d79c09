import CuffCore
import Testing
@testable import Transport

@Suite("EventLoop")
struct EventLoopTests {
    @Test func timersRunInDeadlineOrderAndCancelledOnesNever() throws {
        let loop = try EventLoop()
        var ran: [Int] = []
        let now = MonotonicClock.now()
        loop.schedule(at: now + .milliseconds(30)) { ran.append(3) }
        loop.schedule(at: now + .milliseconds(10)) { ran.append(1) }
        let cancelled = loop.schedule(at: now + .milliseconds(20)) { ran.append(99) }
        loop.schedule(at: now + .milliseconds(20)) { ran.append(2) }
        loop.cancel(cancelled)
        try loop.run { ran.count == 3 }
        #expect(ran == [1, 2, 3])
        #expect(loop.timerCount == 0)
        #expect(MonotonicClock.now() - now >= .milliseconds(30), "a timer ran before its deadline")
    }

    @Test func aTimerScheduledByATimerForNowRunsInTheNextTurn() throws {
        let loop = try EventLoop()
        var turns = 0
        var fired = 0
        loop.afterEachTurn { turns += 1 }
        func again() { fired += 1; if fired < 5 { loop.schedule(at: MonotonicClock.now()) { again() } } }
        loop.schedule(at: MonotonicClock.now()) { again() }
        try loop.run { fired == 5 }
        #expect(turns >= 5)
    }

    @Test func readableDescriptorsAreDispatchedAndUnwatchedOnesAreNot() throws {
        let loop = try EventLoop()
        let (a, b) = try UnixSeqpacketBearer.pair()
        var got: [[UInt8]] = []
        let fd = try #require(b.fileDescriptor)
        try loop.watch(fd) { _ in
            while let e = try? b.receiveNow(), case let .pdu(p) = e { got.append(p) }
        }
        try a.send([1, 2, 3])
        try a.send([4])
        try loop.run { got.count == 2 }
        #expect(got == [[1, 2, 3], [4]])
        loop.unwatch(fd)
        #expect(loop.watchedCount == 0)
        try a.send([5])
        try loop.runOnce(timeout: .milliseconds(20))
        #expect(got.count == 2)
        #expect(try b.receiveNow() == .pdu([5]))
        #expect(try b.receiveNow() == nil)
    }

    @Test func aHangUpIsSeenAsClosed() throws {
        let loop = try EventLoop()
        let (a, b) = try UnixSeqpacketBearer.pair()
        var closed = false
        try loop.watch(try #require(b.fileDescriptor)) { r in
            if case .closed? = try? b.receiveNow() { closed = true }
            _ = r
        }
        a.close()
        try loop.run { closed }
        #expect(closed)
    }

    @Test func manyTimersAndCancellationsKeepTheHeapSmall() throws {
        let loop = try EventLoop()
        let far = MonotonicClock.now() + .seconds(3600)
        for _ in 0..<10_000 { loop.cancel(loop.schedule(at: far) {}) }
        #expect(loop.timerCount == 0)
        #expect(loop.nextDeadline == nil)
    }
}
