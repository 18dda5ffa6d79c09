// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import Capture
import GATT
import Omron
import Transport
import Foundation

struct SimulatorOptions: ParsableArguments {
    @Option(help: "Scenario to play (see `cuff simulate --list`; with --model, an Omron scenario).")
    var scenario: ScenarioName = .normal

    @Option(help: ArgumentHelp(OmronModelOption.help, valueName: "name"))
    var model: String?

    @Flag(help: "With --model: start the Omron cuff factory-fresh (no key, no bond), so `cuff pair` must pair it in pairing mode (SIGUSR1).")
    var unpaired = false

    @OptionGroup var simulation: SimulationOptions

    @Flag(help: "Start measuring as soon as a client has subscribed (else: a start command, or SIGUSR1 as the button).")
    var autostart = false

    @Option(help: "Behave as a device family's cuff, as the public sources describe it: its names, value layout, memory and session habits (see the README's \"Supported cuffs\").")
    var quirk: QuirkProfile?

    @Option(name: .customLong("record-segment"), help: "bps-1.1: send each Blood Pressure Record in segments of at most N bytes (6-512; as a small ATT MTU would force).")
    var recordSegment: Int?

    @Option(help: ArgumentHelp(
        "Take a measurement every SECONDS of simulated time, connected or not: a connected client gets it live, otherwise the cuff keeps it and delivers it as a stored reading at the next connection.",
        valueName: "seconds"))
    var every: Double?

    @Flag(name: .customLong("database-hash"), help: "Have the Generic Attribute service (first) with a Database Hash (0x2B2A), which a client's GATT cache reads to check itself.")
    var databaseHash = false

    @Flag(name: .customLong("service-changed"), help: "Have the Generic Attribute service (first) with Service Changed (0x2A05).")
    var serviceChanged = false

    @Flag(name: .customLong("indicate-service-changed"), help: "With --service-changed: indicate it on every connection, as a bonded cuff whose database changed.")
    var indicateServiceChanged = false

    @Option(name: .customLong("handle-gap"), help: "Leave N handles unused before the cuff's services: a firmware whose handles moved (for a client's GATT cache).")
    var handleGap: UInt16 = 0

    func validate() throws {
        try OmronModelOption.check(scenario, model: model)
        if let model { _ = try OmronModelOption.profile(model) }
        if unpaired && model == nil { throw ValidationError("--unpaired goes with --model (an Omron cuff)") }
        // A peer on a socket or a radio needs paced time: "as fast as possible" is for in-process runs.
        guard simulation.speed > 0 else { throw ValidationError("cuff simulate needs --speed above 0 (0 is for measure --simulated)") }
        if let n = recordSegment, !(6...512).contains(n) { throw ValidationError("--record-segment takes 6 to 512 bytes") }
        if let every, !(every > 0 && every.isFinite) { throw ValidationError("--every takes a number of seconds above 0") }
    }

    var persona: Persona { simulation.persona }
    var seed: UInt64 { simulation.seed }
    var speed: Double { simulation.speed }

    var configuration: SimulatorConfiguration {
        var c = SimulatorConfiguration(scenario: scenario.bps ?? .normal, persona: persona, seed: seed, autostart: autostart)
        c.timeScale = speed
        c.recordSegmentLength = recordSegment
        c.measureEvery = every.map { .nanoseconds(Int64($0 * 1e9)) }
        (c.databaseHash, c.serviceChanged, c.indicatesServiceChanged, c.handleGap) = (databaseHash, serviceChanged, indicateServiceChanged, handleGap)
        c.omron = model.flatMap(OmronCatalog.profile(named:)).map { OmronSimulation(profile: $0, scenario: scenario.omron ?? .normal, unpaired: unpaired) }
        if let quirk { c.behave(as: quirk) }
        return c
    }

    /// Cuff `index` (1-based) of a fleet: its own seed, name, serial and clock.
    func configuration(fleetIndex index: Int) -> SimulatorConfiguration {
        var c = configuration
        c.seed = seed &+ UInt64(index - 1)
        c.name = "cuff-sim-\(Simulate.number(index))"
        c.serial = "SIM-" + String(String(index).reversed()).padding(toLength: 6, withPad: "0", startingAt: 0).reversed()
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

    @Option(help: "Serve this many independent cuffs from one process (with --listen unix:DIR): each its own seed (seed + index - 1), name (cuff-sim-0001 …) and serial (SIM-000001 …).")
    var cuffs: Int?

    @Option(help: "Bluetooth adapter to be a cuff on, e.g. hci0 (through bluetoothd, or with --backend raw as root).")
    var adapter: String?

    @Option(help: """
        With --adapter: auto (default: bluetoothd when it answers on the system bus), bluetoothd (a GATT application and an \
        advertisement registered with bluetoothd over D-Bus; no root), or raw (HCI/MGMT/L2CAP sockets, needs root).
        """)
    var backend: Backend = .auto

    @OptionGroup var options: SimulatorOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @Option(name: .customLong("from-capture"), help: ArgumentHelp(
        "Serve the peripheral of a captured session instead of a simulated cuff: its attribute table, values and notifications (btsnoop, pcap or pcapng). The captured gaps are divided by --speed (default 10; 1 for the captured pace).",
        valueName: "file"))
    var fromCapture: String?

    @Option(help: "With --from-capture: the connection to serve (see --list-sessions; default: the first with a Blood Pressure Service).")
    var session: Int?

    @Flag(name: .customLong("list-sessions"), help: "With --from-capture: list the capture's connections and which can be served, then exit.")
    var listSessions = false

    @Flag(help: "With --from-capture: after the last captured notification, play them again.")
    var loop = false

    @Option(name: .customLong("handle"), help: ArgumentHelp(
        "With --from-capture, for a capture without service discovery (a central with a GATT cache): a value handle and its characteristic, HANDLE=UUID, e.g. 0x0003=2a35 (repeatable).",
        valueName: "H=UUID"), transform: Replay.parseHandle)
    var handles: [Replay.HandleMapping] = []

    func validate() throws {
        if list { return }
        if fromCapture == nil && (session != nil || listSessions || loop || !handles.isEmpty) {
            throw ValidationError("--session, --list-sessions, --loop and --handle go with --from-capture FILE")
        }
        if listSessions { return }
        if listen == nil && adapter == nil { throw ValidationError("give --listen unix:PATH or --adapter hciN") }
        if let listen, !listen.hasPrefix("unix:") { throw ValidationError("--listen takes unix:PATH") }
        if let cuffs {
            guard (1...100_000).contains(cuffs) else { throw ValidationError("--cuffs takes 1 to 100000") }
            guard listen != nil, adapter == nil, fromCapture == nil else {
                throw ValidationError("--cuffs N serves a fleet on --listen unix:DIR (not with --adapter or --from-capture)")
            }
        }
    }

    /// `0001`: four digits at least.
    static func number(_ i: Int) -> String {
        let s = String(i)
        return s.count >= 4 ? s : String(repeating: "0", count: 4 - s.count) + s
    }

    func run() throws {
        if list {
            do {
                for s in Scenario.allCases { try Output.line("\(s.rawValue)\t\(s.summary)") }
                if options.model != nil {
                    for s in OmronScenario.allCases { try Output.line("\(s.rawValue)\t\(s.summary) (Omron)") }
                }
                try Output.flush()
            } catch {
                throw ExitCode(Output.sinkFailed("cuff simulate", error))
            }
            return
        }
        if let fromCapture {
            if listSessions { return try Self.listSessions(fromCapture, overrides: overrides) }
            let captured: CapturedCuff
            do {
                captured = try CapturedCuff.load(path: fromCapture, session: session, overrides: overrides)
            } catch let e as CapturedCuffError {
                Output.log("cuff simulate: \(fromCapture): \(e)")
                throw ExitCode(SessionExit.nothingToServe)
            } catch {
                Output.log("cuff simulate: \(fromCapture): \(error)")
                throw ExitCode(SessionExit.badCapture)
            }
            let c = captured.connection
            let label = "session \(c.number) of \(fromCapture) (hci\(c.adapter) \(Hex.handle(c.handle))\(c.peer.map { ", " + $0 } ?? ""); \(captured.database.attributes.count) attributes, \(captured.pushes.count) notifications and indications)"
            return try serve(CapturedCuffPeripheral(captured, loop: loop), label: label, name: captured.name)
        }
        if options.model != nil {
            guard cuffs == nil, adapter == nil else {
                Output.log("cuff simulate: --model serves one Omron cuff on --listen unix:PATH (no --cuffs or --adapter yet)")
                throw ExitCode(SessionExit.connectionFailed)
            }
            var c = options.configuration
            c.clockStart = OmronModelOption.localSeconds()
            guard let peripheral = OmronPeripheral(configuration: c), let o = c.omron else { throw ExitCode.validationFailure }
            let users = o.profile.users.indices.map { "\(peripheral.cuff.stored(user: $0).count)" }.joined(separator: "+")
            return try serve(peripheral, label: "Omron \(o.profile.id) \(o.scenario.rawValue) cuff (\(o.profile.transport.rawValue), \(o.profile.pairing.rawValue) pairing\(o.unpaired ? ", unpaired" : ""), \(users) readings, seed \(options.seed))", name: o.profile.id)
        }
        if let cuffs { return try serveFleet(cuffs) }
        // The registry's simulated cuff: the default protocol's, or `--protocol`'s.
        let kind = CuffProtocolRegistry.builtIn.select(DeviceOffer(), forced: cuffProtocol.forced)
        guard let peripheral = kind.makePeripheral(configuration: options.configuration, requireEncryption: false) else {
            Output.log("cuff simulate: the \(kind.id) protocol has no simulated cuff")
            throw ExitCode.validationFailure
        }
        try serve(peripheral,
                  label: "\(options.quirk.map { "\($0.name) " } ?? "")\(options.scenario.rawValue) cuff (\(options.persona.rawValue), seed \(options.seed), speed \(options.speed)×)", name: nil)
    }

    var overrides: [UInt16: CuffCharacteristic] {
        Dictionary(handles.map { ($0.handle, $0.characteristic) }, uniquingKeysWith: { _, b in b })
    }

    /// `--list-sessions`: one line per connection of the capture.
    static func listSessions(_ path: String, overrides: [UInt16: CuffCharacteristic]) throws {
        do {
            let list = try CapturedCuff.connections(path: path, overrides: overrides)
            for c in list {
                let what = c.servable ? (c.inheritedDiscovery ? "servable (discovery from an earlier connection)" : "servable") : "no Blood Pressure Service"
                try Output.line("\(c.number)\thci\(c.adapter)\t\(Hex.handle(c.handle))\t\(c.peer ?? "-")\t\(c.services) services\t\(c.pushes) notifications/indications\t\(what)")
            }
            try Output.flush()
            if !list.contains(where: \.servable) {
                Output.log("cuff simulate: no connection in \(path) can be served")
                throw ExitCode(SessionExit.nothingToServe)
            }
        } catch let e as ExitCode {
            throw e
        } catch let e as CaptureError {
            Output.log("cuff simulate: \(path): \(e)")
            throw ExitCode(SessionExit.badCapture)
        } catch {
            throw ExitCode(Output.sinkFailed("cuff simulate", error))
        }
    }

    /// Serves `peripheral` on the adapter or the Unix socket, one client after another, until stopped.
    func serve<P: GATTPeripheral>(_ peripheral: P, label: String, name: String?) throws {
        let signals = SignalFlags.shared
        try signals.install()
        // A parent may have blocked these (test runners do); a child inherits the mask.
        try signals.unblockOnCurrentThread()
        let clock = SimulationClock(speed: options.speed)
        let driver = PeripheralDriver(peripheral: peripheral, clock: clock, signals: signals) { Output.log("cuff simulate: " + $0) }
        if let adapter {
            try BlueZCommands.simulate(adapter: adapter, backend: backend, driver: driver, options: options, name: name, label: label)
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
        Output.log("cuff simulate: \(label) listening at unix:\(path)")
        let loop = try makeLoop()
        try run([ListeningPeripheral(driver: driver, listener: listener, loop: loop, log: { Output.log("cuff simulate: " + $0) })], loop: loop, signals: signals)
    }

    /// `--cuffs N`: N simulated cuffs on one event loop, at DIR/cuff-0001.sock ….
    func serveFleet(_ count: Int) throws {
        let signals = SignalFlags.shared
        try signals.install()
        try signals.unblockOnCurrentThread()
        let dir = String(listen!.dropFirst("unix:".count))
        do {
            try FleetDirectory.prepare(dir)
        } catch {
            Output.log("cuff simulate: \(error)")
            throw ExitCode(SessionExit.connectionFailed)
        }
        let loop = try makeLoop()
        let clock = SimulationClock(speed: options.speed)
        var cuffs: [ListeningPeripheral<CuffPeripheral>] = []
        cuffs.reserveCapacity(count)
        for i in 1...count {
            let name = "cuff-\(Self.number(i))"
            let path = dir + "/" + name + ".sock"
            let log: (String) -> Void = quiet ? { _ in } : { Output.log("cuff simulate: \(name): " + $0) }
            let driver = PeripheralDriver(peripheral: CuffPeripheral(configuration: options.configuration(fleetIndex: i)), clock: clock, signals: nil, log: log)
            do {
                cuffs.append(ListeningPeripheral(driver: driver, listener: try UnixSeqpacketListener(path: path, backlog: 4), loop: loop, log: log))
            } catch {
                Output.log("cuff simulate: cannot listen at \(path): \(error.message)")
                for c in cuffs { c.stop() }
                throw ExitCode(SessionExit.connectionFailed)
            }
        }
        let every = options.every.map { ", one measurement every \($0) s" } ?? ""
        Output.log("cuff simulate: \(count) \(options.scenario.rawValue) cuffs (\(options.persona.rawValue), seeds \(options.seed)…, speed \(options.speed)×\(every)) listening at unix:\(dir)/cuff-0001.sock … cuff-\(Self.number(count)).sock")
        try run(cuffs, loop: loop, signals: signals)
    }

    func makeLoop() throws -> EventLoop {
        do {
            return try EventLoop()
        } catch {
            Output.log("cuff simulate: \(error.message)")
            throw ExitCode(SessionExit.connectionFailed)
        }
    }

    /// Runs the cuffs until SIGINT/SIGTERM; SIGUSR1 presses every cuff's button.
    func run<P: GATTPeripheral>(_ cuffs: [ListeningPeripheral<P>], loop: EventLoop, signals: SignalFlags) throws {
        defer {
            for c in cuffs { c.stop() }
            let machines = cuffs.compactMap { ($0.driver.peripheral as? CuffPeripheral)?.machine }
            if cuffs.count > 1 || options.every != nil, !machines.isEmpty {
                let taken = machines.reduce(0) { $0 + $1.measurementsDone }, confirmed = machines.reduce(0) { $0 + $1.confirmedReadings }
                Output.log("cuff simulate: stopped: \(taken) measurements taken, \(confirmed) readings confirmed by clients")
            } else {
                Output.log("cuff simulate: stopped")
            }
        }
        do {
            try ListeningPeripheral.serve(cuffs, loop: loop, signals: signals)
        } catch {
            Output.log("cuff simulate: " + (error.path.map { "cannot accept at \($0): " } ?? "") + error.error.message)
            throw ExitCode(SessionExit.connectionFailed)
        }
    }
}

enum SessionExit {
    static let connectionFailed: Int32 = 9
    /// `--from-capture`: the capture cannot be read (as `cuff replay` of a damaged capture).
    static let badCapture: Int32 = 1
    /// `--from-capture`: no connection shows a Blood Pressure Service (as a missing service).
    static let nothingToServe: Int32 = 7
}

/// The directory of a fleet's sockets.
enum FleetDirectory {
    /// Creates `dir` (mode 0700) if it does not exist; refuses a path that is not a directory.
    static func prepare(_ dir: String) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
            guard isDir.boolValue else { throw ValidationError("\(dir) exists and is not a directory; --cuffs needs --listen unix:DIR") }
            return
        }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }
}
