// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CEpoll
import CuffCore

/// One thread's event loop: epoll over descriptors, a timer heap, and hooks that run after each
/// turn. `cuff measure`, `cuff simulate` and `cuff watch` all run their sessions on it.
///
/// Not thread-safe: create, use and run it on one thread. Handlers run on that thread, one at a
/// time; they may watch and unwatch descriptors and schedule and cancel timers.
///
/// Signals: the loop waits at most ``maxWait`` (100 ms) at a time and `epoll_wait` is not retried on
/// EINTR, so a caller's `until` condition (which looks at ``SignalFlags``) is seen promptly.
public final class EventLoop {
    /// What a descriptor is ready for.
    public struct Readiness: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let readable = Readiness(rawValue: 1)
        public static let writable = Readiness(rawValue: 2)
        /// The peer hung up or the descriptor failed (reading tells which, and what was queued).
        public static let hangUp = Readiness(rawValue: 4)
    }

    /// A scheduled timer, for ``cancel(_:)``.
    public struct TimerID: Hashable, Sendable {
        let raw: UInt64
    }

    public typealias Handler = (Readiness) -> Void

    private let epfd: CInt
    private var handlers: [CInt: Handler] = [:]
    private var heap: [(deadline: Timestamp, id: UInt64)] = []
    private var timerBodies: [UInt64: () -> Void] = [:]
    private var nextTimerID: UInt64 = 0
    private var iterationHooks: [() -> Void] = []
    private var readyFDs: [CInt]
    private var readyEvents: [UInt32]
    /// The longest single wait, so that stop conditions are looked at promptly.
    public var maxWait: Duration = .milliseconds(100)

    /// - Parameter capacity: how many ready descriptors one wait reports at most.
    public init(capacity: Int = 256) throws(TransportError) {
        switch Sys.epollCreate() {
        case .success(let fd): epfd = fd
        case .failure(let e): throw TransportError.system("epoll_create1", "event loop", e)
        }
        readyFDs = [CInt](repeating: -1, count: min(256, max(1, capacity)))
        readyEvents = [UInt32](repeating: 0, count: readyFDs.count)
    }

    deinit { _ = Sys.close(epfd) }

    /// How many descriptors are watched.
    public var watchedCount: Int { handlers.count }
    /// How many timers are pending.
    public var timerCount: Int { timerBodies.count }

    // MARK: Descriptors

    /// Calls `handler` whenever `fd` is ready (level-triggered). A descriptor is watched once;
    /// watching it again replaces its handler and interest.
    public func watch(_ fd: CInt, readable: Bool = true, writable: Bool = false, _ handler: @escaping Handler)
        throws(TransportError)
    {
        let op: CInt = handlers[fd] == nil ? Self.add : Self.modify
        if case .failure(let e) = Sys.epollControl(
            epfd, op, fd, events: Self.mask(readable: readable, writable: writable))
        {
            throw TransportError.system("epoll_ctl", "descriptor \(fd)", e)
        }
        handlers[fd] = handler
    }

    /// Changes what `fd` is watched for (both false: only hang-ups and errors). `peerShutdown`
    /// false stops reporting that the peer shut down its writing (once seen, it would be reported
    /// on every turn), while a full hang-up and errors are still reported.
    public func change(_ fd: CInt, readable: Bool, writable: Bool, peerShutdown: Bool = true) {
        guard handlers[fd] != nil else { return }
        var events = Self.mask(readable: readable, writable: writable)
        if !peerShutdown { events &= ~UInt32(CUFF_EPOLLRDHUP) }
        _ = Sys.epollControl(epfd, Self.modify, fd, events: events)
    }

    /// Stops watching `fd` (call before closing it). Unknown descriptors are ignored.
    public func unwatch(_ fd: CInt) {
        guard handlers.removeValue(forKey: fd) != nil else { return }
        _ = Sys.epollControl(epfd, Self.delete, fd, events: 0)
    }

    static let add: CInt = 1, delete: CInt = 2, modify: CInt = 3  // EPOLL_CTL_*

    static func mask(readable: Bool, writable: Bool) -> UInt32 {
        var m = UInt32(CUFF_EPOLLRDHUP)
        if readable { m |= UInt32(CUFF_EPOLLIN) }
        if writable { m |= UInt32(CUFF_EPOLLOUT) }
        return m
    }

    // MARK: Timers

    /// Runs `body` once the monotonic clock reaches `deadline` (at the next turn if it already has).
    @discardableResult
    public func schedule(at deadline: Timestamp, _ body: @escaping () -> Void) -> TimerID {
        nextTimerID &+= 1
        let id = nextTimerID
        timerBodies[id] = body
        heap.append((deadline, id))
        siftUp(heap.count - 1)
        return TimerID(raw: id)
    }

    /// Cancels a timer; one that already ran or was cancelled is ignored.
    public func cancel(_ id: TimerID) {
        timerBodies[id.raw] = nil
        // Cancelled entries leave the heap lazily; compact when they dominate.
        if heap.count > 64 && heap.count > 4 * timerBodies.count { compactHeap() }
    }

    /// The earliest pending deadline.
    public var nextDeadline: Timestamp? {
        while let top = heap.first, timerBodies[top.id] == nil { popHeap() }
        return heap.first?.deadline
    }

    /// Runs `body` after every turn of the loop (after the descriptors and timers of that turn),
    /// e.g. to commit what the turn's handlers collected in one transaction.
    public func afterEachTurn(_ body: @escaping () -> Void) {
        iterationHooks.append(body)
    }

    // MARK: Running

    /// One turn: waits up to `timeout` (capped by the next timer and ``maxWait``), dispatches ready
    /// descriptors, runs due timers, then the after-turn hooks.
    public func runOnce(timeout: Duration? = nil) throws(TransportError) {
        var wait = maxWait
        if let timeout { wait = min(wait, timeout) }
        if let d = nextDeadline { wait = min(wait, max(.zero, d - MonotonicClock.now())) }
        let n: Int
        switch Sys.epollWait(epfd, fds: &readyFDs, events: &readyEvents, timeoutMS: Self.milliseconds(wait)) {
        case .success(let k): n = k
        case .failure(.interrupted): n = 0
        case .failure(let e): throw TransportError.system("epoll_wait", "event loop", e)
        }
        for i in 0..<n {
            let fd = readyFDs[i], bits = readyEvents[i]
            guard let handler = handlers[fd] else { continue }
            var r: Readiness = []
            if bits & UInt32(CUFF_EPOLLIN) != 0 { r.insert(.readable) }
            if bits & UInt32(CUFF_EPOLLOUT) != 0 { r.insert(.writable) }
            if bits & UInt32(CUFF_EPOLLHUP | CUFF_EPOLLERR | CUFF_EPOLLRDHUP) != 0 { r.insert(.hangUp) }
            handler(r)
        }
        runDueTimers()
        for hook in iterationHooks { hook() }
    }

    /// Turns until `done()` is true (looked at before every turn).
    public func run(until done: () -> Bool) throws(TransportError) {
        while !done() { try runOnce() }
    }

    func runDueTimers() {
        let now = MonotonicClock.now()
        // Only timers due now: one scheduled by a body for "now" runs in the next turn, so a timer
        // that keeps rescheduling itself cannot starve the descriptors.
        var due: [() -> Void] = []
        while let top = heap.first, top.deadline <= now {
            popHeap()
            if let body = timerBodies.removeValue(forKey: top.id) { due.append(body) }
        }
        for body in due { body() }
    }

    /// Rounds up, so a wait never ends just before its deadline (which would spin).
    static func milliseconds(_ d: Duration) -> CInt {
        let ns = max(0, d.nanoseconds)
        return CInt(min(Int64(Int32.max), (ns + 999_999) / 1_000_000))
    }

    // MARK: Heap

    private func siftUp(_ i0: Int) {
        var i = i0
        while i > 0 {
            let p = (i - 1) / 2
            guard heap[i].deadline < heap[p].deadline else { break }
            heap.swapAt(i, p)
            i = p
        }
    }

    private func siftDown(_ i0: Int) {
        var i = i0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && heap[l].deadline < heap[m].deadline { m = l }
            if r < heap.count && heap[r].deadline < heap[m].deadline { m = r }
            if m == i { return }
            heap.swapAt(i, m)
            i = m
        }
    }

    private func popHeap() {
        guard !heap.isEmpty else { return }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
    }

    private func compactHeap() {
        heap.removeAll { timerBodies[$0.id] == nil }
        for i in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(i) }
    }
}

/// A bearer an ``EventLoop`` can wait on: its descriptor, and a read that never blocks.
public protocol PollableBearer: ATTBearer {
    /// The descriptor to watch; nil once closed.
    var fileDescriptor: CInt? { get }
    /// The next event without waiting: a PDU or `.closed`; nil when nothing is queued.
    func receiveNow() throws(TransportError) -> BearerEvent?
    /// Sends one PDU without waiting: false when the link has no room for it now (the peer has
    /// not read); the descriptor turns writable once it has.
    func sendNow(_ pdu: [UInt8]) throws(TransportError) -> Bool
}

extension PollableBearer {
    /// A bearer that cannot tell: ``ATTBearer/send(_:)``, which may wait.
    public func sendNow(_ pdu: [UInt8]) throws(TransportError) -> Bool {
        try send(pdu)
        return true
    }
}

extension UnixSeqpacketBearer: PollableBearer {}

/// How far ``SteppedSecurityBearer/beginRaisingSecurity(to:lastTry:)`` got.
public enum SecurityProgress: Sendable, Equatable {
    /// The link has the level already.
    case done
    /// Pairing or encryption under way: the descriptor turns writable when it ended; then
    /// ``SteppedSecurityBearer/finishRaisingSecurity(to:timedOut:)``.
    case pending
    /// The link cannot be asked yet (right after connecting): ask again shortly.
    case notReady
}

/// A bearer whose security an event loop raises without waiting in it: begin, wait for the
/// descriptor to be writable (at most ``securityTimeout``), finish.
public protocol SteppedSecurityBearer: PollableBearer {
    /// How long pairing or encryption may take.
    var securityTimeout: Duration { get }
    /// Asks for `level`. `lastTry`: a link still not ready is an error now.
    func beginRaisingSecurity(to level: SecurityLevel, lastTry: Bool) throws(TransportError) -> SecurityProgress
    /// Once the descriptor is writable or hung up (or `timedOut`): whether the link has `level`.
    func finishRaisingSecurity(to level: SecurityLevel, timedOut: Bool) throws(TransportError)
    /// While pending, wait for the descriptor to be readable (a conversation, e.g. with
    /// bluetoothd) instead of writable, and call ``securityProgressed()`` each time.
    var securityWaitIsReadable: Bool { get }
    /// A step of a readable wait: true once it ended (then ``finishRaisingSecurity(to:timedOut:)``).
    func securityProgressed() throws(TransportError) -> Bool
}

extension SteppedSecurityBearer {
    public var securityWaitIsReadable: Bool { false }
    public func securityProgressed() throws(TransportError) -> Bool { true }
}

/// A connection under way that an ``EventLoop`` waits for. Either its descriptor turns writable
/// when the link is up or the attempt failed (a non-blocking `connect`), then ``finish()`` says
/// which; or (``waitsForReadable``) it is a conversation, e.g. with bluetoothd over D-Bus, that
/// ``advance()`` takes a step further whenever the descriptor is readable.
public protocol PendingConnection: AnyObject {
    var fileDescriptor: CInt? { get }
    /// Watch the descriptor for readability and call ``advance()`` (default: writability, then
    /// ``finish()``).
    var waitsForReadable: Bool { get }
    /// How long the attempt may take before it is given up and started again (nil: the attempt
    /// ends by itself).
    var attemptTimeout: Duration? { get }
    /// The connected bearer, or why the attempt failed.
    func finish() throws(TransportError) -> any PollableBearer
    /// A step on readiness: the bearer once connected, nil while still under way.
    func advance() throws(TransportError) -> (any PollableBearer)?
    /// Gives up; closes the descriptor.
    func cancel()
}

extension PendingConnection {
    public var waitsForReadable: Bool { false }
    public var attemptTimeout: Duration? { nil }
    public func advance() throws(TransportError) -> (any PollableBearer)? { try finish() }
}
