// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import GATT
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
    static func pairingAgent(_ adapter: BluetoothAdapter, log: @escaping @Sendable (String) -> Void) -> Agent? {
        if let advice = BluetoothDaemon.advice(simulating: false) {
            do {
                return .dbus(try BlueZAgent(onEvent: { log("pairing agent (D-Bus): " + $0) }))
            } catch {
                log("no D-Bus pairing agent: \(error.message)")
                log(advice)
                return nil
            }
        }
        do {
            return .mgmt(try PairingAgent(adapter: adapter, onEvent: { log("pairing agent: " + $0) }))
        } catch {
            log("no pairing agent: \(error.message) — pairing that needs confirmation may stall")
            return nil
        }
    }

    static func measure(
        address text: String, adapter adapterName: String, configuration: (String) -> CuffSessionConfiguration, hooks: SessionHooks,
        signals: SignalFlags, stopAfter: Duration?, store: (any MeasurementStore)?
    ) throws -> (SessionOutcome, Int32, Bool) {
        let adapter = try adapter(adapterName)
        let peer = try address(text)
        let agent = pairingAgent(adapter) { Output.log("cuff measure: " + $0) }
        defer { agent?.stop() }
        var config = configuration(peer.description)
        if let store {
            config.knownRecordKeys = (try? store.knownKeys()) ?? []
            config.lastSequenceNumber = try? store.lastSequenceNumber(address: config.address)
        }
        hooks.log("connecting to \(peer) (\(peer.type)) through \(adapter)")
        let bearer: L2CAPATTBearer
        do {
            bearer = try L2CAPATTBearer.connect(adapter: adapter, to: peer)
        } catch {
            Output.log("cuff measure: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        let driver = CentralDriver(configuration: config, hooks: hooks, signals: signals, stopAfter: stopAfter)
        let outcome = driver.run(bearer)
        return (outcome, driver.central.session.exitCode, driver.sinkFailure != nil)
    }

    /// `cuff watch --adapter`: follows each device; the kernel connects when it advertises.
    static func watch(adapter adapterName: String, devices: [String], watcher: Watcher) throws -> Agent? {
        let adapter = try adapter(adapterName)
        do {
            _ = try adapter.addressIfUp()
        } catch {
            Output.log("cuff watch: \(error.message)")
            throw ExitCode(SessionOutcome.connectionFailed.exitCode)
        }
        let agent = pairingAgent(adapter) { Output.log("cuff watch: " + $0) }
        for d in devices {
            let peer = try address(d)
            watcher.follow(address: peer.description) { () throws(TransportError) -> any PendingConnection in
                try PendingATTConnection.start(adapter: adapter, to: peer)
            }
        }
        return agent
    }

    static func simulate<P: GATTPeripheral>(
        adapter adapterName: String, driver: PeripheralDriver<P>, options: SimulatorOptions, name advertisedName: String? = nil, label: String? = nil
    ) throws {
        let adapter = try adapter(adapterName)
        let signals = SignalFlags.shared
        if let advice = BluetoothDaemon.advice(simulating: true) { Output.log("cuff simulate: " + advice) }
        let agent: PairingAgent?
        do {
            agent = try PairingAgent(adapter: adapter, onEvent: { Output.log("cuff simulate: pairing agent: " + $0) })
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
        while !signals.isRaised(.int) && !signals.isRaised(.term) {
            let bearer: L2CAPATTBearer?
            do {
                bearer = try listener.accept(timeout: .milliseconds(200))
            } catch {
                Output.log("cuff simulate: accept failed: \(error.message)")
                throw ExitCode(SessionOutcome.connectionFailed.exitCode)
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
        discussion: "Connects to the ATT channel, raises the link security and answers the kernel's pairing requests (MGMT) itself when bluetoothd is not running; when it runs, registers a NoInputNoOutput org.bluez.Agent1 with it over D-Bus that accepts."
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
        let agent = BlueZCommands.pairingAgent(adapter) { Output.log("cuff pair: " + $0) }
        defer { agent?.stop() }
        let reached: SecurityLevel
        do {
            let bearer = try L2CAPATTBearer.connect(adapter: adapter, to: peer)
            defer { bearer.close() }
            try bearer.raiseSecurity(to: level)
            reached = bearer.securityLevel
        } catch {
            Output.log("cuff pair: \(error.message)")
            throw ExitCode(SessionOutcome.securityRefused.exitCode)
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
}
