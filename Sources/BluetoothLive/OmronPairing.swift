// SPDX-License-Identifier: GPL-2.0-or-later
import BlueZ
import CuffCore
import CuffLogging
import CuffRuntime
import CuffSession
import Logging
import Transport

extension LiveBluetooth {
    /// The Omron pairing variant of `configuration`'s model (key programmed while the cuff is in
    /// pairing mode, the token, or nothing past the bond) and one start/end exchange over
    /// `bearer`, through the same session as a sync. `cuff pair --connect unix:PATH` (a simulated
    /// cuff) and `cuff pair ADDR --model NAME` (after the OS bond) both run this; the outcome's
    /// exit status tells a refused key, a cuff not in pairing mode and a latched refusal apart, and
    /// `message` says which. `loop`: the one to run on (where a pairing agent answers); nil: its own.
    public static func omronPair(
        over bearer: any PollableBearer, configuration: CuffSessionConfiguration, signals: SignalFlags? = .shared,
        loop: EventLoop? = nil, log: Logger
    ) -> (outcome: SessionOutcome, message: String?) {
        var c = configuration
        c.setTime = false
        c.omronSync.setTime = false
        c.omronSync.pair = true
        if c.forcedProtocol == nil { c.forcedProtocol = .omron }
        var message: String?
        let hooks = SessionHooks(
            emit: { o in
                if case let .session(s) = o, s.event == .end { message = s.message }
            }, log: log)
        let outcome = CentralDriver(configuration: c, hooks: hooks, signals: signals, stopAfter: nil).run(
            bearer, on: loop)
        return (outcome, message)
    }

    /// `cuff pair ADDR --model NAME` through bluetoothd: once `Device1.Pair` made the OS bond, the
    /// model's Omron pairing variant over bluetoothd's GATT link to the cuff.
    public static func omronPairThroughBluetoothd(
        peer: BluetoothAddress, adapter: BluetoothAdapter, configuration: CuffSessionConfiguration,
        log: Logger
    ) throws(LiveBluetoothFailure) -> (outcome: SessionOutcome, message: String?) {
        let bearer: BlueZGATTBearer
        do {
            bearer = try BlueZGATTBearer.connect(
                adapter: adapter, to: peer, bus: BlueZBus(), timeout: configuration.timeout, log: log)
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        for note in bearer.notes { log.info("\(note)") }
        return omronPair(over: bearer, configuration: configuration, log: log)
    }
}
