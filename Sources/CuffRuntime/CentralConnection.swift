// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSession
import Transport

/// Takes the records of many sessions and makes them durable together (one transaction a loop
/// turn), then tells each session that its measurement is kept: the session confirms the
/// indication to the cuff only then.
public protocol MeasurementCommitter: AnyObject {
    /// Takes `output` from `connection`, in the session's order. For a `.measurement`, the session
    /// waits until the committer calls ``CentralConnection/committed(failure:new:)``.
    func enqueue(_ output: SessionOutput, from connection: CentralConnection)
}

/// One central session (the ``ProtocolSession`` chosen for the device) over a pollable bearer, driven by an ``EventLoop``: the
/// one driver of `cuff measure` and of each cuff `cuff watch` follows.
///
/// Records go to `hooks.emit` at once (durable on return), or with a ``MeasurementCommitter`` to a
/// group commit; either way nothing after a measurement (its confirmation first of all) is sent
/// before the measurement was kept.
public final class CentralConnection {
    public private(set) var central: ProtocolSession
    public let bearer: any PollableBearer
    let loop: EventLoop
    let hooks: SessionHooks
    let committer: MeasurementCommitter?
    /// Why a record could not be kept, once that happened (the session then ends).
    public private(set) var sinkFailure: String?
    /// Measurements the committer kept that were new (not ones it held already).
    public private(set) var keptMeasurements = 0
    /// Measurements that reached the committer, new, already held or not kept.
    public private(set) var arrivedMeasurements = 0
    /// Called once when the session has ended and the link is closed.
    public var onFinish: ((CentralConnection) -> Void)?

    /// Where the connection is: each case holds what only that stage has.
    enum Stage {
        /// Reading the link and handing its events to the session.
        case running
        /// Outputs wait (`wait`); a tick that came due meanwhile (`tickDue`) runs once they ran.
        case waiting(Wait, tickDue: Bool)
        /// The session ended and the link is closed.
        case ended
    }

    /// What outputs wait for.
    enum Wait {
        /// The committer to keep a measurement: `rest` are the outputs after it.
        case commit(rest: ArraySlice<CentralAction>)
        /// Security being raised on a ``SteppedSecurityBearer``: the link is read again only once
        /// the raise ended (as when it blocked).
        case security(SecurityWait)
    }

    /// A raise under way: the level asked for, the outputs after the request, when it began,
    /// whether the bearer is waiting for pairing to end (`pending`) and the timer that polls or
    /// gives up.
    struct SecurityWait {
        var level: SecurityLevel
        var rest: ArraySlice<CentralAction>
        var started: Timestamp
        var pending = false
        var timer: EventLoop.TimerID?
    }

    /// The link as this connection holds it.
    enum Link {
        /// Open; its descriptor is watched once ``start()`` ran.
        case open(watched: CInt?)
        /// Closed; `told`: the session heard of it (``tellClosed(_:)``).
        case closed(told: Bool)
    }

    /// A stop asked for (``stop(reason:)``): not yet, asked, or handed to the session.
    enum StopRequest {
        case none
        case asked
        case sentToSession
    }

    /// The timer armed for the session's next deadline.
    struct ArmedTimer {
        var deadline: Timestamp
        var id: EventLoop.TimerID
    }

    var stage: Stage = .running
    var link: Link = .open(watched: nil)
    var stopRequest: StopRequest = .none
    var armed: ArmedTimer?
    /// The session's actions for one event, kept between events (emptied, its capacity kept: the
    /// ``ActionMachine`` convention); an event taken while another one's actions run gets a new
    /// array, and actions left waiting (a measurement being kept) keep theirs.
    var actions = ActionBuffer<CentralAction>()
    /// At most this many PDUs are read per readiness, so one busy link cannot starve the others.
    static let readBudget = 32

    public var stopRequested: Bool {
        if case .none = stopRequest { return false }
        return true
    }

    var linkClosed: Bool {
        if case .closed = link { return true }
        return false
    }

    var watchedFD: CInt? {
        if case let .open(fd) = link { return fd }
        return nil
    }

    /// Outputs wait for the committer or a security raise.
    var isWaiting: Bool {
        if case .waiting = stage { return true }
        return false
    }

    /// Outputs wait for the committer (a measurement not kept yet).
    var isParked: Bool {
        if case .waiting(.commit, _) = stage { return true }
        return false
    }

    /// The security raise under way, if one is.
    var securityWait: SecurityWait? {
        if case let .waiting(.security(w), _) = stage { return w }
        return nil
    }

    public init(
        configuration: CuffSessionConfiguration, bearer: any PollableBearer, loop: EventLoop, hooks: SessionHooks,
        committer: MeasurementCommitter? = nil
    ) {
        central = ProtocolSession(configuration: configuration)
        self.bearer = bearer
        self.loop = loop
        self.hooks = hooks
        self.committer = committer
    }

    public var isFinished: Bool {
        if case .ended = stage { return true }
        return false
    }
    public var outcome: SessionOutcome {
        central.outcome ?? .noResult
    }

    /// The link is up: watch it and start the session.
    public func start() {
        let now = WallClock.eventTime()
        hooks.link?(.connected(now))
        if let fd = bearer.fileDescriptor {
            do {
                try loop.watch(fd) { [unowned self] r in self.ready(r) }
                link = .open(watched: fd)
            } catch {
                hooks.log("cannot watch the link: \(error.message)")
                link = .closed(told: false)
            }
        } else {
            link = .closed(told: false)
        }
        step { $0.start(at: now, into: &$1) }
        settle()
    }

    /// Asks the cuff to stop (Ctrl-C, SIGTERM, `--stop-after`); the session ends on its own after.
    public func stop(reason: String) {
        guard !stopRequested, !isFinished else { return }
        stopRequest = .asked
        hooks.log(reason)
        if isWaiting { return }  // looked at again once the measurement is kept / the raise ended
        stopRequest = .sentToSession
        let at = WallClock.eventTime()
        step { $0.stop(at: at, into: &$1) }
        settle()
    }

    /// Ends the session at once: the link is closed (the cuff keeps anything not confirmed).
    public func abort(_ why: String) {
        guard !isFinished else { return }
        if let w = securityWait {
            stage = .running
            if let t = w.timer { loop.cancel(t) }
        }
        closeLink()
        if !isParked { tellClosed(why) }
        settle()
    }

    /// The committer kept (or, with `failure`, could not keep) the measurement this session waits
    /// on; `new` is false when it held that measurement already.
    public func committed(failure: String? = nil, new: Bool = true) {
        guard case let .waiting(.commit(rest), tickDue) = stage else { return }
        stage = .running
        arrivedMeasurements += 1
        if failure == nil && new { keptMeasurements += 1 }
        if let failure {
            // A result that cannot be kept is not confirmed: stop here, keep what was kept.
            sinkFailure = failure
            hooks.log("cannot store the result: \(failure)")
            closeLink()
            tellClosed("sink failed")
        } else {
            execute(rest)
        }
        runWhatWaited(stop: failure == nil, tickDue: tickDue)
        settle()
    }

    /// What waited while a measurement was being kept or security raised, once neither is under
    /// way any more: a stop asked for meanwhile (`stop`), then a tick that came due (`tickDue`).
    /// When outputs wait again, the tick waits with them.
    func runWhatWaited(stop: Bool = true, tickDue: Bool) {
        guard !isWaiting else { return keepTickDue(tickDue) }
        if stop, case .asked = stopRequest, !central.isFinished {
            stopRequest = .sentToSession
            let at = WallClock.eventTime()
            step { $0.stop(at: at, into: &$1) }
        }
        guard tickDue else { return }
        guard !isWaiting else { return keepTickDue(tickDue) }
        let at = WallClock.eventTime()
        step { $0.tick(at: at, into: &$1) }
    }

    /// A tick came due while outputs wait: it runs once they ran.
    func keepTickDue(_ due: Bool) {
        guard due, case let .waiting(wait, _) = stage else { return }
        stage = .waiting(wait, tickDue: true)
    }

    // MARK: Events

    func ready(_ r: EventLoop.Readiness) {
        if let w = securityWait {
            // Only writability (pairing ended) or a hang-up is watched meanwhile.
            if w.pending, let b = bearer as? any SteppedSecurityBearer, b.securityWaitIsReadable, !r.contains(.hangUp) {
                do {
                    if try b.securityProgressed() { finishSecurity(timedOut: false) }
                } catch {
                    endSecurity(failure: error.message)
                }
                return
            }
            if w.pending || r.contains(.hangUp) { finishSecurity(timedOut: false) }
            return
        }
        guard case .running = stage else { return }
        var budget = Self.readBudget
        while budget > 0, !isParked, !linkClosed, !central.isFinished {
            budget -= 1
            let event: BearerEvent?
            do {
                event = try bearer.receiveNow()
            } catch {
                closeLink()
                tellClosed(error.message)
                break
            }
            guard let event else { break }
            let at = WallClock.eventTime()
            switch event {
            case let .pdu(pdu):
                hooks.link?(.pdu(sent: false, pdu, at))
                step { $0.receive(pdu, at: at, into: &$1) }
            case .timeout:
                budget = 0
            case let .closed(why):
                closeLink()
                tellClosed(why)
            }
        }
        settle()
    }

    func timerFired() {
        armed = nil
        guard !isFinished else { return }
        if isWaiting {
            keepTickDue(true)
            return
        }
        let at = WallClock.eventTime()
        step { $0.tick(at: at, into: &$1) }
        settle()
    }

    // MARK: Security without blocking the loop

    func beginSecurity(_ level: SecurityLevel, rest: ArraySlice<CentralAction>, on bearer: any SteppedSecurityBearer) {
        stage = .waiting(
            .security(SecurityWait(level: level, rest: rest, started: MonotonicClock.now())), tickDue: false)
        if let fd = watchedFD { loop.change(fd, readable: false, writable: false) }  // hang-ups only
        askSecurity(bearer)
    }

    func askSecurity(_ bearer: any SteppedSecurityBearer) {
        guard var w = securityWait else { return }
        w.timer = nil
        let now = MonotonicClock.now()
        do {
            switch try bearer.beginRaisingSecurity(to: w.level, lastTry: now - w.started >= .seconds(3)) {
            case .done:
                updateSecurityWait { $0 = w }
                return endSecurity(failure: nil)
            case .notReady:
                w.timer = loop.schedule(at: now + .milliseconds(50)) { [unowned self] in self.askSecurity(bearer) }
            case .pending:
                w.pending = true
                if let fd = watchedFD {
                    loop.change(fd, readable: bearer.securityWaitIsReadable, writable: !bearer.securityWaitIsReadable)
                }
                w.timer = loop.schedule(at: now + bearer.securityTimeout) { [unowned self] in
                    self.updateSecurityWait { $0.timer = nil }
                    self.finishSecurity(timedOut: true)
                }
            }
            updateSecurityWait { $0 = w }
        } catch {
            updateSecurityWait { $0 = w }
            endSecurity(failure: error.message)
        }
    }

    /// Changes the security raise under way, if one is.
    func updateSecurityWait(_ change: (inout SecurityWait) -> Void) {
        guard case .waiting(.security(var w), let tickDue) = stage else { return }
        change(&w)
        stage = .waiting(.security(w), tickDue: tickDue)
    }

    func finishSecurity(timedOut: Bool) {
        guard let w = securityWait, let bearer = bearer as? any SteppedSecurityBearer else { return }
        do {
            try bearer.finishRaisingSecurity(to: w.level, timedOut: timedOut)
            endSecurity(failure: nil)
        } catch {
            endSecurity(failure: error.message)
        }
    }

    /// The raise ended: the session hears how, then the outputs that waited run.
    func endSecurity(failure: String?) {
        guard case let .waiting(.security(w), tickDue) = stage else { return }
        stage = .running
        if let t = w.timer { loop.cancel(t) }
        if let fd = watchedFD { loop.change(fd, readable: true, writable: false) }
        let at = WallClock.eventTime()
        if let failure {
            step { $0.securityRefused(failure, at: at, into: &$1) }
        } else {
            step { $0.securityRaised(w.level, at: at, into: &$1) }
        }
        // The outputs that waited go after whatever waits now (a measurement being kept, another
        // raise), or run at once.
        if !w.rest.isEmpty {
            switch stage {
            case let .waiting(.commit(rest), due):
                stage = .waiting(.commit(rest: ArraySlice(Array(rest) + Array(w.rest))), tickDue: due)
            case .waiting(.security(var again), let due):
                again.rest = ArraySlice(Array(again.rest) + Array(w.rest))
                stage = .waiting(.security(again), tickDue: due)
            case .running, .ended:
                execute(w.rest)
            }
        }
        runWhatWaited(tickDue: tickDue)
        settle()
        // PDUs that came in meanwhile are read now.
        if !isWaiting && !linkClosed { ready(.readable) }
    }

    /// After handling: end the session, or arm the timer for the machine's next deadline.
    func settle() {
        guard !isFinished else { return }
        if case .closed(told: false) = link, !isParked, !central.isFinished { tellClosed("link closed") }
        if central.isFinished && !isParked {
            finish()
            return
        }
        let d = central.nextDeadline
        guard d != armed?.deadline else { return }
        if let t = armed?.id { loop.cancel(t) }
        armed = nil
        if let d { armed = ArmedTimer(deadline: d, id: loop.schedule(at: d) { [unowned self] in self.timerFired() }) }
    }

    func finish() {
        if let t = securityWait?.timer { loop.cancel(t) }
        stage = .ended
        if let t = armed?.id { loop.cancel(t) }
        armed = nil
        closeLink()
        onFinish?(self)
    }

    /// Tells the session that the link is gone (once). The link is closed already.
    func tellClosed(_ why: String?) {
        if case .closed(told: true) = link { return }
        link = .closed(told: true)
        let at = WallClock.eventTime()
        step { $0.disconnected(why, at: at, into: &$1) }
    }

    func closeLink() {
        switch link {
        case .closed: return
        case let .open(fd):
            if let fd { loop.unwatch(fd) }
            link = .closed(told: false)
            hooks.link?(.disconnected(WallClock.eventTime()))
            bearer.close()
        }
    }

    // MARK: Outputs

    /// Gives the session one event with ``actions`` (emptied; see there) and executes what it asks for.
    func step(_ event: (inout ProtocolSession, inout [CentralAction]) -> Void) {
        var out = actions.take()
        event(&central, &out)
        execute(out[...])
        actions.giveBack(&out)
    }

    func execute(_ outputs: ArraySlice<CentralAction>) {
        var i = outputs.startIndex
        while i < outputs.endIndex {
            let o = outputs[i]
            i += 1
            switch o {
            case let .send(pdu):
                guard !linkClosed else { continue }
                do {
                    try bearer.send(pdu)
                    hooks.link?(.pdu(sent: true, pdu, WallClock.eventTime()))
                } catch {
                    hooks.log("send failed: \(error.message)")
                    closeLink()
                }
            case let .raiseSecurity(level):
                if let stepped = bearer as? any SteppedSecurityBearer {
                    guard !linkClosed else {
                        let at = WallClock.eventTime()
                        step { $0.securityRefused("the link is closed", at: at, into: &$1) }
                        continue
                    }
                    beginSecurity(level, rest: outputs[i...], on: stepped)
                    return
                }
                do {
                    try bearer.raiseSecurity(to: level)
                    let at = WallClock.eventTime()
                    step { $0.securityRaised(level, at: at, into: &$1) }
                } catch {
                    let at = WallClock.eventTime()
                    step { $0.securityRefused(error.message, at: at, into: &$1) }
                }
            case let .emit(output):
                if let committer {
                    committer.enqueue(output, from: self)
                    if case .measurement = output {
                        stage = .waiting(.commit(rest: outputs[i...]), tickDue: false)
                        return
                    }
                    continue
                }
                do {
                    try hooks.emit(output)
                } catch {
                    sinkFailure = "\(error)"
                    hooks.log("cannot store the result: \(error)")
                    closeLink()
                    tellClosed("sink failed")
                    return
                }
            case .disconnect:
                closeLink()
            case let .log(s):
                hooks.log(s)
            case .finished:
                break
            }
        }
    }
}

/// Runs one ``CentralConnection`` on a loop of its own until it ends: `cuff measure` against a
/// Unix-socket simulator or a real cuff.
public final class CentralDriver {
    public var central: ProtocolSession { connection?.central ?? ProtocolSession(configuration: configuration) }
    public var sinkFailure: String? { connection?.sinkFailure }
    let configuration: CuffSessionConfiguration
    let hooks: SessionHooks
    let signals: SignalFlags?
    /// Stop on our own after this long (`--stop-after`).
    let stopAfter: Duration?
    /// Where what the session learns about the cuff is kept (the GATT cache); nil: none.
    let gattCache: GATTCacheStore?
    var connection: CentralConnection?

    public init(
        configuration: CuffSessionConfiguration, hooks: SessionHooks, signals: SignalFlags? = .shared,
        stopAfter: Duration? = nil,
        gattCache: GATTCacheStore? = nil
    ) {
        self.configuration = configuration
        self.hooks = hooks
        self.signals = signals
        self.stopAfter = stopAfter
        self.gattCache = gattCache
    }

    /// Runs the session to its end; returns the outcome.
    ///
    /// - Parameter given: the loop to run it on, with whatever else is served there meanwhile
    ///   (a pairing agent); nil: a loop of its own.
    @discardableResult
    public func run(_ bearer: any PollableBearer, on given: EventLoop? = nil) -> SessionOutcome {
        let loop: EventLoop
        if let given {
            loop = given
        } else {
            do {
                loop = try EventLoop(capacity: 4)
            } catch {
                hooks.log("cannot start the event loop: \(error.message)")
                bearer.close()
                return .connectionFailed
            }
        }
        var config = configuration
        if let gattCache { config = gattCache.session(config, log: hooks.logger) }
        let c = CentralConnection(configuration: config, bearer: bearer, loop: loop, hooks: hooks)
        connection = c
        defer {
            if let gattCache, case let .on(before) = config.gattCache {
                gattCache.keep(c.central, before: before, address: config.address, log: hooks.logger)
            }
        }
        let started = MonotonicClock.now()
        c.start()
        do {
            try loop.run {
                if c.isFinished { return true }
                if !c.stopRequested {
                    if let s = signals, s.isRaised(.int) || s.isRaised(.term) {
                        c.stop(reason: "stopping (interrupted)")
                    } else if let stopAfter, MonotonicClock.now() >= started + stopAfter {
                        c.stop(reason: "stopping (--stop-after reached)")
                    }
                }
                return c.isFinished
            }
        } catch {
            hooks.log("event loop failed: \(error.message)")
            c.abort("event loop failed")
        }
        return c.outcome
    }
}
