// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffLogging
import CuffSimulator
import GATT
import Logging
import Transport

/// How a peripheral's connection ended.
public enum PeripheralEnd: Sendable, Equatable {
    /// The client went away (or the cuff dropped the link).
    case disconnected(String)
    /// SIGINT/SIGTERM.
    case interrupted
    case transportFailed(String)
}

/// Runs a peripheral (the simulated cuff, a captured one) on an ``EventLoop``: one connection at
/// a time, one after another, with the peripheral's clock running in between (a cuff that
/// measures on its own schedule keeps its readings for the next client).
public final class PeripheralDriver<Peripheral: GATTPeripheral> {
    public typealias End = PeripheralEnd

    public private(set) var peripheral: Peripheral
    public let clock: SimulationClock
    let log: Logger
    let signals: SignalFlags?

    var loop: EventLoop?
    var bearer: (any PollableBearer)?
    var watchedFD: CInt?
    var onEnd: ((End) -> Void)?
    var timer: EventLoop.TimerID?
    var armedDeadline: Timestamp?
    /// The peripheral's outputs for one event, kept between events (emptied, its capacity kept:
    /// the ``ActionMachine`` convention), so a PDU or a tick allocates no array of its own.
    var outputs = ActionBuffer<PeripheralOutput>()
    static var readBudget: Int { 32 }
    /// PDUs the client's socket had no room for, oldest first (from `unsentStart`). While any
    /// wait, the client's requests are not read (they wait in its socket, so what is owed stays
    /// bounded) and the descriptor is watched for room; the loop never waits in a send, so
    /// other cuffs of a fleet and the stop signals go on.
    var unsent: [[UInt8]] = []
    var unsentStart = 0
    /// Ends the connection when the client has taken nothing for ``stallTimeout``.
    var stallTimer: EventLoop.TimerID?
    /// How long a client may leave the cuff's PDUs unread before it is dropped.
    static var stallTimeout: Duration { .seconds(5) }
    /// How many PDUs may wait for a client that does not read (pushes the cuff makes meanwhile)
    /// before it is dropped.
    static var unsentLimit: Int { 256 }
    var isStalled: Bool { unsentStart < unsent.count }
    /// The cuff dropped the link while PDUs still waited for room: it is dropped once they went
    /// out (as a cuff's radio sends what it queued before it disconnects), or at the stall timeout.
    var disconnectAfterUnsent: String?
    /// How long (real time) a client may stay connected without a single PDU either way before
    /// the cuff drops it, nil for no limit. A cuff serves one client at a time: one that connects
    /// and sends nothing would otherwise hold it for good, every later client waiting in the
    /// listen queue (probe R). A real cuff switches its radio off; a client that subscribed, or
    /// had anything sent to it, is never dropped for its silence (it waits for a measurement).
    /// ``ListeningPeripheral`` sets ``ListeningPeripheral/silentClientTimeout``.
    public var silentClientTimeout: Duration?
    /// Runs from the connection until the first PDU either way.
    var silenceTimer: EventLoop.TimerID?

    public init(peripheral: Peripheral, clock: SimulationClock, signals: SignalFlags? = .shared, log: Logger) {
        self.peripheral = peripheral
        self.clock = clock
        self.signals = signals
        self.log = log
    }

    /// Whether a client is connected now.
    public var isConnected: Bool { bearer != nil }

    /// Runs the peripheral's clock on `loop` from now on, also between connections.
    public func attach(to loop: EventLoop) {
        self.loop = loop
        peripheral.poweredOn(now: clock.now())
        settle()
    }

    /// Serves `bearer` on the attached loop until the connection ends; then `onEnd`. `client`
    /// identifies the peer when the transport knows it (a Bluetooth address): the cuff remembers
    /// which stored readings each client confirmed.
    public func accept(_ bearer: any PollableBearer, client: String? = nil, onEnd: @escaping (End) -> Void) {
        guard let loop, self.bearer == nil else {
            bearer.close()
            return onEnd(.transportFailed("a client is already connected"))
        }
        self.bearer = bearer
        self.onEnd = onEnd
        if let fd = bearer.fileDescriptor {
            do {
                try loop.watch(fd) { [unowned self] readiness in self.ready(readiness) }
                watchedFD = fd
            } catch {
                return end(.transportFailed(error.message))
            }
        }
        peripheral.linkSecurityChanged(bearer.securityLevel)
        let now = clock.now()
        armSilenceTimer()
        if let e = step({ $0.connected(now: now, client: client, into: &$1) }) { return end(e) }
        settle()
    }

    /// Starts the wait for the client's first PDU (``silentClientTimeout``).
    func armSilenceTimer() {
        guard let loop, let limit = silentClientTimeout else { return }
        silenceTimer = loop.schedule(at: MonotonicClock.now() + limit) { [unowned self] in
            self.silenceTimer = nil
            guard self.bearer != nil else { return }
            let out = self.peripheral.disconnected(now: self.clock.now())
            for case let .log(s) in out { self.log.info("\(s)") }
            self.end(.disconnected("the client sent nothing for \(limit); connection dropped"))
        }
    }

    /// Something went over the link: the client is not silent.
    @inline(__always) func heard() {
        if let t = silenceTimer {
            loop?.cancel(t)
            silenceTimer = nil
        }
    }

    /// The cuff's button (SIGUSR1).
    public func pressButton() {
        let now = clock.now()
        if let e = step({ $0.buttonPressed(now: now, into: &$1) }) { end(e) }
        settle()
    }

    /// Ends the connection at once (SIGINT, SIGTERM).
    public func interrupt() {
        guard bearer != nil else { return }
        _ = peripheral.disconnected(now: clock.now())
        end(.interrupted)
    }

    /// Serves one connection on a loop of its own until it ends: the blocking form, for a single
    /// client (a Bluetooth adapter, tests). SIGINT/SIGTERM end it; SIGUSR1 presses the button.
    ///
    /// - Parameter given: the loop to run it on, with whatever else is served there meanwhile
    ///   (a pairing agent); nil: a loop of its own.
    public func serve(_ bearer: any PollableBearer, client: String? = nil, on given: EventLoop? = nil) -> End {
        let previous = loop
        defer { loop = previous }
        let own: EventLoop
        if let given {
            own = given
        } else {
            do {
                own = try EventLoop(capacity: 4)
            } catch {
                bearer.close()
                return .transportFailed(error.message)
            }
        }
        if let t = timer, let previous { previous.cancel(t) }
        timer = nil
        armedDeadline = nil
        attach(to: own)
        var result: End?
        accept(bearer, client: client) { result = $0 }
        do {
            try own.run {
                if result == nil, let s = signals {
                    if s.isRaised(.int) || s.isRaised(.term) { interrupt() } else if s.consume(.usr1) { pressButton() }
                }
                return result != nil
            }
        } catch {
            if result == nil {
                _ = peripheral.disconnected(now: clock.now())
                end(.transportFailed(error.message))
            }
        }
        if let t = timer { own.cancel(t) }
        timer = nil
        armedDeadline = nil
        return result ?? .transportFailed("event loop ended")
    }

    // MARK: Events

    func ready(_ readiness: EventLoop.Readiness = .readable) {
        guard let bearer else { return }
        if isStalled {
            if readiness.contains(.writable) || readiness.contains(.hangUp) {
                // A client that shut down only its writing may still read what waits: send it. One
                // that is gone fails the send.
                if let e = flush() {
                    if case .transportFailed = e, readiness.contains(.hangUp) {
                        return end(.disconnected("the client closed the connection"))
                    }
                    return end(e)
                }
            }
            if isStalled {
                // Still waiting for room: a half-close, once seen, is not reported again meanwhile
                // (reading the client resumes once all went out, and finds it there).
                if readiness.contains(.hangUp), let fd = watchedFD {
                    loop?.change(fd, readable: false, writable: true, peerShutdown: false)
                }
                return
            }
        }
        for _ in 0..<Self.readBudget {
            let event: BearerEvent?
            do {
                event = try bearer.receiveNow()
            } catch {
                _ = peripheral.disconnected(now: clock.now())
                return end(.transportFailed(error.message))
            }
            guard let event else { break }
            switch event {
            case let .pdu(pdu):
                heard()
                peripheral.linkSecurityChanged(bearer.securityLevel)
                let now = clock.now()
                if let e = step({ $0.receive(pdu, now: now, into: &$1) }) { return end(e) }
            case .timeout:
                break
            case let .closed(why):
                let out = peripheral.disconnected(now: clock.now())
                for case let .log(s) in out { log.info("\(s)") }
                return end(.disconnected(why ?? "the client closed the connection"))
            }
            if self.bearer == nil { return }
            if isStalled { break }
        }
        settle()
    }

    /// Sends what waits for room; when all went out, reads the client again.
    func flush() -> End? {
        guard let bearer else { return nil }
        var sent = 0
        while unsentStart < unsent.count {
            do {
                guard try bearer.sendNow(unsent[unsentStart]) else { break }
            } catch {
                _ = peripheral.disconnected(now: clock.now())
                return .transportFailed(error.message)
            }
            unsentStart += 1
            sent += 1
        }
        if !isStalled {
            unsent.removeAll(keepingCapacity: true)
            unsentStart = 0
            if let t = stallTimer { loop?.cancel(t) }
            stallTimer = nil
            if let why = disconnectAfterUnsent {
                let out = peripheral.disconnected(now: clock.now())
                for case let .log(s) in out { log.info("\(s)") }
                return .disconnected(why)
            }
            if let fd = watchedFD { loop?.change(fd, readable: true, writable: false) }
        } else if sent > 0 {
            armStallTimer()
        }
        return nil
    }

    /// Keeps `pdu` for when the client's socket has room; the end when too many wait.
    func keepUnsent(_ pdu: [UInt8]) -> End? {
        if !isStalled {
            unsent.removeAll(keepingCapacity: true)
            unsentStart = 0
            if let fd = watchedFD { loop?.change(fd, readable: false, writable: true) }
            armStallTimer()
        }
        guard unsent.count - unsentStart < Self.unsentLimit else {
            _ = peripheral.disconnected(now: clock.now())
            return .transportFailed(
                "the client does not read: \(Self.unsentLimit) PDUs wait for it; connection dropped")
        }
        unsent.append(pdu)
        return nil
    }

    /// (Re)starts the wait for the client to take what waits.
    func armStallTimer() {
        guard let loop else { return }
        if let t = stallTimer { loop.cancel(t) }
        stallTimer = loop.schedule(at: MonotonicClock.now() + Self.stallTimeout) { [unowned self] in
            self.stallTimer = nil
            guard self.isStalled, self.bearer != nil else { return }
            _ = self.peripheral.disconnected(now: self.clock.now())
            self.end(
                .transportFailed(
                    "the client has not read for \(Self.stallTimeout); \(self.unsent.count - self.unsentStart) PDUs unsent"
                ))
        }
    }

    func timerFired() {
        timer = nil
        armedDeadline = nil
        if let d = peripheral.nextDeadline, clock.now() >= d {
            let now = clock.now()
            if let e = step({ $0.tick(now: now, into: &$1) }) { return end(e) }
        }
        settle()
    }

    /// Arms the timer for the peripheral's next deadline (in simulated time).
    func settle() {
        guard let loop else { return }
        let d = peripheral.nextDeadline
        guard d != armedDeadline else { return }
        if let t = timer { loop.cancel(t) }
        timer = nil
        armedDeadline = d
        guard let d else { return }
        timer = loop.schedule(at: MonotonicClock.now() + clock.realInterval(until: d)) { [unowned self] in
            self.timerFired()
        }
    }

    /// Closes the connection (the peripheral already knows) and reports how it ended.
    func end(_ e: End) {
        if let t = stallTimer { loop?.cancel(t) }
        stallTimer = nil
        heard()
        unsent.removeAll()
        unsentStart = 0
        disconnectAfterUnsent = nil
        if let fd = watchedFD {
            loop?.unwatch(fd)
            watchedFD = nil
        }
        bearer?.close()
        bearer = nil
        let callback = onEnd
        onEnd = nil
        settle()
        callback?(e)
    }

    /// Gives the peripheral one event with ``outputs`` (emptied; an event taken while another
    /// one's outputs run gets a new array) and executes what it asks for.
    func step(_ event: (inout Peripheral, inout [PeripheralOutput]) -> Void) -> End? {
        var out = outputs.take()
        event(&peripheral, &out)
        let e = execute(out)
        outputs.giveBack(&out)
        return e
    }

    /// Sends and logs; returns the end when the cuff dropped the link or a send failed (the
    /// peripheral has been told it is disconnected).
    func execute(_ outputs: [PeripheralOutput]) -> End? {
        for o in outputs {
            switch o {
            case let .send(pdu):
                guard let bearer else { continue }  // between connections: nobody to send to
                heard()
                if disconnectAfterUnsent != nil { continue }  // the cuff is leaving: nothing new
                if isStalled {
                    if let e = keepUnsent(pdu) { return e }
                    continue
                }
                do {
                    if try !bearer.sendNow(pdu), let e = keepUnsent(pdu) { return e }
                } catch {
                    _ = peripheral.disconnected(now: clock.now())
                    return .transportFailed(error.message)
                }
            case let .log(s):
                log.info("\(s)")
            case let .disconnect(why):
                guard bearer != nil else { continue }
                if isStalled {
                    disconnectAfterUnsent = disconnectAfterUnsent ?? why
                    continue
                }
                let out = peripheral.disconnected(now: clock.now())
                for case let .log(s) in out { log.info("\(s)") }
                return .disconnected(why)
            }
        }
        return nil
    }
}

/// A peripheral that serves clients on a listening Unix socket, on an ``EventLoop``: one client at
/// a time (as a cuff serves one central); the next waits in the listen queue.
public final class ListeningPeripheral<Peripheral: GATTPeripheral> {
    public let driver: PeripheralDriver<Peripheral>
    public let listener: UnixSeqpacketListener
    let loop: EventLoop
    let log: Logger
    /// Connections served so far.
    public private(set) var sessions = 0
    var listening = false
    /// While accepting fails (no descriptor left: EMFILE, ENFILE, ENOBUFS), the listener is not
    /// watched (it stays readable, so watching it would spin) and this timer tries again.
    var retry: EventLoop.TimerID?
    /// Accepting failed and has not succeeded since (said once per such stretch).
    var acceptFailing = false
    /// How long to wait before accepting again after a failed accept.
    static var acceptRetry: Duration { .milliseconds(250) }

    /// The default ``PeripheralDriver/silentClientTimeout`` on a socket: ATT's transaction
    /// timeout (Core Vol 3 Part F §3.3.3), the longest a client waits for any answer.
    public static var silentClientTimeout: Duration { .seconds(30) }

    public init(
        driver: PeripheralDriver<Peripheral>, listener: UnixSeqpacketListener, loop: EventLoop, log: Logger,
        silentClientTimeout: Duration? = ListeningPeripheral.silentClientTimeout
    ) {
        self.driver = driver
        self.listener = listener
        self.loop = loop
        self.log = log
        driver.silentClientTimeout = silentClientTimeout
    }

    /// Starts the peripheral's clock and accepting.
    public func start() throws(TransportError) {
        driver.attach(to: loop)
        try listen()
    }

    func listen() throws(TransportError) {
        guard let fd = listener.fileDescriptor, !listening else { return }
        try loop.watch(fd) { [unowned self] _ in self.acceptOne() }
        listening = true
    }

    func acceptOne() {
        let bearer: UnixSeqpacketBearer?
        do {
            bearer = try listener.accept(timeout: .zero)
        } catch {
            // Said once per failing stretch; the listener rests meanwhile (the client waits in
            // the listen queue) rather than being polled again at once, without end.
            if !acceptFailing {
                acceptFailing = true
                log.info("accept failed: \(error.message); trying again every \(Self.acceptRetry)")
            }
            pauseAccepting()
            return
        }
        guard let bearer else { return }
        if let fd = listener.fileDescriptor { loop.unwatch(fd) }
        listening = false
        if acceptFailing {
            acceptFailing = false
            log.info("accepting again")
        }
        sessions += 1
        let n = sessions
        log.info("session \(n): client connected")
        driver.accept(bearer) { [unowned self] end in
            self.log.info("session \(n) ended: \(end)")
            do throws(TransportError) { try self.listen() } catch {
                self.log.info("cannot accept any more: \(error.message)")
            }
        }
    }

    /// Stops watching the listener for ``acceptRetry``, then accepts again.
    func pauseAccepting() {
        if let fd = listener.fileDescriptor, listening { loop.unwatch(fd) }
        listening = false
        retry = loop.schedule(at: MonotonicClock.now() + Self.acceptRetry) { [unowned self] in
            self.retry = nil
            do throws(TransportError) { try self.listen() } catch {
                self.log.info("cannot accept any more: \(error.message)")
            }
            self.acceptOne()
        }
    }

    /// Ends the connection (if any) and stops listening; removes the socket.
    public func stop() {
        if let t = retry { loop.cancel(t) }
        retry = nil
        driver.interrupt()
        if let fd = listener.fileDescriptor, listening { loop.unwatch(fd) }
        listening = false
        listener.close()
    }
}

/// Why ``ListeningPeripheral/serve(_:loop:signals:)`` stopped before a signal asked it to.
public struct ListeningFailure: Error, Sendable {
    /// The socket that could not accept; nil when the event loop itself failed.
    public var path: String?
    public var error: TransportError
}

extension ListeningPeripheral {
    /// Starts every cuff of `cuffs` and serves their clients on `loop` until SIGINT or SIGTERM;
    /// SIGUSR1 presses every cuff's button (`cuff simulate`, one cuff or a fleet).
    ///
    /// - Throws: ``ListeningFailure`` naming the socket that could not accept, or the loop's failure.
    public static func serve(_ cuffs: [ListeningPeripheral], loop: EventLoop, signals: SignalFlags)
        throws(ListeningFailure)
    {
        for c in cuffs {
            do throws(TransportError) { try c.start() } catch {
                throw ListeningFailure(path: c.listener.path, error: error)
            }
        }
        do throws(TransportError) {
            try loop.run {
                if signals.isRaised(.int) || signals.isRaised(.term) { return true }
                if signals.consume(.usr1) { for c in cuffs { c.driver.pressButton() } }
                return false
            }
        } catch {
            throw ListeningFailure(path: nil, error: error)
        }
    }
}
