// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffCore
import CuffRuntime
import CuffSimulator
import Transport

struct SimulatorOptions: ParsableArguments {
    @Option(help: "Scenario to play (see `cuff simulate --list`).")
    var scenario: Scenario = .normal

    @OptionGroup var simulation: SimulationOptions

    @Flag(help: "Start measuring as soon as a client has subscribed (else: a start command, or SIGUSR1 as the button).")
    var autostart = false

    @Option(name: .customLong("record-segment"), help: "bps-1.1: send each Blood Pressure Record in segments of at most N bytes (6-512; as a small ATT MTU would force).")
    var recordSegment: Int?

    func validate() throws {
        // A peer on a socket or a radio needs paced time: "as fast as possible" is for in-process runs.
        guard simulation.speed > 0 else { throw ValidationError("cuff simulate needs --speed above 0 (0 is for measure --simulated)") }
        if let n = recordSegment, !(6...512).contains(n) { throw ValidationError("--record-segment takes 6 to 512 bytes") }
    }

    var persona: Persona { simulation.persona }
    var seed: UInt64 { simulation.seed }
    var speed: Double { simulation.speed }

    var configuration: SimulatorConfiguration {
        var c = SimulatorConfiguration(scenario: scenario, persona: persona, seed: seed, autostart: autostart)
        c.recordSegmentLength = recordSegment
        return c
    }
}

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Be a blood-pressure cuff: a GATT server on a Unix socket (or a Bluetooth adapter).",
        discussion: """
            Serves one client after another until stopped (Ctrl-C). Each session is logged to stderr. \
            With --listen unix:PATH, connect with `cuff measure --connect unix:PATH`. Send SIGUSR1 to \
            press the cuff's start button.
            """
    )

    @Flag(help: "List the scenarios, one per line, and exit.")
    var list = false

    @Option(help: "Where to listen: unix:PATH.")
    var listen: String?

    @Option(help: "Bluetooth adapter to be a cuff on, e.g. hci0 (needs Linux Bluetooth and root).")
    var adapter: String?

    @OptionGroup var options: SimulatorOptions

    func validate() throws {
        if list { return }
        if listen == nil && adapter == nil { throw ValidationError("give --listen unix:PATH or --adapter hciN") }
        if let listen, !listen.hasPrefix("unix:") { throw ValidationError("--listen takes unix:PATH") }
    }

    func run() throws {
        if list {
            do {
                for s in Scenario.allCases { try Output.line("\(s.rawValue)\t\(s.summary)") }
                try Output.flush()
            } catch {
                throw ExitCode(Output.sinkFailed("cuff simulate", error))
            }
            return
        }
        let signals = SignalFlags.shared
        try signals.install()
        // A parent may have blocked these (test runners do); a child inherits the mask.
        try signals.unblockOnCurrentThread()
        let clock = SimulationClock(speed: options.speed)
        let driver = PeripheralDriver(peripheral: CuffPeripheral(configuration: options.configuration), clock: clock, signals: signals) { Output.log("cuff simulate: " + $0) }
        if let adapter {
            try BlueZCommands.simulate(adapter: adapter, driver: driver, options: options)
            return
        }
        let path = String(listen!.dropFirst("unix:".count))
        let listener: UnixSeqpacketListener
        do {
            listener = try UnixSeqpacketListener(path: path)
        } catch {
            Output.log("cuff simulate: cannot listen at \(path): \(error.message)")
            throw ExitCode(SessionExit.connectionFailed)
        }
        defer { listener.close() }
        Output.log("cuff simulate: \(options.scenario.rawValue) cuff (\(options.persona.rawValue), seed \(options.seed), speed \(options.speed)×) listening at unix:\(path)")
        var session = 0
        while !signals.isRaised(.int) && !signals.isRaised(.term) {
            let bearer: UnixSeqpacketBearer?
            do {
                bearer = try listener.accept(timeout: .milliseconds(200))
            } catch {
                Output.log("cuff simulate: accept failed: \(error.message)")
                throw ExitCode(SessionExit.connectionFailed)
            }
            guard let bearer else { continue }
            session += 1
            Output.log("cuff simulate: session \(session): client connected")
            let end = driver.serve(bearer)
            Output.log("cuff simulate: session \(session) ended: \(end)")
            if end == .interrupted { break }
        }
        Output.log("cuff simulate: stopped")
    }
}

enum SessionExit {
    static let connectionFailed: Int32 = 9
}
