// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import GATT
import Glibc
import BlueZ
import CuffCore
import CuffRuntime
import CuffSession
import Sinks
import Transport

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
    /// Either agent answers only for `peer` on `adapter`.
    static func pairingAgent(_ adapter: BluetoothAdapter, peer: BluetoothAddress, log: @escaping @Sendable (String) -> Void) -> Agent? {
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
        address text: String, adapter adapterName: String, configuration: (String) -> CuffSessionConfiguration, hooks: SessionHooks,
        signals: SignalFlags, stopAfter: Duration?, store: SQLiteStore?
    ) throws -> (SessionOutcome, Int32, Bool) {
        let adapter = try adapter(adapterName)
        let peer = try address(text)
        let agent = pairingAgent(adapter, peer: peer) { Output.log("cuff measure: " + $0) }
        defer { agent?.stop() }
        var config = configuration(peer.description)
        if let store {
            config.knownRecordKeys = (try? store.knownKeys()) ?? []
            config.lastSequenceNumber = try? store.lastSequenceNumber(address: config.address)
        }
        hooks.log("connecting to \(peer) (\(peer.type)) through \(adapter)")
        let bearer: L2CAPATTBearer
        do {
            bearer = try connect(adapter: adapter, to: peer) { hooks.log($0) }
        } catch {
            Output.log("cuff measure: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        let driver = CentralDriver(configuration: config, hooks: hooks, signals: signals, stopAfter: stopAfter)
        let outcome = driver.run(bearer)
        return (outcome, driver.central.session.exitCode, driver.sinkFailure != nil)
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
        abstract: "Scan for Bluetooth LE blood-pressure cuffs (devices advertising service 0x1810).",
        discussion: "Prints one JSON object per device seen, merged from its advertisements and scan responses. Needs root (CAP_NET_RAW/CAP_NET_ADMIN)."
    )

    @Option(help: "Bluetooth adapter.")
    var adapter: String = "hci0"

    @Option(help: "Seconds to scan.")
    var timeout: Double = 5

    @Flag(help: "Include devices that are not blood-pressure cuffs.")
    var all = false

    func run() throws {
        let adapter = try BlueZCommands.adapter(self.adapter)
        let signals = SignalFlags.shared
        try signals.install()
        try signals.unblockOnCurrentThread()
        let scanner: LEScanner
        do {
            scanner = try LEScanner(adapter: adapter)
        } catch {
            Output.log("cuff scan: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        defer { scanner.stop() }
        for note in scanner.notes { Output.log("cuff scan: " + note) }
        var seen: [String: AdvertisingReport] = [:]
        var order: [String] = []
        var printed: Set<String> = []
        let end = MonotonicClock.now() + .nanoseconds(Int64(timeout * 1e9))
        // Print each device once it has a name (or at the end), merged with its scan response.
        while MonotonicClock.now() < end, !signals.isRaised(.int), !signals.isRaised(.term) {
            let reports: [AdvertisingReport]
            do { reports = try scanner.next(timeout: .milliseconds(100)) } catch {
                Output.log("cuff scan: \(error.message)")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
            }
            for r in reports {
                let key = r.address.description
                if let old = seen[key] { seen[key] = old.merged(with: r) } else { seen[key] = r; order.append(key) }
                if let m = seen[key], !printed.contains(key), m.localName != nil, all || m.isBloodPressureCuff {
                    printed.insert(key)
                    try emit(m)
                }
            }
        }
        for key in order where !printed.contains(key) {
            if let m = seen[key], all || m.isBloodPressureCuff { try emit(m) }
        }
        Output.log("cuff scan: \(seen.count) device(s) seen, \(seen.values.filter(\.isBloodPressureCuff).count) advertising the Blood Pressure service")
    }

    func emit(_ r: AdvertisingReport) throws {
        guard case var .object(pairs) = r.json else { return }
        pairs.insert(("type", .string("device")), at: 0)
        pairs.append(("blood_pressure", .bool(r.isBloodPressureCuff)))
        do {
            try Output.line(JSON.object(pairs).serialized())
            try Output.flush()
        } catch {
            throw ExitCode(Output.sinkFailed("cuff scan", error))
        }
    }
}

struct Pair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pair (bond) with a cuff, answering the confirmation BlueZ asks for.",
        discussion: """
            Without bluetoothd: connects to the ATT channel, raises the link security and answers the kernel's \
            pairing questions (MGMT) for this device only. With bluetoothd running (a desktop): connects, then asks \
            bluetoothd to pair (org.bluez.Device1.Pair) with a NoInputNoOutput org.bluez.Agent1 that answers for \
            this device on this adapter only, and rejects and logs anything else; bluetoothd keeps the bond.
            """
    )

    @Argument(help: "Bluetooth address of the cuff (append /random for a random address).")
    var address: String

    @Option(help: "Bluetooth adapter.")
    var adapter: String = "hci0"

    @Option(help: "medium (default: encrypted, Just Works) or high (authenticated).")
    var security: SecurityLevel?

    func validate() throws {
        guard (security ?? .medium) > .low else { throw ValidationError("--security takes medium or high: pairing is what raises the link above low") }
    }

    func run() throws {
        let level = security ?? .medium
        let adapter = try BlueZCommands.adapter(self.adapter)
        let peer = try BlueZCommands.address(address)
        let reached: SecurityLevel
        if BluetoothDaemon.isRunning {
            reached = try pairThroughBluetoothd(adapter: adapter, peer: peer, level: level)
        } else {
            let agent = BlueZCommands.pairingAgent(adapter, peer: peer) { Output.log("cuff pair: " + $0) }
            defer { agent?.stop() }
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

    /// With bluetoothd: connect (so bluetoothd knows the device and the link is up), then
    /// `Device1.Pair` with an agent that answers for this device only and is not the default
    /// agent, so bluetoothd keeps the bond (and reloads it after a reboot).
    func pairThroughBluetoothd(adapter: BluetoothAdapter, peer: BluetoothAddress, level: SecurityLevel) throws -> SecurityLevel {
        let log: (String) -> Void = { Output.log("cuff pair: " + $0) }
        do {
            let bus = try BlueZBus()
            defer { bus.close() }
            let bearer = try BlueZCommands.connect(adapter: adapter, to: peer, log: log)
            defer { bearer.close() }
            let path = BlueZPaths.device(peer, on: adapter)
            // bluetoothd makes the Device1 object when the kernel reports the connection.
            _ = try bus.wait(for: path, "org.bluez.Device1", "Connected", timeout: .seconds(5)) { $0?.boolValue == true }
            log("pairing through bluetoothd (org.bluez.Device1.Pair on \(path))")
            let already = try BlueZPairing.pair(peer, on: adapter, bus: bus, log: log)
            if already { log("\(peer) is bonded already (bluetoothd: Paired = true)") }
            try bearer.raiseSecurity(to: level)
            return bearer.securityLevel
        } catch {
            log(error.message)
            throw ExitCode(SessionOutcome.securityRefused.exitCode)
        }
    }
}
