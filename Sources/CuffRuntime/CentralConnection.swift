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

    var linkClosed = false
    public private(set) var stopRequested = false
    var timer: EventLoop.TimerID?
    var armedDeadline: Timestamp?
    /// Outputs waiting behind a measurement the committer has not kept yet.
    var parked: ArraySlice<CentralAction>?
    var tickDue = false
    var watchedFD: CInt?
    var ended = false
    /// At most this many PDUs are read per readiness, so one busy link cannot starve the others.
    static let readBudget = 32

    public init(configuration: CuffSessionConfiguration, bearer: any PollableBearer, loop: EventLoop, hooks: SessionHooks,
                committer: MeasurementCommitter? = nil) {
        central = ProtocolSession(configuration: configuration)
        self.bearer = bearer
        self.loop = loop
        self.hooks = hooks
        self.committer = committer
    }

    public var isFinished: Bool { ended }
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
                watchedFD = fd
            } catch {
                hooks.log("cannot watch the link: \(error.message)")
                linkClosed = true
            }
        } else {
            linkClosed = true
        }
        execute(central.start(at: now)[...])
        settle()
    }

    /// Asks the cuff to stop (Ctrl-C, SIGTERM, `--stop-after`); the session ends on its own after.
    public func stop(reason: String) {
        guard !stopRequested, !ended else { return }
        stopRequested = true
        hooks.log(reason)
        if parked != nil || securityWait != nil { return }  // looked at again once the measurement is kept / the raise ended
        stopSentToCentral = true
        execute(central.stop(at: WallClock.eventTime())[...])
        settle()
    }

    /// Ends the session at once: the link is closed (the cuff keeps anything not confirmed).
    public func abort(_ why: String) {
        guard !ended else { return }
        if let w = securityWait {
            securityWait = nil
            if let t = w.timer { loop.cancel(t) }
        }
        closeLink()
        if parked == nil { tellClosed(why) }
        settle()
    }

    /// The committer kept (or, with `failure`, could not keep) the measurement this session waits
    /// on; `new` is false when it held that measurement already.
    public func committed(failure: String? = nil, new: Bool = true) {
        guard let rest = parked else { return }
        parked = nil
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
        runWhatWaited(stop: failure == nil)
        settle()
    }

    /// What waited while a measurement was being kept or security raised, once neither is under
    /// way any more: a stop asked for meanwhile (`stop`), then a tick that came due.
    func runWhatWaited(stop: Bool = true) {
        guard parked == nil && securityWait == nil else { return }
        if stop && stopRequested && !central.isFinished && !stopSentToCentral {
            stopSentToCentral = true
            execute(central.stop(at: WallClock.eventTime())[...])
        }
        if parked == nil && securityWait == nil && tickDue {
            tickDue = false
            execute(central.tick(at: WallClock.eventTime())[...])
        }
    }

    var stopSentToCentral = false
    var toldClosed = false
    /// Security being raised on a ``SteppedSecurityBearer``: the outputs after the request wait,
    /// and the link is read again only once it ended (as when the raise blocked).
    var securityWait: (level: SecurityLevel, rest: ArraySlice<CentralAction>, started: Timestamp, pending: Bool, timer: EventLoop.TimerID?)?

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
        guard parked == nil, !ended else { return }
        var budget = Self.readBudget
        while budget > 0, parked == nil, !linkClosed, !central.isFinished {
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
                execute(central.receive(pdu, at: at)[...])
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
        timer = nil
        armedDeadline = nil
        guard !ended else { return }
        if parked != nil || securityWait != nil {
            tickDue = true
            return
        }
        execute(central.tick(at: WallClock.eventTime())[...])
        settle()
    }

    // MARK: Security without blocking the loop

    func beginSecurity(_ level: SecurityLevel, rest: ArraySlice<CentralAction>, on bearer: any SteppedSecurityBearer) {
        securityWait = (level, rest, MonotonicClock.now(), false, nil)
        if let fd = watchedFD { loop.change(fd, readable: false, writable: false) }  // hang-ups only
        askSecurity(bearer)
    }

    func askSecurity(_ bearer: any SteppedSecurityBearer) {
        guard var w = securityWait, !ended else { return }
        w.timer = nil
        let now = MonotonicClock.now()
        do {
            switch try bearer.beginRaisingSecurity(to: w.level, lastTry: now - w.started >= .seconds(3)) {
            case .done:
                securityWait = w
                return endSecurity(failure: nil)
            case .notReady:
                w.timer = loop.schedule(at: now + .milliseconds(50)) { [unowned self] in self.askSecurity(bearer) }
            case .pending:
                w.pending = true
                if let fd = watchedFD { loop.change(fd, readable: bearer.securityWaitIsReadable, writable: !bearer.securityWaitIsReadable) }
                w.timer = loop.schedule(at: now + bearer.securityTimeout) { [unowned self] in
                    self.securityWait?.timer = nil
                    self.finishSecurity(timedOut: true)
                }
            }
            securityWait = w
        } catch {
            securityWait = w
            endSecurity(failure: error.message)
        }
    }

    func finishSecurity(timedOut: Bool) {
        guard let w = securityWait, !ended, let bearer = bearer as? any SteppedSecurityBearer else { return }
        do {
            try bearer.finishRaisingSecurity(to: w.level, timedOut: timedOut)
            endSecurity(failure: nil)
        } catch {
            endSecurity(failure: error.message)
        }
    }

    /// The raise ended: the session hears how, then the outputs that waited run.
    func endSecurity(failure: String?) {
        guard let w = securityWait else { return }
        securityWait = nil
        if let t = w.timer { loop.cancel(t) }
        if let fd = watchedFD { loop.change(fd, readable: true, writable: false) }
        let at = WallClock.eventTime()
        execute((failure.map { central.securityRefused($0, at: at) } ?? central.securityRaised(w.level, at: at))[...])
        // The outputs that waited go after whatever waits now (a measurement being kept, another
        // raise), or run at once.
        if !w.rest.isEmpty {
            if let p = parked {
                parked = ArraySlice(Array(p) + Array(w.rest))
            } else if var again = securityWait {
                again.rest = ArraySlice(Array(again.rest) + Array(w.rest))
                securityWait = again
            } else {
                execute(w.rest)
            }
        }
        runWhatWaited()
        settle()
        // PDUs that came in meanwhile are read now.
        if parked == nil && securityWait == nil && !linkClosed { ready(.readable) }
    }

    /// After handling: end the session, or arm the timer for the machine's next deadline.
    func settle() {
        guard !ended else { return }
        if linkClosed && !toldClosed && parked == nil && !central.isFinished { tellClosed("link closed") }
        if central.isFinished && parked == nil {
            finish()
            return
        }
        let d = central.nextDeadline
        guard d != armedDeadline else { return }
        if let t = timer { loop.cancel(t) }
        timer = nil
        armedDeadline = d
        if let d { timer = loop.schedule(at: d) { [unowned self] in self.timerFired() } }
    }

    func finish() {
        ended = true
        if let t = securityWait?.timer { loop.cancel(t) }
        securityWait = nil
        if let t = timer { loop.cancel(t) }
        timer = nil
        closeLink()
        onFinish?(self)
    }

    /// Tells the session that the link is gone (once).
    func tellClosed(_ why: String?) {
        guard !toldClosed else { return }
        toldClosed = true
        execute(central.disconnected(why, at: WallClock.eventTime())[...])
    }

    func closeLink() {
        if let fd = watchedFD {
            loop.unwatch(fd)
            watchedFD = nil
        }
        guard !linkClosed else { return }
        linkClosed = true
        hooks.link?(.disconnected(WallClock.eventTime()))
        bearer.close()
    }

    // MARK: Outputs

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
                        execute(central.securityRefused("the link is closed", at: WallClock.eventTime())[...])
                        continue
                    }
                    beginSecurity(level, rest: outputs[i...], on: stepped)
                    return
                }
                do {
                    try bearer.raiseSecurity(to: level)
                    execute(central.securityRaised(level, at: WallClock.eventTime())[...])
                } catch {
                    execute(central.securityRefused(error.message, at: WallClock.eventTime())[...])
                }
            case let .emit(output):
                if let committer {
                    committer.enqueue(output, from: self)
                    if case .measurement = output {
                        parked = outputs[i...]
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

    public init(configuration: CuffSessionConfiguration, hooks: SessionHooks, signals: SignalFlags? = .shared, stopAfter: Duration? = nil,
                gattCache: GATTCacheStore? = nil) {
        self.configuration = configuration
        self.hooks = hooks
        self.signals = signals
        self.stopAfter = stopAfter
        self.gattCache = gattCache
    }

    /// Runs the session to its end; returns the outcome.
    @discardableResult
    public func run(_ bearer: any PollableBearer) -> SessionOutcome {
        let loop: EventLoop
        do {
            loop = try EventLoop(capacity: 4)
        } catch {
            hooks.log("cannot start the event loop: \(error.message)")
            bearer.close()
            return .connectionFailed
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
