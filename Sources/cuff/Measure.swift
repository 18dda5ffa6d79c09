// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import Capture
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import Sinks
import Transport

struct Measure: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "measure",
        abstract: "Take a measurement: connect to a cuff, follow it, print the result.",
        discussion: """
            Give a Bluetooth address (AA:BB:CC:DD:EE:FF[/random]), --connect unix:PATH (a `cuff simulate` \
            in another process) or --simulated SCENARIO (a simulated cuff in this process). Results go \
            to stdout, one JSON object per line; progress and logs to stderr.

            Ends after the first complete measurement and the stored records that follow it, or when the \
            cuff disconnects; --follow keeps going. Ctrl-C stops the cuff and exits with what was received.
            Exit status: 0 with at least one result, 2 no result, 3 stopped, 4 disconnected, 5 timed out, \
            6 security refused, 7 not a blood-pressure cuff, 8 protocol error, 9 connection failed, \
            10 a sink failed.
            """
    )

    @Argument(help: "Bluetooth address of the cuff, e.g. A4:C1:38:12:34:56 (append /random for a random address).")
    var address: String?

    @Option(help: "Connect to a simulator: unix:PATH.")
    var connect: String?

    @Option(help: "Run this simulator scenario in-process (see `cuff simulate --list`; with --model, an Omron scenario).")
    var simulated: ScenarioName?

    @OptionGroup(title: "With --simulated") var simulation: SimulationOptions

    @Option(help: "Bluetooth adapter for a real cuff.")
    var adapter: String = "hci0"

    @Option(help: Backend.help)
    var backend: Backend = .auto

    @Option(help: BlueZCommands.bondsHelp)
    var bonds: String?

    @Option(help: "Link security to ask for at once: low (default), medium (encrypted, Just Works) or high (MITM). Raised anyway when the cuff asks.")
    var security: SecurityLevel?

    @Flag(help: "Send the start command (cuffs with a start control point; the simulator has one).")
    var start = false

    @Flag(help: "Keep the session open for further measurements.")
    var follow = false

    @Option(help: "Give up when no result arrived within this many seconds (0 = wait forever).")
    var timeout: Double = 300

    @Option(name: .customLong("stop-after"), help: "Stop the cuff after this many seconds (simulated seconds with --simulated).")
    var stopAfter: Double?

    @Option(help: "Apply this quirk profile (default: chosen from the device's name and model).")
    var quirk: QuirkProfile?

    @Flag(name: .customLong("no-set-time"), help: "Do not write the cuff's Current Time.")
    var noSetTime = false

    @Flag(name: .customLong("no-gatt-cache"), help: "Discover the cuff's handles every time (--connect): do not use or keep the GATT cache beside the bond store.")
    var noGATTCache = false

    @Option(help: "Record the session as a btsnoop file (Linux monitor format) that btmon, Wireshark and `cuff replay` open.")
    var capture: String?

    @OptionGroup var sinks: SinkOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @OptionGroup(title: "Omron cuffs") var omron: OmronSyncArguments

    func validate() throws {
        if let c = sinks.captureFormatName {
            throw ValidationError("--format \(c) names a capture format; cuff measure writes ndjson, fhir or omh (and --capture FILE records a btsnoop)")
        }
        let sources = [address != nil, connect != nil, simulated != nil].filter { $0 }.count
        guard sources == 1 else { throw ValidationError("give exactly one of ADDRESS, --connect unix:PATH or --simulated SCENARIO") }
        if let connect, !connect.hasPrefix("unix:") { throw ValidationError("--connect takes unix:PATH") }
        if let simulated { try OmronModelOption.check(simulated, model: omron.model) }
        guard timeout >= 0 else { throw ValidationError("--timeout must not be negative") }
    }

    func sessionConfiguration(address: String) -> CuffSessionConfiguration {
        var c = CuffSessionConfiguration(address: address)
        c.security = security ?? .low
        c.sendStart = start
        c.follow = follow
        c.timeout = timeout > 0 ? .nanoseconds(Int64(timeout * 1e9)) : nil
        c.quirk = quirk
        c.setTime = !noSetTime
        c.localUTCOffsetSeconds = WallClock.localUTCOffsetSeconds()
        c.forcedProtocol = cuffProtocol.forced
        omron.configure(&c)
        return c
    }

    func run() throws {
        let display = ProgressDisplay(quiet: sinks.quiet)
        let signals = SignalFlags.shared
        try signals.install()
        // A parent may have blocked these (test runners do); a child inherits the mask.
        try signals.unblockOnCurrentThread()
        let fan: FanOutSink
        let store: (any MeasurementStore)?
        do {
            (fan, store) = try sinks.makeSinks()
        } catch {
            Output.log("cuff measure: \(error)")
            throw ExitCode(10)
        }
        var recording: CaptureRecording?
        if let capture {
            do {
                // A real cuff's session: the capture names its controller (hciN) from the start.
                let index = CaptureRecording.adapterIndex(address: address, adapter: adapter)
                recording = try CaptureRecording(path: capture, datalink: .monitor, peer: peerAddress(), adapter: index ?? 0,
                                                 announceAt: address == nil ? nil : Timestamp(nanoseconds: WallClock.system.nowMicros() &* 1000))
            } catch {
                Output.log("cuff measure: cannot write the capture \(capture): \(error)")
                throw ExitCode(10)
            }
        }
        let hooks = SessionHooks(
            emit: { o in
                display.show(o)
                do { try fan.write(o) } catch { Output.noteFailure(error); throw error }
            },
            log: { display.log($0) },
            link: recording.map { r in { r.handle($0) } })

        let stopAfterDuration = stopAfter.map { Duration.nanoseconds(Int64($0 * 1e9)) }
        var outcome: SessionOutcome
        var exit: Int32
        var sinkFailed = false
        if let scenario = simulated {
            var config = sessionConfiguration(address: "simulated:\(scenario.rawValue)")
            if let store { config.knownRecordKeys = (try? store.knownKeys()) ?? []; config.lastSequenceNumber = try? store.lastSequenceNumber(address: config.address) }
            var sim = SimulatorConfiguration(scenario: scenario.bps ?? .normal, persona: simulation.persona, seed: simulation.seed, autostart: !start)
            sim.omron = omron.simulation(scenario)
            let link = SimulatedLink(
                simulator: sim, session: config, hooks: hooks, simulatorLog: sinks.quiet ? nil : { Output.log("cuff (simulated cuff): " + $0) },
                speed: simulation.speed == 0 ? nil : simulation.speed, signals: signals, stopAfter: stopAfterDuration)
            outcome = link.run()
            exit = link.central.exitCode
            sinkFailed = link.sinkFailure != nil
        } else if let connect {
            let path = String(connect.dropFirst("unix:".count))
            var config = sessionConfiguration(address: connect)
            if let store { config.knownRecordKeys = (try? store.knownKeys()) ?? []; config.lastSequenceNumber = try? store.lastSequenceNumber(address: config.address) }
            let bearer: UnixSeqpacketBearer
            do {
                bearer = try UnixSeqpacketBearer.connect(path: path)
            } catch {
                Output.log("cuff measure: \(error.message)")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
            }
            let driver = CentralDriver(configuration: config, hooks: hooks, signals: signals, stopAfter: stopAfterDuration,
                                       gattCache: GATTCacheStore.unless(disabled: noGATTCache, bonds: bonds))
            outcome = driver.run(bearer)
            exit = driver.central.exitCode
            sinkFailed = driver.sinkFailure != nil
        } else {
            (outcome, exit, sinkFailed) = try BlueZCommands.measure(
                address: address!, adapter: adapter, backend: backend, bonds: bonds, configuration: { self.sessionConfiguration(address: $0) }, hooks: hooks,
                signals: signals, stopAfter: stopAfterDuration, store: store)
        }
        recording?.finish()
        do { try fan.finish() } catch { _ = Output.sinkFailed("cuff measure", error); sinkFailed = true }
        display.clearGauge()
        if !sinks.quiet { Output.log("cuff: session ended: \(outcome.rawValue)") }
        if sinkFailed { throw ExitCode(Output.sinkFailureStatus) }
        if exit != 0 { throw ExitCode(exit) }
    }

    func peerAddress() -> BDAddress {
        if let address, let a = BDAddress(String(address.prefix(17))) { return a }
        return BDAddress("00:AA:01:00:00:00")!
    }
}
