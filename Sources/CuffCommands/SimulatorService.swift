// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import BlueZ
import BluetoothLive
import Capture
import CuffCore
import CuffLogging
import CuffRuntime
import CuffSession
import CuffSimulator
import Foundation
import GATT
import Logging
import Transport

/// `cuff simulate`: a simulated cuff (or a captured one, or a fleet) served on a Unix socket or a
/// Bluetooth adapter, one client after another, until SIGINT/SIGTERM; SIGUSR1 presses the button.
/// What it says goes to stderr as `cuff simulate: …`; a failure throws its ``ExitStatus``.
public struct SimulatorService {
    /// Where the cuff is served.
    public enum Place {
        /// A Unix SEQPACKET socket (a fleet: the directory of its sockets).
        case unix(String)
        /// A Bluetooth adapter; a peripheral without a name of its own advertises `defaultName`.
        case adapter(BluetoothAdapter, Backend, defaultName: String)
    }

    public var place: Place
    /// Simulated time's pace (1: real time).
    public var speed: Double
    /// `--every`: a measurement every so many simulated seconds (the stop line then counts them).
    public var every: Double?
    /// A fleet: no per-cuff session logs.
    public var quiet = false

    static var log: Logger { Console.logger("cuff simulate") }

    public init(place: Place, speed: Double, every: Double? = nil) {
        self.place = place
        self.speed = speed
        self.every = every
    }

    /// `0001`: four digits at least.
    public static func number(_ i: Int) -> String {
        let s = String(i)
        return s.count >= 4 ? s : String(repeating: "0", count: 4 - s.count) + s
    }

    /// The registry's simulated cuff: the default protocol's, or `forced`'s.
    public func serve(protocol forced: CuffProtocolID?, configuration: SimulatorConfiguration, label: String) throws {
        Self.sayIgnored(configuration)
        let kind = CuffProtocolRegistry.builtIn.select(DeviceOffer(), forced: forced)
        guard let peripheral = kind.makePeripheral(configuration: configuration, requireEncryption: false) else {
            Self.log.error("the \(kind.id) protocol has no simulated cuff")
            throw ExitStatus.usage
        }
        try serve(peripheral, label: label, name: nil)
    }

    /// `--model`: one Omron cuff (its clock starting at the host's local time).
    public func serveOmron(configuration: SimulatorConfiguration, localSeconds: Int64) throws {
        var c = configuration
        c.clockStart = localSeconds
        guard let peripheral = OmronPeripheral(configuration: c), let o = c.omron else { throw ExitStatus.usage }
        let users = o.profile.users.indices.map { "\(peripheral.cuff.stored(user: $0).count)" }.joined(separator: "+")
        try serve(
            peripheral,
            label:
                "Omron \(o.profile.id) \(o.scenario.rawValue) cuff (\(o.profile.transport.rawValue), \(o.profile.pairing.rawValue) pairing\(o.unpaired ? ", unpaired" : ""), \(users) readings, seed \(c.seed))",
            name: o.profile.id)
    }

    /// `--from-capture`: the peripheral of a captured session (`session`, else the first servable).
    public func serveCapture(_ path: String, session: Int?, overrides: [UInt16: CuffCharacteristic], loop: Bool) throws
    {
        let captured: CapturedCuff
        do {
            captured = try CapturedCuff.load(path: path, session: session, overrides: overrides)
        } catch let e as CapturedCuffError {
            Self.log.error("\(path): \(e)")
            throw ExitStatus.serviceMissing
        } catch {
            Self.log.error("\(path): \(error)")
            throw ExitStatus.failure
        }
        let c = captured.connection
        let label =
            "session \(c.number) of \(path) (hci\(c.adapter) \(Hex.handle(c.handle))\(c.peer.map { ", " + $0 } ?? ""); \(captured.database.attributes.count) attributes, \(captured.pushes.count) notifications and indications)"
        try serve(CapturedCuffPeripheral(captured, loop: loop), label: label, name: captured.name)
    }

    /// `--list-sessions`: one line per connection of the capture on stdout.
    public static func listSessions(_ path: String, overrides: [UInt16: CuffCharacteristic]) throws {
        let list: [CapturedCuff.Connection]
        let fault: CaptureError?
        do { (list, fault) = try CapturedCuff.connections(path: path, overrides: overrides) } catch {
            log.error("\(path): \(error.summary)")
            throw ExitStatus.failure
        }
        // The connections before a fault are listed, then the fault named (exit 1), as
        // `cuff replay` prints the records before one.
        defer { if let fault { log.error("\(path): \(fault.summary)") } }
        try Console.print(
            list.map { c in
                let what =
                    c.servable
                    ? (c.inheritedDiscovery ? "servable (discovery from an earlier connection)" : "servable")
                    : "no Blood Pressure Service"
                return
                    "\(c.number)\thci\(c.adapter)\t\(Hex.handle(c.handle))\t\(c.peer ?? "-")\t\(c.services) services\t\(c.pushes) notifications/indications\t\(what)"
            }, command: "cuff simulate")
        if fault != nil { throw ExitStatus.failure }
        if !list.contains(where: \.servable) {
            log.error("no connection in \(path) can be served")
            throw ExitStatus.serviceMissing
        }
    }

    /// Says an option the cuff asked for cannot follow (`--autostart` on a cuff that never
    /// measures on its own).
    static func sayIgnored(_ configuration: SimulatorConfiguration) {
        if let why = configuration.autostartIgnored { log.warning("--autostart has no effect: \(why)") }
    }

    /// Serves `peripheral` at ``place``, one client after another, until stopped.
    public func serve<P: GATTPeripheral>(_ peripheral: P, label: String, name: String?) throws {
        let signals = try SignalFlags.shared.listen()
        let driver = PeripheralDriver(
            peripheral: peripheral, clock: SimulationClock(speed: speed), signals: signals, log: Self.log)
        switch place {
        case let .adapter(adapter, backend, defaultName):
            do {
                try LiveBluetooth.simulate(
                    adapter: adapter, backend: backend, driver: driver, name: name ?? defaultName, label: label,
                    log: Self.log)
            } catch {
                throw error.outcome.exitStatus
            }
        case let .unix(path):
            let listener: UnixSeqpacketListener
            do {
                listener = try UnixSeqpacketListener(path: path)
            } catch {
                Self.log.error("cannot listen at \(path): \(error.message)")
                throw ExitStatus.connectionFailed
            }
            Self.log.info("\(label) listening at unix:\(path)")
            let loop = try Self.makeLoop()
            try run(
                [ListeningPeripheral(driver: driver, listener: listener, loop: loop, log: Self.log)], loop: loop,
                signals: signals)
        }
    }

    /// `--cuffs N`: N simulated cuffs (``SimulatorConfiguration/fleetMember(_:)`` of `configuration`)
    /// on one event loop, at DIR/cuff-0001.sock ….
    public func serveFleet(_ count: Int, configuration: SimulatorConfiguration) throws {
        Self.sayIgnored(configuration)
        if let o = configuration.omron {
            // Omron cuffs: each its own seed (readings) and advertised name, the clock from the host's.
            let label =
                "\(count) Omron \(o.profile.id) \(o.scenario.rawValue) cuffs (seeds \(configuration.seed)…, speed \(speed)×)"
            var c = configuration
            c.clockStart = OmronSyncChoice.localSeconds()
            return try serveFleet(count, configuration: c, label: label) { OmronPeripheral(configuration: $0) }
        }
        let every = self.every.map { ", one measurement every \($0) s" } ?? ""
        let label =
            "\(count) \(configuration.scenario.rawValue) cuffs (\(configuration.persona.rawValue), seeds \(configuration.seed)…, speed \(speed)×\(every))"
        try serveFleet(count, configuration: configuration, label: label) { CuffPeripheral(configuration: $0) }
    }

    /// N peripherals that `make` builds from each member's configuration, on one event loop.
    func serveFleet<P: GATTPeripheral>(
        _ count: Int, configuration: SimulatorConfiguration, label: String,
        make: (SimulatorConfiguration) -> P?
    ) throws {
        guard case let .unix(dir) = place else { throw ExitStatus.usage }
        let signals = try SignalFlags.shared.listen()
        do {
            try FleetDirectory.prepare(dir)
        } catch {
            Self.log.error("\(error)")
            throw ExitStatus.connectionFailed
        }
        let loop = try Self.makeLoop()
        let clock = SimulationClock(speed: speed)
        var cuffs: [ListeningPeripheral<P>] = []
        cuffs.reserveCapacity(count)
        for i in 1...count {
            let name = "cuff-\(Self.number(i))"
            let path = dir + "/" + name + ".sock"
            let log = Console.logger("cuff simulate", quiet: quiet).scoped(name)
            guard let peripheral = make(configuration.fleetMember(i)) else { throw ExitStatus.usage }
            let driver = PeripheralDriver(peripheral: peripheral, clock: clock, signals: nil, log: log)
            do {
                cuffs.append(
                    ListeningPeripheral(
                        driver: driver, listener: try UnixSeqpacketListener(path: path, backlog: 4), loop: loop,
                        log: log))
            } catch {
                Self.log.error("cannot listen at \(path): \(error.message)")
                for c in cuffs { c.stop() }
                throw ExitStatus.connectionFailed
            }
        }
        Self.log.info("\(label) listening at unix:\(dir)/cuff-0001.sock … cuff-\(Self.number(count)).sock")
        try run(cuffs, loop: loop, signals: signals)
    }

    static func makeLoop() throws(ExitStatus) -> EventLoop {
        do {
            return try EventLoop()
        } catch {
            log.error("\(error.message)")
            throw .connectionFailed
        }
    }

    /// Runs the cuffs until SIGINT/SIGTERM; SIGUSR1 presses every cuff's button.
    func run<P: GATTPeripheral>(_ cuffs: [ListeningPeripheral<P>], loop: EventLoop, signals: SignalFlags)
        throws(ExitStatus)
    {
        defer {
            for c in cuffs { c.stop() }
            let machines = cuffs.compactMap { ($0.driver.peripheral as? CuffPeripheral)?.machine }
            if cuffs.count > 1 || every != nil, !machines.isEmpty {
                let taken = machines.reduce(0) { $0 + $1.measurementsDone },
                    confirmed = machines.reduce(0) { $0 + $1.confirmedReadings }
                Self.log.info(
                    "stopped: \(taken) measurement\(taken == 1 ? "" : "s") taken, \(confirmed) reading\(confirmed == 1 ? "" : "s") confirmed by clients"
                )
            } else {
                Self.log.info("stopped")
            }
        }
        do {
            try ListeningPeripheral.serve(cuffs, loop: loop, signals: signals)
        } catch {
            Self.log.error("\((error.path.map { "cannot accept at \($0): " } ?? "") + error.error.message)")
            throw .connectionFailed
        }
    }
}

extension SimulatorConfiguration {
    /// Cuff `index` (1-based) of a fleet: its own seed, name, serial and clock.
    public func fleetMember(_ index: Int) -> SimulatorConfiguration {
        var c = self
        c.seed = seed &+ UInt64(index - 1)
        c.name = "cuff-sim-\(SimulatorService.number(index))"
        c.serial =
            "SIM-" + String(String(index).reversed()).padding(toLength: 6, withPad: "0", startingAt: 0).reversed()
        return c
    }
}

/// The directory of a fleet's sockets.
public enum FleetDirectory {
    public struct NotADirectory: Error, CustomStringConvertible {
        public var path: String
        public var description: String { "\(path) exists and is not a directory; --cuffs needs --listen unix:DIR" }
    }

    /// Creates `dir` (mode 0700) if it does not exist; refuses a path that is not a directory.
    public static func prepare(_ dir: String) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
            guard isDir.boolValue else { throw NotADirectory(path: dir) }
            return
        }
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }
}
