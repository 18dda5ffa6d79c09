// SPDX-License-Identifier: GPL-2.0-or-later
import BlueZ
import BluetoothLive
import Capture
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import Sinks
import Transport

/// `cuff measure`: one session with a cuff (simulated in process, on a Unix socket, or real),
/// records to the sinks and the progress display, optionally recorded as a btsnoop capture.
/// Returns normally with at least one result; else throws the session's ``ExitStatus``.
public struct MeasureService {
    /// Where the cuff is.
    public enum Source {
        /// A simulated cuff in this process playing `scenario` (its name); `speed` nil: as fast as possible.
        case simulated(scenario: String, SimulatorConfiguration, speed: Double?)
        /// A `cuff simulate` socket: `unix:PATH`.
        case unix(String)
        /// A real cuff: `text` is the address as given.
        case bluetooth(BluetoothAddress, text: String, adapter: BluetoothAdapter, backend: Backend, bonds: String?)
    }

    public var source: Source
    /// Each session's configuration for the cuff at an address.
    public var configuration: (String) -> CuffSessionConfiguration
    public var quiet = false
    /// `--capture FILE`: the session recorded as a btsnoop file.
    public var capture: String?
    public var stopAfter: Duration?
    /// What sessions learned about cuffs on Unix sockets (nil: discover every time).
    public var gattCache: GATTCacheStore?
    public var openSinks: () throws -> (FanOutSink, (any MeasurementStore)?)

    public init(
        source: Source, configuration: @escaping (String) -> CuffSessionConfiguration,
        openSinks: @escaping () throws -> (FanOutSink, (any MeasurementStore)?)
    ) {
        self.source = source
        self.configuration = configuration
        self.openSinks = openSinks
    }

    /// The session's configuration, told what the store holds already.
    func sessionConfiguration(address: String, store: (any MeasurementStore)?) -> CuffSessionConfiguration {
        var config = configuration(address)
        if let store {
            config.knownRecordKeys = (try? store.knownKeys()) ?? [];
            config.lastSequenceNumber = try? store.lastSequenceNumber(address: config.address)
        }
        return config
    }

    public func run() throws {
        let display = ProgressDisplay(quiet: quiet)
        let signals = try SignalFlags.shared.listen()
        let (fan, store) = try Opening.sinks("cuff measure", openSinks)
        var recording: CaptureRecording?
        if let capture {
            do {
                // A real cuff's session: the capture names its controller (hciN) from the start.
                var peer = BDAddress("00:AA:01:00:00:00")!, index: UInt16 = 0, announceAt: Timestamp?
                if case let .bluetooth(_, text, adapter, _, _) = source {
                    peer = BDAddress(String(text.prefix(17))) ?? peer
                    index = adapter.index
                    announceAt = Timestamp(nanoseconds: WallClock.system.nowMicros() &* 1000)
                }
                recording = try CaptureRecording(
                    path: capture, datalink: .monitor, peer: peer, adapter: index, announceAt: announceAt)
            } catch {
                Console.log("cuff measure: cannot write the capture \(capture): \(error)")
                throw ExitStatus.sinkFailed
            }
        }
        let hooks = SessionHooks(
            emit: { o in
                display.show(o)
                do { try fan.write(o) } catch { Console.noteFailure(error); throw error }
            },
            log: display.logger,
            link: recording.map { r in { r.handle($0) } })

        var outcome: SessionOutcome
        var exit: Int32
        var sinkFailed = false
        switch source {
        case let .simulated(scenario, sim, speed):
            let link = SimulatedLink(
                simulator: sim, session: sessionConfiguration(address: "simulated:\(scenario)", store: store),
                hooks: hooks,
                simulatorLog: Console.logger("cuff (simulated cuff)", quiet: quiet), speed: speed, signals: signals,
                stopAfter: stopAfter)
            outcome = link.run()
            exit = link.central.exitCode
            sinkFailed = link.sinkFailure != nil
        case let .unix(connect):
            let config = sessionConfiguration(address: connect, store: store)
            let bearer = try Opening.socket("cuff measure", connect)
            let driver = CentralDriver(
                configuration: config, hooks: hooks, signals: signals, stopAfter: stopAfter, gattCache: gattCache)
            outcome = driver.run(bearer)
            exit = driver.central.exitCode
            sinkFailed = driver.sinkFailure != nil
        case let .bluetooth(peer, _, adapter, backend, bonds):
            // A failure (said already) ends the command with its outcome's status.
            (outcome, exit, sinkFailed) = try LiveBluetooth.measure(
                peer: peer, adapter: adapter, backend: backend, bonds: bonds, configuration: configuration,
                hooks: hooks,
                signals: signals, stopAfter: stopAfter, store: store, gattCache: gattCache,
                log: Console.logger("cuff measure"))
        }
        recording?.finish()
        do { try fan.finish() } catch { _ = Console.sinkFailed("cuff measure", error); sinkFailed = true }
        display.clearGauge()
        if !quiet { Console.log("cuff: session ended: \(outcome.rawValue)") }
        if sinkFailed { throw Console.sinkFailureStatus }
        if exit != 0 { throw ExitStatus(exit) }
    }
}
