// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import GATT
import Glibc
import BloodPressure
import BlueZ
import BluetoothLive
import CuffCore
import CuffRuntime
import CuffSession
import Omron
import Sinks
import Transport

/// `--backend`'s values (the type lives with the live paths).
typealias Backend = BluetoothLive.Backend

extension Backend: ExpressibleByArgument {
    static let help: ArgumentHelp = """
        auto (default: bluetoothd when it runs, i.e. org.bluez is on the system bus), bluetoothd, or raw \
        (HCI/MGMT/L2CAP sockets, needs root). On the bluetoothd path bluetoothd confirms indications itself \
        before cuff has stored the reading; the raw path confirms only after the sinks took it.
        """
}

/// The live Bluetooth paths, wired: options parsed here, the work done by ``LiveBluetooth``.
enum BlueZCommands {
    typealias Agent = LiveBluetooth.Agent

    static func adapter(_ text: String) throws -> BluetoothAdapter {
        do { return try BluetoothAdapter(parsing: text) } catch {
            throw ValidationError("--adapter: \(error.message)")
        }
    }

    static func address(_ text: String) throws -> BluetoothAddress {
        do {
            guard case let .bluetooth(a) = try TransportAddress(parsing: text) else {
                throw ValidationError("'\(text)' is not a Bluetooth address (AA:BB:CC:DD:EE:FF, optionally /random)")
            }
            return a
        } catch let e as ValidationError {
            throw e
        } catch {
            throw ValidationError("\(error)")
        }
    }

    static let bondsHelp: ArgumentHelp = "Bond store for the raw path (default $XDG_STATE_HOME/cuff/bonds, else ~/.local/state/cuff/bonds; mode 0600). Its keys are loaded into the kernel before connecting, new ones stored after pairing. With bluetoothd, bluetoothd keeps the bonds."

    static func pairingAgent(_ adapter: BluetoothAdapter, peer: BluetoothAddress? = nil, log: @escaping @Sendable (String) -> Void) -> Agent? {
        LiveBluetooth.pairingAgent(adapter, peer: peer, log: log)
    }

    static func bondStore(_ path: String?, log: (String) -> Void) -> BondStore? { LiveBluetooth.bondStore(path, log: log) }

    static func loadBonds(_ store: BondStore?, adapter: BluetoothAdapter, log: (String) -> Void) {
        LiveBluetooth.loadBonds(store, adapter: adapter, log: log)
    }

    static func saveBonds(_ store: BondStore?, agent: Agent?, adapter: BluetoothAdapter, log: (String) -> Void) {
        LiveBluetooth.saveBonds(store, agent: agent, adapter: adapter, log: log)
    }

    static func connect(adapter: BluetoothAdapter, to peer: BluetoothAddress, log: (String) -> Void) throws(TransportError) -> L2CAPATTBearer {
        try LiveBluetooth.connect(adapter: adapter, to: peer, log: log)
    }

    /// A live path that could not go on exits with its outcome's status (it said why).
    static func exiting<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let f as LiveBluetoothFailure { throw ExitCode(f.outcome.exitCode) }
    }

    static func measure(
        address text: String, adapter adapterName: String, backend: Backend = .auto, bonds: String? = nil,
        configuration: (String) -> CuffSessionConfiguration, hooks: SessionHooks, signals: SignalFlags, stopAfter: Duration?,
        store: (any MeasurementStore)?
    ) throws -> (SessionOutcome, Int32, Bool) {
        let adapter = try adapter(adapterName)
        let peer = try address(text)
        return try exiting {
            try LiveBluetooth.measure(peer: peer, adapter: adapter, backend: backend, bonds: bonds, configuration: configuration, hooks: hooks,
                                      signals: signals, stopAfter: stopAfter, store: store, log: { Output.log("cuff measure: " + $0) })
        }
    }

    static func watch(adapter adapterName: String, backend: Backend, devices: [String], bonds: String?, watcher: Watcher) throws -> Agent? {
        let adapter = try adapter(adapterName)
        return try exiting {
            try LiveBluetooth.watch(adapter: adapter, backend: backend, devices: devices, address: address, bonds: bonds, watcher: watcher,
                                    log: { Output.log("cuff watch: " + $0) })
        }
    }

    static func simulate<P: GATTPeripheral>(
        adapter adapterName: String, backend: Backend = .raw, driver: PeripheralDriver<P>, options: SimulatorOptions, name advertisedName: String? = nil,
        label: String? = nil
    ) throws {
        let adapter = try adapter(adapterName)
        if backend.resolved(log: { Output.log("cuff simulate: " + $0) }) == .bluetoothd {
            return try simulateThroughBluetoothd(adapter: adapter, driver: driver, options: options, name: advertisedName, label: label)
        }
        try exiting {
            try LiveBluetooth.simulate(adapter: adapter, driver: driver, name: advertisedName ?? options.configuration.name,
                                       label: label ?? options.scenario.rawValue + " cuff", log: { Output.log("cuff simulate: " + $0) })
        }
    }

    /// `cuff simulate --backend bluetoothd`: the peripheral as a GATT application and an LE
    /// advertisement registered with bluetoothd, on one event loop with the peripheral's driver.
    /// No raw sockets (no root); a bluetoothd restart is waited out and registered with again.
    static func simulateThroughBluetoothd<P: GATTPeripheral>(
        adapter: BluetoothAdapter, driver: PeripheralDriver<P>, options: SimulatorOptions, name advertisedName: String?, label: String?
    ) throws {
        let signals = SignalFlags.shared
        let log: (String) -> Void = { Output.log("cuff simulate: " + $0) }
        let name = advertisedName ?? options.configuration.name
        /// The loop, the peripheral's clock on it, the application registered (answers come on the loop).
        func start() throws(TransportError) -> (EventLoop, BlueZGATTApplication) {
            let loop = try EventLoop()
            driver.attach(to: loop)
            let layout = BlueZGATTLayout(database: driver.peripheral.database, name: name)
            let application = try BlueZGATTApplication(adapter: adapter, layout: layout, loop: loop, log: log) { bearer, client in
                if driver.isConnected { driver.interrupt() }
                driver.accept(bearer, client: client) { end in log("session ended: \(end)") }
            }
            try application.start()
            return (loop, application)
        }
        let started: Result<(EventLoop, BlueZGATTApplication), TransportError> = Result { () throws(TransportError) in try start() }
        guard case .success(let (loop, application)) = started else {
            if case .failure(let error) = started { log("bluetoothd: \(error.message)") }
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        // The simulator takes any central on its adapter: a D-Bus agent for this adapter only.
        let agent: BlueZAgent?
        do {
            agent = try BlueZAgent(scope: AgentScope(adapter: adapter, device: nil), path: "/cuff/simulator_agent",
                                   onEvent: { Output.log("cuff simulate: pairing agent (D-Bus): " + $0) })
        } catch {
            log("no pairing agent: \(error.message)")
            agent = nil
        }
        defer {
            agent?.stop()
            application.stop()
            Output.log("cuff simulate: stopped")
        }
        log("\(label ?? options.scenario.rawValue + " cuff") \"\(name)\" through bluetoothd on \(adapter): \(application.layout.objects.count) GATT objects at \(application.layout.root), advertising 0x1810")
        do {
            try loop.run {
                if signals.isRaised(.int) || signals.isRaised(.term) { return true }
                if signals.consume(.usr1) { driver.pressButton() }
                return application.failure != nil
            }
        } catch {
            log(error.message)
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        if application.failure != nil { throw ExitCode(SessionOutcome.connectionFailed.exitCode) }
    }
}

struct Scan: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for Bluetooth LE blood-pressure cuffs (service 0x1810, or an Omron cuff's own protocol).",
        discussion: "Prints one JSON object per device seen, merged from its advertisements and scan responses. Needs root (CAP_NET_RAW/CAP_NET_ADMIN)."
    )

    @Option(help: "Bluetooth adapter.")
    var adapter: String = "hci0"

    @Option(help: "Seconds to scan.")
    var timeout: Double = 5

    @Flag(help: "Include devices that are not blood-pressure cuffs.")
    var all = false

    @Option(help: Backend.help)
    var backend: Backend = .auto

    func run() throws {
        let adapter = try BlueZCommands.adapter(self.adapter)
        let signals = SignalFlags.shared
        try signals.install()
        try signals.unblockOnCurrentThread()
        let collector = ScanCollector(all: all, emit: emit)
        let stopped = { signals.isRaised(.int) || signals.isRaised(.term) }
        if backend.resolved(log: { Output.log("cuff scan: " + $0) }) == .bluetoothd {
            // bluetoothd's own discovery session (merged with any other client's; ours alone is
            // stopped at the end): the controller's scan is bluetoothd's, never touched here.
            do {
                let bus = try BlueZBus()
                defer { bus.close() }
                try BlueZDiscovery.scan(adapter: adapter, bus: bus, duration: .nanoseconds(Int64(timeout * 1e9)),
                                        uuids: all ? [] : ["00001810-0000-1000-8000-00805f9b34fb", OmronUUID.modernService, OmronUUID.classicService], stop: stopped,
                                        log: { Output.log("cuff scan: " + $0) }) { r in
                    try collector.take(r, replacing: true)  // bluetoothd's view replaces, not merges
                }
            } catch let e as TransportError {
                Output.log("cuff scan: \(e.message)")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
            }
        } else {
            let scanner: LEScanner
            do {
                scanner = try LEScanner(adapter: adapter)
            } catch {
                Output.log("cuff scan: \(error.message)")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
            }
            defer { scanner.stop() }
            for note in scanner.notes { Output.log("cuff scan: " + note) }
            let end = MonotonicClock.now() + .nanoseconds(Int64(timeout * 1e9))
            while MonotonicClock.now() < end, !stopped() {
                let reports: [AdvertisingReport]
                do { reports = try scanner.next(timeout: .milliseconds(100)) } catch {
                    Output.log("cuff scan: \(error.message)")
                    throw ExitCode(SessionOutcome.connectionFailed.exitCode)
                }
                for r in reports { try collector.take(r) }
            }
        }
        try collector.finish()
    }

    func emit(_ r: AdvertisingReport) throws {
        guard case var .object(pairs) = r.json else { return }
        pairs.insert(("type", .string("device")), at: 0)
        pairs.append(("blood_pressure", .bool(r.isBloodPressureCuff)))
        // What cuff would use for it: a device family's profile, a vendor protocol (Omron's own
        // protocol wins when the advert shows it), or none.
        let recognised = r.recognition
        let omron = r.omron
        pairs.append(("profile", JSON.from(recognised.profileName, JSON.string)))
        pairs.append(("protocol", omron != nil ? .string("omron") : JSON.from(recognised.protocolName, JSON.string)))
        // Omron's advert (manufacturer 0x020E, service FE4A or ecbe3980…, BLESmart_ names): the key
        // is there only for an Omron cuff.
        if let omron { pairs.append(("omron", omron.json)) }
        do {
            try Output.line(JSON.object(pairs).serialized())
            try Output.flush()
        } catch {
            throw ExitCode(Output.sinkFailed("cuff scan", error))
        }
    }
}

extension AdvertisingReport {
    /// What cuff would use for this device: a profile, a vendor protocol, or none (`cuff scan`).
    var recognition: CuffRecognition {
        CuffRecognition.recognise(name: localName, serviceUUIDs16: serviceUUIDs16, serviceUUIDs128: serviceUUIDs128, manufacturerData: manufacturerData)
    }
}

/// `cuff scan`'s merging and printing: each device once it has a name (or at the end), merged
/// with its scan response.
final class ScanCollector {
    let all: Bool
    let emit: (AdvertisingReport) throws -> Void
    var seen: [String: AdvertisingReport] = [:]
    var order: [String] = []
    var printed: Set<String> = []

    init(all: Bool, emit: @escaping (AdvertisingReport) throws -> Void) {
        self.all = all
        self.emit = emit
    }

    func take(_ r: AdvertisingReport, replacing: Bool = false) throws {
        let key = r.address.description
        if let old = seen[key], !replacing { seen[key] = old.merged(with: r) } else {
            if seen[key] == nil { order.append(key) }
            seen[key] = r
        }
        if let m = seen[key], !printed.contains(key), m.localName != nil, all || m.isBloodPressureCuff || m.recognition.isCuff || m.omron != nil {
            printed.insert(key)
            try emit(m)
        }
    }

    func finish() throws {
        for key in order where !printed.contains(key) {
            if let m = seen[key], all || m.isBloodPressureCuff || m.recognition.isCuff || m.omron != nil { try emit(m) }
        }
        Output.log("cuff scan: \(seen.count) device(s) seen, \(seen.values.filter(\.isBloodPressureCuff).count) advertising the Blood Pressure service")
    }
}

extension AdvertisingReport {
    /// What the advert says about an Omron cuff, or nil.
    var omron: OmronAdvertisement? {
        OmronAdvertisement.recognise(name: localName, structures: structures.map { ($0.type, $0.data) })
    }
}

struct Pair: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair (bond) with a cuff, answering the confirmation BlueZ asks for.",
        discussion: """
            Without bluetoothd: connects to the ATT channel, raises the link security and answers the kernel's \
            pairing questions (MGMT) for this device only, and keeps the keys in the bond store (--bonds). With \
            bluetoothd running (a desktop, --backend auto): asks bluetoothd to pair (org.bluez.Device1.Pair; it \
            discovers and connects), with a NoInputNoOutput org.bluez.Agent1 registered for this call that answers \
            for this device on this adapter only and rejects and logs anything else; bluetoothd keeps the bond.
            """
    )

    @Argument(help: "Bluetooth address of the cuff (append /random for a random address).")
    var address: String?

    @Option(help: "Omron: pair with a simulated cuff at unix:PATH (`cuff simulate --model NAME --unpaired`; SIGUSR1 is its button).")
    var connect: String?

    @OptionGroup(title: "Omron cuffs") var omron: OmronSyncArguments

    @Option(help: "Bluetooth adapter.")
    var adapter: String = "hci0"

    @Option(help: "medium (default: encrypted, Just Works) or high (authenticated).")
    var security: SecurityLevel?

    @Option(help: Backend.help)
    var backend: Backend = .auto

    @Option(help: BlueZCommands.bondsHelp)
    var bonds: String?

    @Flag(help: "Remove the bond with ADDRESS instead: from the kernel and the bond store (raw path), or from bluetoothd.")
    var forget = false

    func validate() throws {
        guard (security ?? .medium) > .low else { throw ValidationError("--security takes medium or high: pairing is what raises the link above low") }
        guard (address == nil) != (connect == nil) else { throw ValidationError("give ADDRESS or --connect unix:PATH") }
        if let connect {
            guard connect.hasPrefix("unix:") else { throw ValidationError("--connect takes unix:PATH") }
            guard omron.model != nil else { throw ValidationError("--connect pairs an Omron cuff: give --model NAME") }
        }
    }

    /// Omron over a Unix socket: the model's pairing variant (key programmed in pairing mode,
    /// token, or bond) and one start/end exchange, through the same session as a sync.
    func pairOmron(_ connect: String) throws {
        let c = omronConfiguration(connect)!
        let bearer: UnixSeqpacketBearer
        do {
            bearer = try UnixSeqpacketBearer.connect(path: String(connect.dropFirst("unix:".count)))
        } catch {
            Output.log("cuff pair: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        try omronPaired(LiveBluetooth.omronPair(over: bearer, configuration: c) { Output.log("cuff pair: " + $0) })
        let p = OmronCatalog.profile(named: omron.model ?? "")
        do {
            try Output.line(JSON.object([
                ("type", .string("paired")), ("address", .string(connect)), ("protocol", .string("omron")),
                ("model", p.map { .string($0.id) } ?? .null), ("pairing", p.map { .string($0.pairing.rawValue) } ?? .null),
            ]).serialized())
            try Output.flush()
        } catch {
            throw ExitCode(Output.sinkFailed("cuff pair", error))
        }
    }

    /// The Omron pairing session's end: on with `.completed`, else its message and exit status.
    func omronPaired(_ r: (outcome: SessionOutcome, message: String?)) throws {
        guard r.outcome == .completed else {
            Output.log("cuff pair: \(r.message ?? r.outcome.rawValue)")
            throw ExitCode(r.outcome.exitCode)
        }
    }

    /// With --model, what the Omron step needs besides the bearer.
    func omronConfiguration(_ address: String) -> CuffSessionConfiguration? {
        guard omron.model != nil else { return nil }
        var c = CuffSessionConfiguration(address: address)
        c.localUTCOffsetSeconds = WallClock.localUTCOffsetSeconds()
        omron.configure(&c)
        return c
    }

    func run() throws {
        if let connect { return try pairOmron(connect) }
        let level = security ?? .medium
        let adapter = try BlueZCommands.adapter(self.adapter)
        let peer = try BlueZCommands.address(address!)
        let reached: SecurityLevel
        let log: (String) -> Void = { Output.log("cuff pair: " + $0) }
        let backend = backend.resolved(log: log)
        if forget {
            try forget(peer, adapter: adapter, backend: backend, log: log)
            return
        }
        if backend == .bluetoothd {
            reached = try pairThroughBluetoothd(adapter: adapter, peer: peer, level: level)
            // --model: the model's Omron pairing variant after the OS bond, over bluetoothd's GATT link.
            if let c = omronConfiguration(peer.description) {
                do {
                    try omronPaired(LiveBluetooth.omronPairThroughBluetoothd(peer: peer, adapter: adapter, configuration: c, log: log))
                } catch let f as LiveBluetoothFailure { throw ExitCode(f.outcome.exitCode) }
            }
        } else {
            let agent = BlueZCommands.pairingAgent(adapter, peer: peer) { Output.log("cuff pair: " + $0) }
            let store = BlueZCommands.bondStore(bonds, log: log)
            BlueZCommands.loadBonds(store, adapter: adapter, log: log)
            defer {
                BlueZCommands.saveBonds(store, agent: agent, adapter: adapter, log: log)
                agent?.stop()
            }
            let bearer: L2CAPATTBearer
            do {
                bearer = try BlueZCommands.connect(adapter: adapter, to: peer) { Output.log("cuff pair: " + $0) }
            } catch {
                Output.log("cuff pair: \(error.message)")
                throw ExitCode(SessionOutcome.securityRefused.exitCode)
            }
            defer { bearer.close() }
            do {
                try bearer.raiseSecurity(to: level)
                reached = bearer.securityLevel
            } catch {
                Output.log("cuff pair: \(error.message)")
                throw ExitCode(SessionOutcome.securityRefused.exitCode)
            }
            // --model: the model's Omron pairing variant after the OS bond, over the bonded link.
            if let c = omronConfiguration(peer.description) {
                try omronPaired(LiveBluetooth.omronPair(over: bearer, configuration: c, log: log))
            }
        }
        do {
            let p = OmronCatalog.profile(named: omron.model ?? "")
            try Output.line(JSON.object([
                ("type", .string("paired")), ("address", .string(peer.description)),
                ("address_type", .string(peer.type.description)), ("security", .string(reached.description)),
            ] + (p.map { [("protocol", .string("omron")), ("model", .string($0.id)), ("pairing", .string($0.pairing.rawValue))] } ?? [])).serialized())
            try Output.flush()
        } catch {
            throw ExitCode(Output.sinkFailed("cuff pair", error))
        }
    }

    /// `--forget`: the bond goes from the kernel (MGMT Unpair Device) and the store, or from
    /// bluetoothd (Adapter1.RemoveDevice, which unpairs in the kernel and deletes its files).
    func forget(_ peer: BluetoothAddress, adapter: BluetoothAdapter, backend: Backend, log: (String) -> Void) throws {
        var removed = 0
        do {
            if backend == .bluetoothd {
                let bus = try BlueZBus()
                defer { bus.close() }
                do {
                    try bus.call(BlueZPaths.adapter(adapter), "org.bluez.Adapter1", "RemoveDevice", [.objectPath(BlueZPaths.device(peer, on: adapter))])
                } catch where error.dbusError == .doesNotExist || error.dbusError == .unknownObject {
                    log("bluetoothd does not know \(peer)")
                }
            } else {
                try RawBonds.unpair(peer, adapter: adapter)
            }
            if var store = BlueZCommands.bondStore(bonds, log: log) {
                removed = store.remove(peer: peer, adapterAddress: try adapter.info().address)
                if removed > 0 { try store.save() }
            }
        } catch {
            log(error.message)
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        do {
            try Output.line(JSON.object([
                ("type", .string("forgotten")), ("address", .string(peer.description)), ("address_type", .string(peer.type.description)),
                ("stored_keys_removed", .int(Int64(removed))),
            ]).serialized())
            try Output.flush()
        } catch {
            throw ExitCode(Output.sinkFailed("cuff pair", error))
        }
    }

    /// With bluetoothd: `Device1.Pair` (bluetoothd discovers and connects) with an agent that
    /// answers for this device only and is not the default agent; bluetoothd keeps the bond (and
    /// reloads it after a reboot).
    func pairThroughBluetoothd(adapter: BluetoothAdapter, peer: BluetoothAddress, level: SecurityLevel) throws -> SecurityLevel {
        let log: (String) -> Void = { Output.log("cuff pair: " + $0) }
        do {
            let bus = try BlueZBus()
            defer { bus.close() }
            let path = BlueZPaths.device(peer, on: adapter)
            log("pairing through bluetoothd (org.bluez.Device1.Pair on \(path))")
            let already = try BlueZPairing.pair(peer, on: adapter, bus: bus, log: log)
            if already { log("\(peer) is bonded already (bluetoothd: Paired = true)") }
            // bluetoothd keeps the bond and, on its own link, encrypts with it: that is the level.
            return level
        } catch {
            log(error.message)
            throw ExitCode(SessionOutcome.securityRefused.exitCode)
        }
    }
}
