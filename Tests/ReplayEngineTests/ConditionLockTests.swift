import Testing

@testable import ReplayEngine
@testable import Transport

@Suite struct ConditionLockTests {
    /// A bounded queue between two threads: every item arrives once, in order, and neither side
    /// sleeps forever (a lost wake-up would hang this test).
    @Test func boundedHandOverLosesNothing() {
        struct Queue: Sendable { var items: [Int] = []; var closed = false }
        let lock = ConditionLock(Queue())
        let count = 50_000
        let received = ConditionLock([Int]())
        let consumer = OSThread.start {
            while true {
                let next: Int?? = lock.wait(until: { !$0.items.isEmpty || $0.closed }) { q in
                    q.items.isEmpty ? .some(nil) : .some(q.items.removeFirst())
                }
                lock.withLock(wakingWaiters: true) { _ in }
                guard let item = next!, true else { break }
                received.withLock { $0.append(item) }
            }
        }
        #expect(consumer != nil)
        for i in 0..<count {
            lock.wait(until: { $0.items.count < 2 }) { $0.items.append(i) }
            lock.withLock(wakingWaiters: true) { _ in }
        }
        lock.withLock(wakingWaiters: true) { $0.closed = true }
        consumer?.join()
        let got = received.withLock { $0 }
        #expect(got.count == count)
        #expect(got == Array(0..<count))
    }

    @Test func aConditionAlreadyTrueDoesNotWait() {
        let lock = ConditionLock(3)
        #expect(
            lock.wait(until: { $0 == 3 }) { v -> Int in
                v += 1; return v
            } == 4)
        #expect(lock.withLock { $0 } == 4)
    }
}
