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
                try loop.watch(fd) { [unowned self] _ in self.ready() }
                watchedFD = fd
            } catch {
                return end(.transportFailed(error.message))
            }
        }
        peripheral.linkSecurityChanged(bearer.securityLevel)
        let now = clock.now()
        if let e = step({ $0.connected(now: now, client: client, into: &$1) }) { return end(e) }
        settle()
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

    func ready() {
        guard let bearer else { return }
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
        }
        settle()
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
                do {
                    try bearer.send(pdu)
                } catch {
                    _ = peripheral.disconnected(now: clock.now())
                    return .transportFailed(error.message)
                }
            case let .log(s):
                log.info("\(s)")
            case let .disconnect(why):
                guard bearer != nil else { continue }
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

    public init(driver: PeripheralDriver<Peripheral>, listener: UnixSeqpacketListener, loop: EventLoop, log: Logger) {
        self.driver = driver
        self.listener = listener
        self.loop = loop
        self.log = log
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
            log.info("accept failed: \(error.message)")
            return
        }
        guard let bearer else { return }
        if let fd = listener.fileDescriptor { loop.unwatch(fd) }
        listening = false
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

    /// Ends the connection (if any) and stops listening; removes the socket.
    public func stop() {
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
