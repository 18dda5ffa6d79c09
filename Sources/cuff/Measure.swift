// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands
import BloodPressure
import CuffSession
import CuffRuntime
import CuffSimulator
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
            10 a sink failed, 12 an Omron cuff refused the key, 13 an Omron cuff not in pairing mode, \
            14 an Omron cuff latched a refused key until power-cycled, 64 usage, 141 stdout's reader \
            went away.
            """
    )

    @Argument(help: "Bluetooth address of the cuff, e.g. A4:C1:38:12:34:56 (append /random for a random address).")
    var address: String?

    @Option(help: "Connect to a simulator: unix:PATH.")
    var connect: String?

    @Option(
        help: "Run this simulator scenario in-process (see `cuff simulate --list`; with --model, an Omron scenario).")
    var simulated: ScenarioName?

    @OptionGroup(title: "With --simulated") var simulation: SimulationOptions

    enum Help: BluetoothOptionsHelp {
        static let adapter: ArgumentHelp = "Bluetooth adapter for a real cuff. (default: hci0)"
        static let bonds: ArgumentHelp? = BlueZCommands.bondsHelp
        static let security: ArgumentHelp? =
            "Link security to ask for at once: low (default), medium (encrypted, Just Works) or high (MITM). Raised anyway when the cuff asks."
        static let setTime: ArgumentHelp? = "Do not write the cuff's Current Time."
    }

    @OptionGroup var bluetooth: BluetoothOptions<Help>

    @Flag(help: "Send the start command (cuffs with a start control point; the simulator has one).")
    var start = false

    @Flag(
        name: .customLong("no-gatt-cache"),
        help:
            "Discover the cuff's handles every time (--connect, or an address on the raw path): do not use or keep the GATT cache beside the bond store."
    )
    var noGATTCache = false

    @Flag(help: "Keep the session open for further measurements.")
    var follow = false

    @Option(help: "Give up when no result arrived within this many seconds (0 = wait forever).")
    var timeout: Double = 300

    @Option(
        name: .customLong("stop-after"),
        help: "Stop the cuff after this many seconds (simulated seconds with --simulated).")
    var stopAfter: Double?

    @Option(help: "Apply this quirk profile (default: chosen from the device's name and model).")
    var quirk: QuirkProfile?

    @Option(
        help:
            "Record the session as a btsnoop file (Linux monitor format) that btmon, Wireshark and `cuff replay` open.")
    var capture: String?

    @OptionGroup var sinks: SinkOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @OptionGroup(title: "Omron cuffs") var omron: OmronSyncArguments

    func validate() throws {
        if let c = sinks.captureFormatName {
            throw ValidationError(
                "--format \(c) names a capture format; cuff measure writes ndjson, fhir or omh (and --capture FILE records a btsnoop)"
            )
        }
        let sources = [address != nil, connect != nil, simulated != nil].filter { $0 }.count
        guard sources == 1 else {
            throw ValidationError("give exactly one of ADDRESS, --connect unix:PATH or --simulated SCENARIO")
        }
        if let connect, !connect.hasPrefix("unix:") { throw ValidationError("--connect takes unix:PATH") }
        if simulated == nil, !simulation.given.isEmpty {
            // (They shape the simulated cuff; a real one, or one behind --connect, ignored them.)
            let given = simulation.given
            var why =
                "\(given.joined(separator: ", ")) \(given.count == 1 ? "shapes" : "shape") a simulated cuff: give --simulated SCENARIO"
            if connect != nil { why += " (the cuff behind --connect is shaped by its own cuff simulate)" }
            throw ValidationError(why)
        }
        // (Here, not in run(): a typo'd address then shows this command's usage, not cuff's.)
        if let address { _ = try BlueZCommands.address(address) }
        if let simulated { try OmronModelOption.check(simulated, model: omron.model) }
        try SecondsOption.check(timeout, option: "--timeout")
        if let stopAfter { try SecondsOption.check(stopAfter, option: "--stop-after") }
    }

    func sessionConfiguration(address: String) -> CuffSessionConfiguration {
        var c = CuffSessionConfiguration(address: address)
        c.security = bluetooth.security ?? .low
        c.sendStart = start
        c.follow = follow
        c.timeout = timeout > 0 ? SecondsOption.duration(timeout) : nil
        c.quirk = quirk
        c.setTime = !bluetooth.noSetTime
        c.localUTCOffsetSeconds = sinks.cuffClock()
        c.forcedProtocol = cuffProtocol.forced
        omron.configure(&c)
        return c
    }

    func run() throws {
        let source: MeasureService.Source
        if let scenario = simulated {
            var sim = SimulatorConfiguration(
                scenario: scenario.bps ?? .normal, persona: simulation.persona, seed: simulation.seed, autostart: !start
            )
            sim.omron = omron.simulation(scenario)
            source = .simulated(scenario: scenario.rawValue, sim, speed: simulation.speed == 0 ? nil : simulation.speed)
        } else if let connect {
            source = .unix(connect)
        } else {
            let adapter = try bluetooth.parsedAdapter()
            source = .bluetooth(
                try BlueZCommands.address(address!), text: address!, adapter: adapter, backend: bluetooth.backend,
                bonds: bluetooth.bonds)
        }
        let sinks = try self.sinks.setup()
        var service = MeasureService(
            source: source, configuration: sessionConfiguration(address:), openSinks: sinks.makeSinks)
        service.quiet = sinks.quiet
        service.capture = capture
        service.gattCache = GATTCacheStore.unless(disabled: noGATTCache, bonds: bluetooth.bonds)
        service.stopAfter = stopAfter.map(SecondsOption.duration)
        try service.run()
    }
}
