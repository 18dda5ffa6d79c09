// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSimulator
import GATT
import Transport

/// How a peripheral's connection ended.
public enum PeripheralEnd: Sendable, Equatable {
    /// The client went away (or the cuff dropped the link).
    case disconnected(String)
    /// SIGINT/SIGTERM.
    case interrupted
    case transportFailed(String)
}

/// Runs a peripheral (the simulated cuff, a captured one) over one bearer connection after another.
public final class PeripheralDriver<Peripheral: GATTPeripheral> {
    public typealias End = PeripheralEnd

    public private(set) var peripheral: Peripheral
    public let clock: SimulationClock
    let log: (String) -> Void
    let signals: SignalFlags?
    /// Longest real wait in one poll, so signals are seen promptly.
    let pollSlice: Duration = .milliseconds(100)

    public init(peripheral: Peripheral, clock: SimulationClock, signals: SignalFlags? = .shared, log: @escaping (String) -> Void) {
        self.peripheral = peripheral
        self.clock = clock
        self.signals = signals
        self.log = log
    }

    /// Serves one connection until it ends. `client` identifies the peer when the transport knows
    /// it (a Bluetooth address): the cuff remembers which stored readings each client confirmed.
    public func serve(_ bearer: ATTBearer, client: String? = nil) -> End {
        defer { bearer.close() }
        peripheral.linkSecurityChanged(bearer.securityLevel)
        if let end = execute(peripheral.connected(now: clock.now(), client: client), bearer) { return end }
        while true {
            if let s = signals {
                if s.isRaised(.int) || s.isRaised(.term) {
                    _ = peripheral.disconnected(now: clock.now())
                    return .interrupted
                }
                if s.consume(.usr1), let end = execute(peripheral.buttonPressed(now: clock.now()), bearer) { return end }
            }
            var wait = pollSlice
            if let d = peripheral.nextDeadline { wait = min(wait, clock.realInterval(until: d)) }
            let event: BearerEvent
            do {
                event = try bearer.next(timeout: wait)
            } catch {
                _ = peripheral.disconnected(now: clock.now())
                return .transportFailed(error.message)
            }
            switch event {
            case let .pdu(pdu):
                peripheral.linkSecurityChanged(bearer.securityLevel)
                if let end = execute(peripheral.receive(pdu, now: clock.now()), bearer) { return end }
            case .timeout:
                break
            case let .closed(why):
                let out = peripheral.disconnected(now: clock.now())
                for case let .log(s) in out { log(s) }
                return .disconnected(why ?? "the client closed the connection")
            }
            if let d = peripheral.nextDeadline, clock.now() >= d {
                if let end = execute(peripheral.tick(now: clock.now()), bearer) { return end }
            }
        }
    }

    /// Sends, logs, disconnects; returns the end when the cuff dropped the link.
    func execute(_ outputs: [PeripheralOutput], _ bearer: ATTBearer) -> End? {
        for o in outputs {
            switch o {
            case let .send(pdu):
                do {
                    try bearer.send(pdu)
                } catch {
                    _ = peripheral.disconnected(now: clock.now())
                    return .transportFailed(error.message)
                }
            case let .log(s):
                log(s)
            case let .disconnect(why):
                let out = peripheral.disconnected(now: clock.now())
                for case let .log(s) in out { log(s) }
                return .disconnected(why)
            }
        }
        return nil
    }
}
