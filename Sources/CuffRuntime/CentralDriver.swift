// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSession
import Transport

/// Runs a ``CuffCentral`` over a bearer with the real clock: `cuff measure` against a Unix-socket
/// simulator or a real cuff.
public final class CentralDriver {
    public private(set) var central: CuffCentral
    let hooks: SessionHooks
    let signals: SignalFlags?
    /// Stop on our own after this long (`--stop-after`).
    let stopAfter: Duration?
    let pollSlice: Duration = .milliseconds(100)
    var stopSent = false
    var linkClosed = false
    public private(set) var sinkFailure: String?

    public init(configuration: CuffSessionConfiguration, hooks: SessionHooks, signals: SignalFlags? = .shared, stopAfter: Duration? = nil) {
        central = CuffCentral(configuration: configuration)
        self.hooks = hooks
        self.signals = signals
        self.stopAfter = stopAfter
    }

    /// Runs the session to its end; returns the outcome.
    @discardableResult
    public func run(_ bearer: ATTBearer) -> SessionOutcome {
        let started = WallClock.eventTime()
        hooks.link?(.connected(started))
        execute(central.start(at: started), bearer)
        while !central.isFinished {
            let now = WallClock.eventTime()
            if !stopSent {
                let interrupted = signals.map { $0.isRaised(.int) || $0.isRaised(.term) } ?? false
                let timeUp = stopAfter.map { now.monotonic >= started.monotonic + $0 } ?? false
                if interrupted || timeUp {
                    stopSent = true
                    hooks.log(interrupted ? "stopping (interrupted)" : "stopping (--stop-after reached)")
                    execute(central.stop(at: now), bearer)
                    continue
                }
            }
            if linkClosed {
                execute(central.disconnected("link closed", at: now), bearer)
                continue
            }
            var wait = pollSlice
            if let d = central.nextDeadline { wait = max(.zero, min(wait, d - now.monotonic)) }
            let event: BearerEvent
            do {
                event = try bearer.next(timeout: wait)
            } catch {
                linkClosed = true
                execute(central.disconnected(error.message, at: WallClock.eventTime()), bearer)
                continue
            }
            let at = WallClock.eventTime()
            switch event {
            case let .pdu(pdu):
                hooks.link?(.pdu(sent: false, pdu, at))
                execute(central.receive(pdu, at: at), bearer)
            case .timeout:
                break
            case let .closed(why):
                linkClosed = true
                hooks.link?(.disconnected(at))
                execute(central.disconnected(why, at: at), bearer)
            }
            if !central.isFinished, let d = central.nextDeadline, at.monotonic >= d {
                execute(central.tick(at: at), bearer)
            }
        }
        if !linkClosed { hooks.link?(.disconnected(WallClock.eventTime())) }
        bearer.close()
        if case let .done(o) = central.state { return o }
        return .noResult
    }

    func execute(_ outputs: [CuffCentral.Output], _ bearer: ATTBearer) {
        for o in outputs {
            switch o {
            case let .send(pdu):
                guard !linkClosed else { continue }
                do {
                    try bearer.send(pdu)
                    hooks.link?(.pdu(sent: true, pdu, WallClock.eventTime()))
                } catch {
                    linkClosed = true
                    hooks.log("send failed: \(error.message)")
                }
            case let .raiseSecurity(level):
                do {
                    try bearer.raiseSecurity(to: level)
                    execute(central.securityRaised(level, at: WallClock.eventTime()), bearer)
                } catch {
                    execute(central.securityRefused(error.message, at: WallClock.eventTime()), bearer)
                }
            case let .emit(output):
                do {
                    try hooks.emit(output)
                } catch {
                    // A result that cannot be kept is not confirmed: stop here, keep what was kept.
                    sinkFailure = "\(error)"
                    hooks.log("cannot store the result: \(error)")
                    linkClosed = true
                    bearer.close()
                    execute(central.disconnected("sink failed", at: WallClock.eventTime()), bearer)
                    return
                }
            case .disconnect:
                if !linkClosed {
                    linkClosed = true
                    hooks.link?(.disconnected(WallClock.eventTime()))
                    bearer.close()
                }
            case let .log(s):
                hooks.log(s)
            case .finished:
                break
            }
        }
    }
}
