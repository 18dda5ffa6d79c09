// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
    import Glibc
#endif
import CuffCore
import CuffLogging
import CuffSession
import CuffSimulator
import GATT
import Logging
import Transport

/// A simulated cuff and a session in one process, on a virtual clock: PDUs cross a simulated
/// link with a fixed latency, and time jumps from one event to the next — `speed` times faster
/// than real time, or as fast as possible when `speed` is nil. Deterministic for a given seed.
public final class SimulatedLink {
    /// The simulated cuff: the protocol's simulator (``CuffProtocol/makePeripheral(configuration:requireEncryption:)``).
    public private(set) var peripheral: any GATTPeripheral
    public private(set) var central: ProtocolSession
    let hooks: SessionHooks
    let simulatorLog: Logger
    let speed: Double?
    let latency: Duration
    let signals: SignalFlags?
    let stopAfter: Duration?
    let wallStart: Int64
    var now: Timestamp = .zero
    var toPeripheral: [(Timestamp, [UInt8])] = []
    var toCentral: [(Timestamp, [UInt8])] = []
    var centralSeesDisconnectAt: Timestamp?
    var linkUp = true
    var stopSent = false
    public private(set) var sinkFailure: String?
    /// The peripheral's outputs for one event, kept between events (emptied, its capacity kept:
    /// the ``ActionMachine`` convention).
    var peripheralOutputs = ActionBuffer<PeripheralOutput>()
    /// The central's actions for one event, kept the same way.
    var centralActions = ActionBuffer<CentralAction>()

    public init(
        simulator: SimulatorConfiguration, session: CuffSessionConfiguration, hooks: SessionHooks,
        simulatorLog: Logger = .silent, speed: Double?, latency: Duration = .microseconds(7500),
        requireEncryption: Bool = false, signals: SignalFlags? = nil, stopAfter: Duration? = nil,
        wallStartMicros: Int64 = WallClock.system.nowMicros(), peripheral: (any GATTPeripheral)? = nil
    ) {
        var sim = simulator
        // The cuff's clock starts at the local time of the zone the session sets clocks in (the
        // host's, or --cuff-timezone's), as a cuff that was set before would.
        sim.clockStart = wallStartMicros / 1_000_000 + session.localUTCOffsetSeconds
        sim.utcOffsetSeconds = session.localUTCOffsetSeconds
        // The cuff speaks the protocol the user forced (`--protocol`), else the default one.
        let kind = session.protocols.select(DeviceOffer(), forced: session.forcedProtocol)
        self.peripheral =
            peripheral ?? kind.makePeripheral(configuration: sim, requireEncryption: requireEncryption)
            ?? CuffPeripheral(configuration: sim, requireEncryption: requireEncryption)
        central = ProtocolSession(configuration: session)
        self.hooks = hooks
        self.simulatorLog = simulatorLog
        self.speed = speed
        self.latency = latency
        self.signals = signals
        self.stopAfter = stopAfter
        self.wallStart = wallStartMicros
    }

    func at(_ t: Timestamp) -> EventTime { EventTime(monotonic: t, wallMicros: wallStart + t.nanoseconds / 1000) }

    /// Runs until the session ends; returns its outcome.
    @discardableResult
    public func run() -> SessionOutcome {
        let realStart = MonotonicClock.now()
        hooks.link?(.connected(at(now)))
        peripheralStep { [now] in $0.connected(now: now, client: nil, into: &$1) }
        centralStep { [t = at(now)] in $0.start(at: t, into: &$1) }
        while !central.isFinished {
            if let s = signals, !stopSent, s.isRaised(.int) || s.isRaised(.term) {
                stopSent = true
                hooks.log("stopping (interrupted)")
                centralStep { [t = at(now)] in $0.stop(at: t, into: &$1) }
                continue
            }
            if let limit = stopAfter, !stopSent, now >= .zero + limit {
                stopSent = true
                hooks.log("stopping (--stop-after reached)")
                centralStep { [t = at(now)] in $0.stop(at: t, into: &$1) }
                continue
            }
            // (Once the stop is sent, its time is past: left in, it was always the next event,
            // and the clock stood still with the cuff's answer never due (probe U: 100 % CPU,
            // deaf to SIGTERM, for good).)
            let candidates: [Timestamp?] = [
                toPeripheral.first?.0, toCentral.first?.0, centralSeesDisconnectAt, central.nextDeadline,
                linkUp ? peripheral.nextDeadline : nil, stopSent ? nil : stopAfter.map { .zero + $0 },
            ]
            guard let next = candidates.compactMap({ $0 }).min() else {
                hooks.log("simulated link: nothing left to happen")
                centralStep { [t = at(now)] in $0.disconnected("simulated link idle", at: t, into: &$1) }
                break
            }
            if let speed { pace(until: next, realStart: realStart, speed: speed) }
            if signals.map({ $0.isRaised(.int) || $0.isRaised(.term) }) == true && !stopSent { continue }
            now = max(now, next)
            step()
        }
        return central.outcome ?? .noResult
    }

    /// Sleeps until simulated `t` is due in real time, in slices so signals are seen.
    func pace(until t: Timestamp, realStart: Timestamp, speed: Double) {
        let due = realStart + .nanoseconds(Timestamp.saturating(Double(t.nanoseconds) / speed))
        while true {
            let left = due - MonotonicClock.now()
            if left <= .zero { return }
            if signals.map({ $0.isRaised(.int) || $0.isRaised(.term) }) == true { return }
            let slice = min(left, .milliseconds(50))
            Sys.sleep(slice)
        }
    }

    func step() {
        while let (t, pdu) = toPeripheral.first, t <= now {
            toPeripheral.removeFirst()
            if linkUp { peripheralStep { [now] in $0.receive(pdu, now: now, into: &$1) } }
        }
        while let (t, pdu) = toCentral.first, t <= now {
            toCentral.removeFirst()
            hooks.link?(.pdu(sent: false, pdu, at(now)))
            centralStep { [t = at(now)] in $0.receive(pdu, at: t, into: &$1) }
            if central.isFinished { return }
        }
        if let d = centralSeesDisconnectAt, d <= now {
            centralSeesDisconnectAt = nil
            toCentral = []
            hooks.link?(.disconnected(at(now)))
            centralStep { [t = at(now)] in $0.disconnected("the cuff closed the link", at: t, into: &$1) }
            if central.isFinished { return }
        }
        if linkUp, let d = peripheral.nextDeadline, d <= now {
            peripheralStep { [now] in $0.tick(now: now, into: &$1) }
        }
        if let d = central.nextDeadline, d <= now { centralStep { [t = at(now)] in $0.tick(at: t, into: &$1) } }
    }

    /// Gives the peripheral one event with ``peripheralOutputs`` (emptied; an event taken while
    /// another one's outputs run gets a new array) and runs what it asks for.
    func peripheralStep(_ event: (inout any GATTPeripheral, inout [PeripheralOutput]) -> Void) {
        var out = peripheralOutputs.take()
        event(&peripheral, &out)
        peripheralOut(out)
        peripheralOutputs.giveBack(&out)
    }

    func peripheralOut(_ outputs: [PeripheralOutput]) {
        for o in outputs {
            switch o {
            case let .send(pdu):
                if linkUp { toCentral.append((now + latency, pdu)) }
            case let .disconnect(why):
                guard linkUp else { continue }
                linkUp = false
                simulatorLog.info("disconnect: \(why)")
                for case let .log(s) in peripheral.disconnected(now: now) { simulatorLog.info("\(s)") }
                // PDUs already on the air still arrive; then the central sees the link go.
                centralSeesDisconnectAt = (toCentral.last?.0 ?? now) + latency
                toPeripheral = []
            case let .log(s):
                simulatorLog.info("\(s)")
            }
        }
    }

    /// Gives the central one event with ``centralActions`` (as ``peripheralStep(_:)`` does) and
    /// runs what it asks for.
    func centralStep(_ event: (inout ProtocolSession, inout [CentralAction]) -> Void) {
        var out = centralActions.take()
        event(&central, &out)
        centralOut(out)
        centralActions.giveBack(&out)
    }

    func centralOut(_ outputs: [CentralAction]) {
        for o in outputs {
            switch o {
            case let .send(pdu):
                guard linkUp else { continue }
                hooks.link?(.pdu(sent: true, pdu, at(now)))
                toPeripheral.append((now + latency, pdu))
            case let .raiseSecurity(level):
                peripheral.linkSecurityChanged(level)
                centralStep { [t = at(now)] in $0.securityRaised(level, at: t, into: &$1) }
            case let .emit(output):
                do {
                    try hooks.emit(output)
                } catch {
                    sinkFailure = "\(error)"
                    hooks.log("cannot store the result: \(error)")
                    closeLinkFromCentral()
                    centralStep { [t = at(now)] in $0.disconnected("sink failed", at: t, into: &$1) }
                    return
                }
            case .disconnect:
                closeLinkFromCentral()
            case let .log(s):
                hooks.log(s)
            case .finished:
                if linkUp { closeLinkFromCentral() }
            }
        }
    }

    func closeLinkFromCentral() {
        guard linkUp else { return }
        linkUp = false
        hooks.link?(.disconnected(at(now)))
        for case let .log(s) in peripheral.disconnected(now: now) { simulatorLog.info("\(s)") }
        toPeripheral = []
        toCentral = []
    }
}
