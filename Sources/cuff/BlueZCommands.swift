// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import GATT
import Glibc
import BloodPressure
import BlueZ
import CuffCore
import CuffRuntime
import CuffSession
import Sinks
import Transport

/// Which way `scan`, `pair` and `measure` reach a real cuff.
enum Backend: String, CaseIterable, ExpressibleByArgument {
    /// bluetoothd when it answers on the system bus (a desktop), else raw.
    case auto
    /// Through bluetoothd over D-Bus (org.bluez): it owns the controller, the link and the bonds.
    case bluetoothd
    /// Raw HCI, MGMT and L2CAP sockets: cuff owns the link; needs root.
    case raw

    static let help: ArgumentHelp = """
        auto (default: bluetoothd when it runs, i.e. org.bluez is on the system bus), bluetoothd, or raw \
        (HCI/MGMT/L2CAP sockets, needs root). On the bluetoothd path bluetoothd confirms indications itself \
        before cuff has stored the reading; the raw path confirms only after the sinks took it.
        """

    /// `auto` decided.
    func resolved(log: (String) -> Void) -> Backend {
        guard self == .auto else { return self }
        let b: Backend = BlueZBus.isAvailable() ? .bluetoothd : .raw
        log("backend: \(b.rawValue) (\(b == .bluetoothd ? "bluetoothd answers on the system bus" : "no bluetoothd on the system bus"))")
        return b
    }
}

/// The live Bluetooth paths: BlueZ through libbluetooth (the only part of cuff that links it).
enum BlueZCommands {
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

    /// A running pairing agent: ours on MGMT, or a D-Bus `org.bluez.Agent1` when bluetoothd owns pairing.
    enum Agent {
        case mgmt(PairingAgent)
        case dbus(BlueZAgent)

        func stop() {
            switch self {
            case .mgmt(let a): a.stop()
            case .dbus(let a): a.stop()
            }
        }
    }

    /// Starts our MGMT pairing agent; when bluetoothd owns pairing, registers a NoInputNoOutput
    /// agent with it over D-Bus instead (and says what to do if that fails).
    /// Either agent answers only for `peer` on `adapter` (nil: any device on `adapter`, as for
    /// `cuff watch`, which follows several).
    static func pairingAgent(_ adapter: BluetoothAdapter, peer: BluetoothAddress? = nil, log: @escaping @Sendable (String) -> Void) -> Agent? {
        if let advice = BluetoothDaemon.advice(simulating: false) {
            do {
                return .dbus(try BlueZAgent(scope: AgentScope(adapter: adapter, device: peer), onEvent: { log("pairing agent (D-Bus): " + $0) }))
            } catch {
                log("no D-Bus pairing agent: \(error.message)")
                log(advice)
                return nil
            }
        }
        do {
            return .mgmt(try PairingAgent(adapter: adapter, peer: peer, onEvent: { log("pairing agent: " + $0) }))
        } catch {
            log("no pairing agent: \(error.message) — pairing that needs confirmation may stall")
            return nil
        }
    }

    static let bondsHelp: ArgumentHelp = "Bond store for the raw path (default $XDG_STATE_HOME/cuff/bonds, else ~/.local/state/cuff/bonds; mode 0600). Its keys are loaded into the kernel before connecting, new ones stored after pairing. With bluetoothd, bluetoothd keeps the bonds."

    /// The raw path's bond store; nil (with a warning) when it can't be read.
    static func bondStore(_ path: String?, log: (String) -> Void) -> BondStore? {
        let p = path ?? BondStore.defaultPath()
        do { return try BondStore(path: p) } catch {
            log("bonds: cannot read \(p): \(error.message); going on without stored bonds")
            return nil
        }
    }

    /// Before a raw-path connect without bluetoothd: the stored keys into the kernel.
    static func loadBonds(_ store: BondStore?, adapter: BluetoothAdapter, log: (String) -> Void) {
        guard let store, !BluetoothDaemon.isRunning else { return }
        do {
            if try adapter.makeBondable() { log("bonds: \(adapter) made bondable (MGMT Set Bondable), so pairings leave keys to keep") }
        } catch {
            log("bonds: cannot make \(adapter) bondable: \(error.message)")
        }
        do {
            let address = try adapter.info().address
            let n = try RawBonds.load(store, adapter: adapter, address: address)
            if n > 0 { log("bonds: loaded \(n) key(s) for \(adapter) from \(store.path)") }
        } catch {
            log("bonds: loading the stored keys failed: \(error.message)")
        }
    }

    /// After a raw-path session: the keys the pairing agent saw go to the store.
    static func saveBonds(_ store: BondStore?, agent: Agent?, adapter: BluetoothAdapter, log: (String) -> Void) {
        guard var store, case .mgmt(let a)? = agent else { return }
        // The kernel sends the keys when SMP's key distribution ends, just after encryption.
        let until = ContinuousClock.now + .seconds(2)
        while a.failures == 0, a.keyEvents.isEmpty, a.confirmationsAnswered + a.passkeysAnswered > 0, ContinuousClock.now < until {
            usleep(50_000)
        }
        let events = a.keyEvents
        guard !events.isEmpty, let address = try? adapter.info().address else { return }
        let keys = events.compactMap { BondKey.from(event: $0, adapterAddress: address) }
        store.add(keys)
        do {
            try store.save()
            log("bonds: stored \(keys.count) key(s) in \(store.path)")
        } catch {
            log("bonds: storing the new keys failed: \(error.message) — the bond lasts only until the kernel forgets it (reboot)")
        }
    }

    /// The raw ATT connect, freeing the channel when bluetoothd holds it: on EBUSY with
    /// bluetoothd running, asks it (Device1.Disconnect) to drop its GATT client, then retries.
    static func connect(adapter: BluetoothAdapter, to peer: BluetoothAddress, log: (String) -> Void) throws(TransportError) -> L2CAPATTBearer {
        var freed = false
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try L2CAPATTBearer.connect(adapter: adapter, to: peer)
            } catch where error.errno == EBUSY && BluetoothDaemon.isRunning && attempt <= 10 {
                if !freed {
                    log("bluetoothd holds the ATT channel to \(peer) (its own GATT client, attached after pairing); asking it to disconnect (org.bluez.Device1.Disconnect)")
                    do {
                        try BlueZDevice.disconnect(peer, on: adapter)
                    } catch {
                        log("Device1.Disconnect failed: \(error.message)")
                    }
                    freed = true
                }
                usleep(500_000)
            }
        }
    }

    static func measure(
        address text: String, adapter adapterName: String, backend: Backend = .auto, bonds: String? = nil,
        configuration: (String) -> CuffSessionConfiguration, hooks: SessionHooks, signals: SignalFlags, stopAfter: Duration?,
        store: (any MeasurementStore)?
    ) throws -> (SessionOutcome, Int32, Bool) {
        let adapter = try adapter(adapterName)
        let peer = try address(text)
        let backend = backend.resolved { hooks.log($0) }
        // On the bluetoothd path pairing goes through Device1.Pair with a per-call agent (the
        // bearer's raiseSecurity); the raw path needs the kernel's questions answered meanwhile.
        let agent = backend == .raw ? pairingAgent(adapter, peer: peer) { Output.log("cuff measure: " + $0) } : nil
        let bondStore = backend == .raw ? bondStore(bonds) { hooks.log($0) } : nil
        loadBonds(bondStore, adapter: adapter) { hooks.log($0) }
        defer {
            saveBonds(bondStore, agent: agent, adapter: adapter) { hooks.log($0) }
            agent?.stop()
        }
        var config = configuration(peer.description)
        if let store {
            config.knownRecordKeys = (try? store.knownKeys()) ?? []
            config.lastSequenceNumber = try? store.lastSequenceNumber(address: config.address)
        }
        hooks.log("connecting to \(peer) (\(peer.type)) through \(adapter)")
        let bearer: any PollableBearer
        do {
            if backend == .bluetoothd {
                let b = try BlueZGATTBearer.connect(adapter: adapter, to: peer, bus: BlueZBus()) { hooks.log($0) }
                for note in b.notes { hooks.log(note) }
                bearer = b
            } else {
                bearer = try connect(adapter: adapter, to: peer) { hooks.log($0) }
            }
        } catch {
            Output.log("cuff measure: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        let driver = CentralDriver(configuration: config, hooks: hooks, signals: signals, stopAfter: stopAfter)
        let outcome = driver.run(bearer)
        return (outcome, driver.central.exitCode, driver.sinkFailure != nil)
    }

    /// `cuff watch --adapter`: follows each device; the kernel connects when it advertises.
    /// Without `devices`: every cuff bonded on the adapter. On the raw path that is cuff's bond
    /// store (`cuff pair`), whose keys are loaded into the kernel first, as for `cuff measure`; on
    /// the bluetoothd path, every device bluetoothd keeps paired there that has a Blood Pressure
    /// Service, also ones paired while watch runs (looked at every 5 s).
    static func watch(adapter adapterName: String, backend: Backend, devices: [String], bonds: String?, watcher: Watcher) throws -> Agent? {
        let adapter = try adapter(adapterName)
        let log: (String) -> Void = { Output.log("cuff watch: " + $0) }
        let local: BluetoothAddress
        do {
            local = try adapter.addressIfUp()
        } catch {
            log(error.message)
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        let peers = try devices.map(address)
        if backend.resolved(log: log) == .bluetoothd {
            try watchThroughBluetoothd(adapter: adapter, peers: peers, watcher: watcher, log: log)
            return nil
        }
        if BluetoothDaemon.isRunning {
            log("bluetoothd is running but --backend raw was asked for: bonded cuffs may be taken by bluetoothd's own GATT client (stop bluetoothd, or keep it off \(adapter))")
        }
        let store = bondStore(bonds, log: log)
        loadBonds(store, adapter: adapter, log: log)
        var followed = peers
        if followed.isEmpty {
            var seen = Set<BluetoothAddress>()
            for k in store?.keys(adapterAddress: local, kind: .ltk) ?? [] where seen.insert(k.peer.address).inserted { followed.append(k.peer.address) }
            guard !followed.isEmpty else {
                log("no cuff is bonded on \(adapter) in \(store?.path ?? BondStore.defaultPath()): pair one (cuff pair ADDRESS --adapter \(adapter.name)) or name it with --device ADDRESS")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
            }
            log("following the \(followed.count) cuff(s) bonded on \(adapter)")
        }
        let agent = pairingAgent(adapter) { Output.log("cuff watch: " + $0) }
        for peer in followed {
            watcher.follow(address: peer.description) { () throws(TransportError) -> any PendingConnection in
                try PendingATTConnection.start(adapter: adapter, to: peer)
            }
        }
        return agent
    }

    /// The bluetoothd path of `cuff watch --adapter`: each cuff through `Device1.Connect` (the
    /// kernel connects when it advertises) and bluetoothd's GATT objects.
    static func watchThroughBluetoothd(adapter: BluetoothAdapter, peers: [BluetoothAddress], watcher: Watcher, log: @escaping (String) -> Void) throws {
        guard BlueZBus.isAvailable() else {
            log("bluetoothd does not answer on the system bus (\(DBusConnection.systemBusPath())): start it, or use --backend raw")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        func follow(_ peer: BluetoothAddress) {
            watcher.follow(address: peer.description) { () throws(TransportError) -> any PendingConnection in
                try BlueZPendingConnection.start(adapter: adapter, to: peer, log: log)
            }
        }
        guard peers.isEmpty else { return peers.forEach(follow) }
        let bonded: () throws(TransportError) -> [BluetoothAddress] = {
            let bus = try BlueZBus()
            defer { bus.close() }
            return BlueZDiscovery.bondedCuffs(in: try bus.managedObjects(), adapter: adapter)
        }
        let found: [BluetoothAddress]
        do { found = try bonded() } catch {
            log("bluetoothd: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        if found.isEmpty {
            log("bluetoothd keeps no paired cuff (a device with a Blood Pressure Service) on \(adapter) yet; pair one (cuff pair ADDRESS --adapter \(adapter.name)) and it is followed, or name it with --device ADDRESS")
        } else {
            log("following the \(found.count) cuff(s) bluetoothd keeps paired on \(adapter)")
        }
        found.forEach(follow)
        // Cuffs paired later are followed too.
        watcher.repeatEvery(.seconds(5)) {
            guard let now = try? bonded() else { return }
            now.forEach(follow)  // follow() ignores what it follows already
        }
    }

    static func simulate<P: GATTPeripheral>(
        adapter adapterName: String, driver: PeripheralDriver<P>, options: SimulatorOptions, name advertisedName: String? = nil, label: String? = nil
    ) throws {
        let adapter = try adapter(adapterName)
        let signals = SignalFlags.shared
        // With bluetoothd running, the newest ATT listener gets each incoming link: ours, as we
        // start after bluetoothd. If bluetoothd (re)starts after us, it takes them and serves its
        // own database; the watcher sees the central connect without our accept and we stop.
        let watcher: LinkWatcher?
        if BluetoothDaemon.isRunning {
            Output.log("cuff simulate: bluetoothd is running; cuff's ATT listener is the newer one and gets incoming links. If bluetoothd restarts, it takes them: cuff simulate then stops with an error")
            watcher = try? LinkWatcher(adapter: adapter)
        } else {
            watcher = nil
        }
        // The simulator takes any central on its adapter. With bluetoothd, which answers the
        // kernel's pairing questions itself, that is a D-Bus agent for this adapter only.
        let agent: Agent?
        do {
            if BluetoothDaemon.isRunning {
                agent = .dbus(try BlueZAgent(scope: AgentScope(adapter: adapter, device: nil), path: "/cuff/simulator_agent",
                                             onEvent: { Output.log("cuff simulate: pairing agent (D-Bus): " + $0) }))
            } else {
                agent = .mgmt(try PairingAgent(adapter: adapter, onEvent: { Output.log("cuff simulate: pairing agent: " + $0) }))
                // A cuff bonds with whoever pairs with it (so a bonded central can come back).
                if (try? adapter.makeBondable()) == true { Output.log("cuff simulate: \(adapter) made bondable (MGMT Set Bondable)") }
            }
        } catch {
            Output.log("cuff simulate: no pairing agent: \(error.message)")
            agent = nil
        }
        defer { agent?.stop() }
        let listener: L2CAPATTListener
        let advertiser: LEAdvertiser
        let name = advertisedName ?? options.configuration.name
        do {
            listener = try L2CAPATTListener(adapter: adapter)
            advertiser = try LEAdvertiser(adapter: adapter, name: name)
            try advertiser.start()
        } catch {
            Output.log("cuff simulate: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        defer {
            advertiser.stop()
            listener.close()
        }
        Output.log("cuff simulate: \(label ?? options.scenario.rawValue + " cuff") \"\(name)\" advertising 0x1810 on \(adapter) (\(listener.address)); waiting for a central")
        var session = 0
        var unserved: [UInt16: (LinkWatcher.IncomingLink, ContinuousClock.Instant)] = [:]
        while !signals.isRaised(.int) && !signals.isRaised(.term) {
            let bearer: L2CAPATTBearer?
            do {
                bearer = try listener.accept(timeout: .milliseconds(200))
            } catch {
                Output.log("cuff simulate: accept failed: \(error.message)")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
            }
            if case .dbus(let a)? = agent, a.wasReleased {
                Output.log("cuff simulate: bluetoothd stopped or restarted (it released cuff's agent). A restarted bluetoothd's ATT listener is newer than cuff's and takes incoming links, and it resets advertising: stopping. Start cuff simulate again once bluetoothd runs (or stop bluetoothd)")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
            }
            if let watcher {
                for notice in (try? watcher.drain()) ?? [] {
                    switch notice {
                    case .connected(let link): unserved[link.handle] = (link, .now)
                    case .disconnected(let handle): unserved[handle] = nil
                    }
                }
                if bearer != nil {
                    unserved = [:]
                } else if let (link, _) = unserved.values.first(where: { ContinuousClock.now - $0.1 > .seconds(3) }) {
                    Output.log("cuff simulate: \(link.peer) connected to \(adapter) but its ATT channel went to bluetoothd, not to cuff (bluetoothd's listener is newer than ours: was it restarted?). Restart cuff simulate after bluetoothd, or stop bluetoothd (`sudo systemctl stop bluetooth`)")
                    throw ExitCode(SessionOutcome.connectionFailed.exitCode)
                }
            }
            guard let bearer else { continue }
            session += 1
            Output.log("cuff simulate: session \(session): \(bearer.peerDescription) connected")
            let end = driver.serve(bearer, client: bearer.peerDescription)
            Output.log("cuff simulate: session \(session) ended: \(end)")
            if end == .interrupted { break }
            do { try advertiser.restart() } catch { Output.log("cuff simulate: re-advertising failed: \(error.message)") }
        }
        Output.log("cuff simulate: stopped")
    }
}

struct Scan: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for Bluetooth LE blood-pressure cuffs (devices advertising service 0x1810).",
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
                                        uuids: all ? [] : ["00001810-0000-1000-8000-00805f9b34fb"], stop: stopped) { r in
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
        // What cuff would use for it: a device family's profile, a vendor protocol, or none.
        let recognised = r.recognition
        pairs.append(("profile", JSON.from(recognised.profileName, JSON.string)))
        pairs.append(("protocol", JSON.from(recognised.protocolName, JSON.string)))
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
        if let m = seen[key], !printed.contains(key), m.localName != nil, all || m.isBloodPressureCuff || m.recognition.isCuff {
            printed.insert(key)
            try emit(m)
        }
    }

    func finish() throws {
        for key in order where !printed.contains(key) {
            if let m = seen[key], all || m.isBloodPressureCuff || m.recognition.isCuff { try emit(m) }
        }
        Output.log("cuff scan: \(seen.count) device(s) seen, \(seen.values.filter(\.isBloodPressureCuff).count) advertising the Blood Pressure service")
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
    var address: String

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
    }

    func run() throws {
        let level = security ?? .medium
        let adapter = try BlueZCommands.adapter(self.adapter)
        let peer = try BlueZCommands.address(address)
        let reached: SecurityLevel
        let log: (String) -> Void = { Output.log("cuff pair: " + $0) }
        let backend = backend.resolved(log: log)
        if forget {
            try forget(peer, adapter: adapter, backend: backend, log: log)
            return
        }
        if backend == .bluetoothd {
            reached = try pairThroughBluetoothd(adapter: adapter, peer: peer, level: level)
        } else {
            let agent = BlueZCommands.pairingAgent(adapter, peer: peer) { Output.log("cuff pair: " + $0) }
            let store = BlueZCommands.bondStore(bonds, log: log)
            BlueZCommands.loadBonds(store, adapter: adapter, log: log)
            defer {
                BlueZCommands.saveBonds(store, agent: agent, adapter: adapter, log: log)
                agent?.stop()
            }
            do {
                let bearer = try BlueZCommands.connect(adapter: adapter, to: peer) { Output.log("cuff pair: " + $0) }
                defer { bearer.close() }
                try bearer.raiseSecurity(to: level)
                reached = bearer.securityLevel
            } catch {
                Output.log("cuff pair: \(error.message)")
                throw ExitCode(SessionOutcome.securityRefused.exitCode)
            }
        }
        do {
            try Output.line(JSON.object([
                ("type", .string("paired")), ("address", .string(peer.description)),
                ("address_type", .string(peer.type.description)), ("security", .string(reached.description)),
            ]).serialized())
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
                } catch where error.message.contains("DoesNotExist") || error.message.contains("UnknownObject") {
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
