// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands
import BloodPressure
import CuffCore
import CuffSimulator
import CuffSession
import Capture
import Omron
import Transport

struct SimulatorOptions: ParsableArguments {
    @Option(
        name: .customLong("scenario"),
        help: ArgumentHelp(
            "Scenario to play (see `cuff simulate --list`; with --model, an Omron scenario). (default: normal)",
            valueName: "scenario"))
    var scenarioGiven: ScenarioName?
    var scenario: ScenarioName { scenarioGiven ?? .normal }

    @Option(help: ArgumentHelp(OmronModelOption.help, valueName: "name"))
    var model: String?

    @Flag(
        help:
            "With --model: start the Omron cuff factory-fresh (no key, no bond), so `cuff pair` must pair it in pairing mode (SIGUSR1)."
    )
    var unpaired = false

    @OptionGroup var simulation: SimulationOptions

    @Flag(help: "Start measuring as soon as a client has subscribed (else: a start command, or SIGUSR1 as the button).")
    var autostart = false

    @Option(
        help:
            "Behave as a device family's cuff, as the public sources describe it: its names, value layout, memory and session habits (see the README's \"Supported cuffs\")."
    )
    var quirk: QuirkProfile?

    @Option(
        name: .customLong("record-segment"),
        help:
            "bps-1.1: send each Blood Pressure Record in segments of at most N bytes (6-512; as a small ATT MTU would force)."
    )
    var recordSegment: Int?

    @Option(
        help: ArgumentHelp(
            "Take a measurement every SECONDS of simulated time, connected or not: a connected client gets it live, otherwise the cuff keeps it and delivers it as a stored reading at the next connection.",
            valueName: "seconds"))
    var every: Double?

    @Flag(
        name: .customLong("database-hash"),
        help:
            "Have the Generic Attribute service (first) with a Database Hash (0x2B2A), which a client's GATT cache reads to check itself."
    )
    var databaseHash = false

    @Flag(
        name: .customLong("service-changed"),
        help: "Have the Generic Attribute service (first) with Service Changed (0x2A05).")
    var serviceChanged = false

    @Flag(
        name: .customLong("indicate-service-changed"),
        help: "With --service-changed: indicate it on every connection, as a bonded cuff whose database changed.")
    var indicateServiceChanged = false

    @Option(
        name: .customLong("handle-gap"),
        help: ArgumentHelp(
            "Leave N handles unused before the cuff's services: a firmware whose handles moved (for a client's GATT cache). (default: 0)",
            valueName: "handle-gap"))
    var handleGapGiven: UInt16?
    var handleGap: UInt16 { handleGapGiven ?? 0 }

    func validate() throws {
        try OmronModelOption.check(scenario, model: model)
        if let model { _ = try OmronModelOption.profile(model) }
        if unpaired && model == nil { throw ValidationError("--unpaired goes with --model (an Omron cuff)") }
        // A peer on a socket or a radio needs paced time: "as fast as possible" is for in-process runs.
        guard simulation.speed > 0 else {
            throw ValidationError("cuff simulate needs --speed above 0 (0 is for measure --simulated)")
        }
        // The gap comes before each service: a few thousand keeps every handle below 0xFFFF (65535
        // once overflowed the handle arithmetic, SIGILL).
        if handleGap > 4096 { throw ValidationError("--handle-gap takes 0 to 4096 handles; got \(handleGap)") }
        if let n = recordSegment, !(6...512).contains(n) {
            throw ValidationError("--record-segment takes 6 to 512 bytes")
        }
        if let every { try SecondsOption.check(every, option: "--every", zero: false) }
    }

    /// The options given that shape a simulated cuff, each with the standard cuff's setting it
    /// plays (nil: --seed, which every simulated cuff reads, and --model and --unpaired, which
    /// make an Omron cuff instead).
    var shapingGiven: [(option: String, setting: SimulatorSetting?)] {
        let all: [(String, SimulatorSetting?, Bool)] = [
            // Given at all, also with the default value: --from-capture refuses them either way.
            ("--scenario", .scenario, scenarioGiven != nil), ("--persona", .persona, simulation.personaGiven != nil),
            ("--seed", nil, simulation.seedGiven != nil), ("--model", nil, model != nil), ("--unpaired", nil, unpaired),
            ("--autostart", .autostart, autostart), ("--quirk", .quirk, quirk != nil),
            ("--record-segment", .recordSegment, recordSegment != nil), ("--every", .measureEvery, every != nil),
            ("--database-hash", .databaseHash, databaseHash), ("--service-changed", .serviceChanged, serviceChanged),
            ("--indicate-service-changed", .serviceChanged, indicateServiceChanged),
            ("--handle-gap", .handleGap, handleGapGiven != nil),
        ]
        return all.filter(\.2).map { ($0.0, $0.1) }
    }

    var persona: Persona { simulation.persona }
    var seed: UInt64 { simulation.seed }
    var speed: Double { simulation.speed }

    var configuration: SimulatorConfiguration {
        var c = SimulatorConfiguration(
            scenario: scenario.bps ?? .normal, persona: persona, seed: seed, autostart: autostart)
        c.timeScale = speed
        c.utcOffsetSeconds = WallClock.localUTCOffsetSeconds()
        c.recordSegmentLength = recordSegment
        c.measureEvery = every.map(SecondsOption.duration)
        (c.databaseHash, c.serviceChanged, c.indicatesServiceChanged, c.handleGap) = (
            databaseHash, serviceChanged, indicateServiceChanged, handleGap
        )
        c.omron = model.flatMap(OmronCatalog.profile(named:)).map {
            OmronSimulation(profile: $0, scenario: scenario.omron ?? .normal, unpaired: unpaired)
        }
        if let quirk { c.behave(as: quirk) }
        return c
    }
}

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Be a blood-pressure cuff: a GATT server on a Unix socket (or a Bluetooth adapter).",
        discussion: """
            Serves one client after another until stopped (Ctrl-C). Each session is logged to stderr. \
            With --listen unix:PATH, connect with `cuff measure --connect unix:PATH`. Send SIGUSR1 to \
            press the cuff's start button.
            """
    )

    @Flag(help: "List the scenarios, one per line, and exit.")
    var list = false

    @Flag(help: "With --cuffs: no per-cuff session logs on stderr (start, stop and errors only).")
    var quiet = false

    @Option(help: "Where to listen: unix:PATH (with --cuffs: unix:DIR, one socket per cuff, DIR/cuff-0001.sock …).")
    var listen: String?

    @Option(
        help:
            "Serve this many independent cuffs from one process (with --listen unix:DIR): each its own seed (seed + index - 1), name (cuff-sim-0001 …) and serial (SIM-000001 …)."
    )
    var cuffs: Int?

    @Option(help: "Bluetooth adapter to be a cuff on, e.g. hci0 (through bluetoothd, or with --backend raw as root).")
    var adapter: String?

    @Option(
        help: """
            With --adapter: auto (default: bluetoothd when it answers on the system bus), bluetoothd (a GATT application and an \
            advertisement registered with bluetoothd over D-Bus; no root), or raw (HCI/MGMT/L2CAP sockets, needs root).
            """)
    var backend: Backend = .auto

    @OptionGroup var options: SimulatorOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @Option(
        name: .customLong("from-capture"),
        help: ArgumentHelp(
            "Serve the peripheral of a captured session instead of a simulated cuff: its attribute table, values and notifications (btsnoop, pcap or pcapng). The captured gaps are divided by --speed (default 10; 1 for the captured pace).",
            valueName: "file"))
    var fromCapture: String?

    @Option(
        help:
            "With --from-capture: the connection to serve (see --list-sessions; default: the first with a Blood Pressure Service)."
    )
    var session: Int?

    @Flag(
        name: .customLong("list-sessions"),
        help: "With --from-capture: list the capture's connections and which can be served, then exit.")
    var listSessions = false

    @Flag(help: "With --from-capture: after the last captured notification, play them again.")
    var loop = false

    @Option(
        name: .customLong("handle"),
        help: ArgumentHelp(
            "With --from-capture, for a capture without service discovery (a central with a GATT cache): a value handle and its characteristic, HANDLE=UUID, e.g. 0x0003=2a35 (repeatable).",
            valueName: "H=UUID"), transform: Replay.parseHandle)
    var handles: [HandleMapping] = []

    func validate() throws {
        if list { return }
        if fromCapture == nil && (session != nil || listSessions || loop || !handles.isEmpty) {
            throw ValidationError("--session, --list-sessions, --loop and --handle go with --from-capture FILE")
        }
        if fromCapture != nil {
            // The captured cuff is served as it was: options that shape a simulated cuff would be
            // ignored, so they are refused instead (--speed still paces it, --listen/--adapter place it).
            let given = options.shapingGiven.map(\.option) + (cuffProtocol.forced != nil ? ["--protocol"] : [])
            if !given.isEmpty {
                throw ValidationError(
                    "\(given.joined(separator: ", ")) shape\(given.count == 1 ? "s" : "") a simulated cuff; --from-capture serves the captured one as it was"
                )
            }
        }
        if listSessions { return }
        // A protocol's own simulated cuff that does not play an option would serve something else
        // than was asked for, under the option's name (probe O: `--protocol microlife --quirk
        // veroval` served a Microlife cuff labelled "veroval").
        if let forced = cuffProtocol.forced, options.model == nil, let kind = CuffProtocolRegistry.builtIn[forced] {
            let refused = options.shapingGiven.filter { $0.setting.map { !kind.simulatorHonours($0) } ?? false }
            if !refused.isEmpty {
                throw ValidationError(
                    "\(refused.map(\.option).joined(separator: ", ")) shape\(refused.count == 1 ? "s" : "") the standard simulated cuff; the \(forced) protocol's simulated cuff does not play \(refused.count == 1 ? "it" : "them")"
                )
            }
        }
        if listen == nil && adapter == nil { throw ValidationError("give --listen unix:PATH or --adapter hciN") }
        if let listen, !listen.hasPrefix("unix:") { throw ValidationError("--listen takes unix:PATH") }
        if let cuffs {
            guard (1...100_000).contains(cuffs) else { throw ValidationError("--cuffs takes 1 to 100000") }
            guard listen != nil, adapter == nil, fromCapture == nil else {
                // An adapter has one address and one GATT database (bluetoothd's too) for all its
                // advertisements: N cuffs there would be one device with N copies of each service.
                throw ValidationError(
                    "--cuffs N serves a fleet on --listen unix:DIR (not with --from-capture, nor with --adapter: an adapter has one address and one GATT database for all its advertisements, so N cuffs there would look like one; run one simulator per adapter)"
                )
            }
        }
    }

    func run() throws {
        if list {
            let omron =
                options.model == nil ? [] : OmronScenario.allCases.map { "\($0.rawValue)\t\($0.summary) (Omron)" }
            return try Console.print(
                Scenario.allCases.map { "\($0.rawValue)\t\($0.summary)" } + omron, command: "cuff simulate")
        }
        let overrides = HandleMapping.overrides(handles)
        if let fromCapture, listSessions { return try SimulatorService.listSessions(fromCapture, overrides: overrides) }
        var place = SimulatorService.Place.unix(String((listen ?? "").dropFirst("unix:".count)))
        if let adapter {
            place = .adapter(try BlueZCommands.adapter(adapter), backend, defaultName: options.configuration.name)
        }
        var service = SimulatorService(place: place, speed: options.speed, every: options.every)
        service.quiet = quiet
        if let fromCapture {
            return try service.serveCapture(fromCapture, session: session, overrides: overrides, loop: loop)
        }
        if let cuffs { return try service.serveFleet(cuffs, configuration: options.configuration) }
        if options.model != nil {
            return try service.serveOmron(
                configuration: options.configuration, localSeconds: OmronSyncChoice.localSeconds())
        }
        try service.serve(
            protocol: cuffProtocol.forced, configuration: options.configuration,
            label:
                "\(options.quirk.map { "\($0.name) " } ?? "")\(options.scenario.rawValue) cuff (\(options.persona.rawValue), seed \(options.seed), speed \(options.speed)×)"
        )
    }
}
