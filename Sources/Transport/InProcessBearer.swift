// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Dispatch
import Synchronization

/// An ``ATTBearer`` pair joined by two in-memory queues: no descriptors, no kernel.
///
/// Same semantics as ``UnixSeqpacketBearer``: whole PDUs, a PDU limit, `.timeout` when the wait
/// ends empty, queued PDUs delivered before `.closed`, and closing one end makes the other see
/// `.closed("peer closed the connection")`. Each direction holds at most `capacity` unread PDUs;
/// a sender that outruns its reader gets `.timedOut` instead of growing memory without bound.
/// Thread-safe: each end may be used from its own thread.
public final class InProcessBearer: ATTBearer, Sendable {
    /// One direction: a queue guarded by a mutex, and a semaphore to wake the reader.
    final class Mailbox: Sendable {
        struct State {
            var queue: [[UInt8]] = []
            var head = 0
            var closedReason: String?
            var count: Int { queue.count - head }
            mutating func pop() -> [UInt8]? {
                guard head < queue.count else { return nil }
                let pdu = queue[head]
                head += 1
                if head > 64 && head * 2 > queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
                return pdu
            }
        }
        let state = Mutex(State())
        let wake = DispatchSemaphore(value: 0)
    }

    private let inbox: Mailbox
    private let outbox: Mailbox
    private let level = Mutex(SecurityLevel.low)
    public let peerDescription: String
    /// The largest PDU accepted.
    public let maxPDUSize: Int
    /// The most unread PDUs one direction holds.
    public let capacity: Int

    private init(inbox: Mailbox, outbox: Mailbox, name: String, maxPDUSize: Int, capacity: Int) {
        self.inbox = inbox
        self.outbox = outbox
        self.peerDescription = name
        self.maxPDUSize = maxPDUSize
        self.capacity = capacity
    }

    /// Two connected ends.
    public static func pair(maxPDUSize: Int = 1024, capacity: Int = 1024) -> (InProcessBearer, InProcessBearer) {
        precondition(maxPDUSize > 0 && capacity > 0, "maxPDUSize and capacity must be positive")
        let ab = Mailbox(), ba = Mailbox()
        return (
            InProcessBearer(inbox: ba, outbox: ab, name: "in-process[0]", maxPDUSize: maxPDUSize, capacity: capacity),
            InProcessBearer(inbox: ab, outbox: ba, name: "in-process[1]", maxPDUSize: maxPDUSize, capacity: capacity)
        )
    }

    public func send(_ pdu: [UInt8]) throws(TransportError) {
        guard pdu.count <= maxPDUSize else {
            throw TransportError(
                .oversize, "send(\(peerDescription)): PDU of \(pdu.count) bytes exceeds the \(maxPDUSize)-byte limit")
        }
        if inbox.state.withLock({ $0.closedReason == "closed locally" }) {
            throw TransportError(.notConnected, "send(\(peerDescription)): the bearer is closed")
        }
        let result: TransportError? = outbox.state.withLock { s in
            if s.closedReason != nil {
                return TransportError(.notConnected, "send(\(peerDescription)): the peer closed the connection")
            }
            if s.count >= capacity {
                return TransportError(
                    .timedOut, "send(\(peerDescription)): the peer has \(s.count) unread PDUs and is not reading")
            }
            s.queue.append(pdu)
            return nil
        }
        if let result { throw result }
        outbox.wake.signal()
    }

    public func next(timeout: Duration?) throws(TransportError) -> BearerEvent {
        let deadline = timeout.map { DispatchTime.now().uptimeNanoseconds &+ UInt64(max(0, $0.nanoseconds)) }
        while true {
            let ready: BearerEvent? = inbox.state.withLock { s in
                if s.closedReason == "closed locally" { return .closed("closed locally") }
                if let pdu = s.pop() { return .pdu(pdu) }
                if let reason = s.closedReason { return .closed(reason) }
                return nil
            }
            if let ready { return ready }
            if let deadline {
                let now = DispatchTime.now().uptimeNanoseconds
                if now >= deadline { return .timeout }
                // Wake-ups may outnumber PDUs (sends while nobody waited); the loop re-checks.
                if inbox.wake.wait(timeout: DispatchTime(uptimeNanoseconds: deadline)) == .timedOut {
                    return inbox.state.withLock { s in s.pop().map(BearerEvent.pdu) } ?? .timeout
                }
            } else {
                inbox.wake.wait()
            }
        }
    }

    public func raiseSecurity(to level: SecurityLevel) throws(TransportError) {
        if inbox.state.withLock({ $0.closedReason != nil }) {
            throw TransportError(.notConnected, "raiseSecurity(\(peerDescription)): the bearer is closed")
        }
        self.level.withLock { $0 = max($0, level) }
    }

    public var securityLevel: SecurityLevel { level.withLock { $0 } }

    /// Closes this end; the other end sees `.closed` after the PDUs already sent to it. Idempotent.
    public func close() {
        inbox.state.withLock { s in
            s.closedReason = "closed locally"
            s.queue.removeAll()
            s.head = 0
        }
        outbox.state.withLock { s in
            if s.closedReason == nil { s.closedReason = "peer closed the connection" }
        }
        inbox.wake.signal()
        outbox.wake.signal()
    }
}
