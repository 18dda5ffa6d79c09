// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
    import Glibc
#endif
import BlueZ
import CuffCore
import CuffLogging
import CuffRuntime
import CuffSession
import GATT
import Logging
import Sinks
import Transport

/// Which way `scan`, `pair` and `measure` reach a real cuff.
public enum Backend: String, CaseIterable, Sendable {
    /// bluetoothd when it answers on the system bus (a desktop), else raw.
    case auto
    /// Through bluetoothd over D-Bus (org.bluez): it owns the controller, the link and the bonds.
    case bluetoothd
    /// Raw HCI, MGMT and L2CAP sockets: cuff owns the link; needs root.
    case raw

    /// `auto` decided.
    public func resolved(log: Logger) -> Backend {
        guard self == .auto else { return self }
        let b: Backend = BlueZBus.isAvailable() ? .bluetoothd : .raw
        log.info(
            "backend: \(b.rawValue) (\(b == .bluetoothd ? "bluetoothd answers on the system bus" : "no bluetoothd on the system bus"))"
        )
        return b
    }
}

/// A live Bluetooth path could not go on; what it logged says why. The command exits with the
/// outcome's status.
public struct LiveBluetoothFailure: ExitStatusError, Sendable {
    public var outcome: SessionOutcome
    public init(_ outcome: SessionOutcome) { self.outcome = outcome }
    public var exitStatus: ExitStatus { outcome.exitStatus }
}

/// The live Bluetooth paths of `measure`, `watch`, `pair` and `simulate`: pairing agents, the raw
/// path's bonds, the ATT connect that frees a channel bluetoothd holds, the simulator's accept
/// loop. Library code, so the CLI only wires (each takes a `log` for its lines).
public enum LiveBluetooth {
    /// A running pairing agent: ours on MGMT, or a D-Bus `org.bluez.Agent1` when bluetoothd owns
    /// pairing. Either answers on the event loop it was given, while that loop runs.
    public enum Agent {
        case mgmt(PairingAgent)
        case dbus(BlueZAgent)

        /// The loop it answers on.
        public var loop: EventLoop {
            switch self {
            case .mgmt(let a): a.loop
            case .dbus(let a): a.loop
            }
        }

        public func stop() {
            switch self {
            case .mgmt(let a): a.stop()
            case .dbus(let a): a.stop()
            }
        }
    }

    /// Starts our MGMT pairing agent; when bluetoothd owns pairing, registers a NoInputNoOutput
    /// agent with it over D-Bus instead (and says what to do if that fails).
    /// Either agent answers only for `peer` on `adapter` (nil: any device on `adapter`, as for
    /// `cuff watch`, which follows several), on `loop` while it runs.
    public static func pairingAgent(
        _ adapter: BluetoothAdapter, peer: BluetoothAddress? = nil, loop: EventLoop, log: Logger
    ) -> Agent? {
        if let advice = BluetoothDaemon.advice(simulating: false) {
            do {
                return .dbus(
                    try BlueZAgent(
                        scope: AgentScope(adapter: adapter, device: peer), loop: loop,
                        logger: log.scoped("pairing agent (D-Bus)")))
            } catch {
                log.info("no D-Bus pairing agent: \(error.message)")
                log.info("\(advice)")
                return nil
            }
        }
        do {
            return .mgmt(
                try PairingAgent(adapter: adapter, peer: peer, loop: loop, logger: log.scoped("pairing agent")))
        } catch {
            log.info("no pairing agent: \(error.message) — pairing that needs confirmation may stall")
            return nil
        }
    }

    /// The raw path's bond store; nil (with a warning) when it can't be read.
    public static func bondStore(_ path: String?, log: Logger) -> BondStore? {
        let p = path ?? BondStore.defaultPath()
        do { return try BondStore(path: p) } catch {
            log.info("bonds: cannot read \(p): \(error.message); going on without stored bonds")
            return nil
        }
    }

    /// Before a raw-path connect without bluetoothd: the stored keys into the kernel.
    public static func loadBonds(_ store: BondStore?, adapter: BluetoothAdapter, log: Logger) {
        guard let store, !BluetoothDaemon.isRunning else { return }
        do {
            if try adapter.makeBondable() {
                log.info("bonds: \(adapter) made bondable (MGMT Set Bondable), so pairings leave keys to keep")
            }
        } catch {
            log.info("bonds: cannot make \(adapter) bondable: \(error.message)")
        }
        do {
            let address = try adapter.info().address
            let n = try RawBonds.load(store, adapter: adapter, address: address)
            if n > 0 { log.info("bonds: loaded \(n) key(s) for \(adapter) from \(store.path)") }
        } catch {
            log.info("bonds: loading the stored keys failed: \(error.message)")
        }
    }

    /// After a raw-path session: the keys the pairing agent saw go to the store.
    public static func saveBonds(_ store: BondStore?, agent: Agent?, adapter: BluetoothAdapter, log: Logger) {
        guard var store, case .mgmt(let a)? = agent else { return }
        // The kernel sends the keys when SMP's key distribution ends, just after encryption: the
        // agent's loop runs until they came (at most 2 s).
        let until = ContinuousClock.now + .seconds(2)
        while a.failures == 0, a.keyEvents.isEmpty, a.confirmationsAnswered + a.passkeysAnswered > 0,
            ContinuousClock.now < until
        {
            do { try a.loop.runOnce(timeout: until - .now) } catch { break }
        }
        let events = a.keyEvents
        guard !events.isEmpty, let address = try? adapter.info().address else { return }
        let keys = events.compactMap { BondKey.from(event: $0, adapterAddress: address) }
        store.add(keys)
        do {
            try store.save()
            log.info("bonds: stored \(keys.count) key(s) in \(store.path)")
        } catch {
            log.info(
                "bonds: storing the new keys failed: \(error.message) — the bond lasts only until the kernel forgets it (reboot)"
            )
        }
    }

    /// The raw ATT connect, freeing the channel when bluetoothd holds it: on EBUSY with
    /// bluetoothd running, asks it (Device1.Disconnect) to drop its GATT client, then retries.
    public static func connect(adapter: BluetoothAdapter, to peer: BluetoothAddress, log: Logger) throws(TransportError)
        -> L2CAPATTBearer
    {
        var freed = false
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try L2CAPATTBearer.connect(adapter: adapter, to: peer)
            } catch  where error.systemErrno == .resourceBusy && BluetoothDaemon.isRunning && attempt <= 10 {
                if !freed {
                    log.info(
                        "bluetoothd holds the ATT channel to \(peer) (its own GATT client, attached after pairing); asking it to disconnect (org.bluez.Device1.Disconnect)"
                    )
                    do {
                        try BlueZDevice.disconnect(peer, on: adapter)
                    } catch {
                        log.info("Device1.Disconnect failed: \(error.message)")
                    }
                    freed = true
                }
                Sys.sleep(.milliseconds(500))
            }
        }
    }

    /// `cuff measure ADDRESS`: one session with a real cuff; returns its outcome, exit status and
    /// whether a sink failed. `log` takes the lines that are not the session's own. On the raw
    /// path, what the session learns about the cuff is kept in `gattCache` and used next time.
    public static func measure(
        peer: BluetoothAddress, adapter: BluetoothAdapter, backend: Backend = .auto, bonds: String? = nil,
        configuration: (String) -> CuffSessionConfiguration, hooks: SessionHooks, signals: SignalFlags,
        stopAfter: Duration?,
        store: (any MeasurementStore)?, gattCache: GATTCacheStore? = nil, log: Logger
    ) throws(LiveBluetoothFailure) -> (SessionOutcome, Int32, Bool) {
        let backend = backend.resolved(log: hooks.logger)
        // The session's loop; the raw path's pairing agent answers there.
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            log.info("cannot start the event loop: \(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        // On the bluetoothd path pairing goes through Device1.Pair with a per-call agent (the
        // bearer's raiseSecurity); the raw path needs the kernel's questions answered meanwhile.
        let agent = backend == .raw ? pairingAgent(adapter, peer: peer, loop: loop, log: log) : nil
        let bondStore = backend == .raw ? bondStore(bonds, log: hooks.logger) : nil
        loadBonds(bondStore, adapter: adapter, log: hooks.logger)
        defer {
            saveBonds(bondStore, agent: agent, adapter: adapter, log: hooks.logger)
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
                let b = try BlueZGATTBearer.connect(
                    adapter: adapter, to: peer, bus: BlueZBus(), timeout: config.timeout, log: hooks.logger)
                for note in b.notes { hooks.log(note) }
                bearer = b
            } else {
                bearer = try connect(adapter: adapter, to: peer, log: hooks.logger)
            }
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        // What the raw path learns is kept (`gattCache`); through bluetoothd, bluetoothd keeps its own.
        let driver = CentralDriver(
            configuration: config, hooks: hooks, signals: signals, stopAfter: stopAfter,
            gattCache: backend == .raw ? gattCache : nil)
        let outcome = driver.run(bearer, on: loop)
        return (outcome, driver.central.exitCode, driver.sinkFailure != nil)
    }

    /// `cuff watch --adapter`: follows each device; the kernel connects when it advertises.
    /// Without `devices`: every cuff bonded on the adapter. On the raw path that is cuff's bond
    /// store (`cuff pair`), whose keys are loaded into the kernel first, as for `cuff measure`; on
    /// the bluetoothd path, every device bluetoothd keeps paired there that has a Blood Pressure
    /// Service, also ones paired while watch runs (looked at every 5 s).
    public static func watch(
        adapter: BluetoothAdapter, backend: Backend, devices: [String], address: (String) throws -> BluetoothAddress,
        bonds: String?,
        watcher: Watcher, log: Logger
    ) throws -> Agent? {
        let local: BluetoothAddress
        do {
            local = try adapter.addressIfUp()
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        let peers = try devices.map(address)
        if backend.resolved(log: log) == .bluetoothd {
            try watchThroughBluetoothd(adapter: adapter, peers: peers, watcher: watcher, log: log)
            return nil
        }
        if BluetoothDaemon.isRunning {
            log.info(
                "bluetoothd is running but --backend raw was asked for: bonded cuffs may be taken by bluetoothd's own GATT client (stop bluetoothd, or keep it off \(adapter))"
            )
        }
        let store = bondStore(bonds, log: log)
        loadBonds(store, adapter: adapter, log: log)
        var followed = peers
        if followed.isEmpty {
            var seen = Set<BluetoothAddress>()
            for k in store?.keys(adapterAddress: local, kind: .ltk) ?? [] where seen.insert(k.peer.address).inserted {
                followed.append(k.peer.address)
            }
            guard !followed.isEmpty else {
                log.info(
                    "no cuff is bonded on \(adapter) in \(store?.path ?? BondStore.defaultPath()): pair one (cuff pair ADDRESS --adapter \(adapter.name)) or name it with --device ADDRESS"
                )
                throw LiveBluetoothFailure(.connectionFailed)
            }
            log.info("following the \(followed.count) cuff(s) bonded on \(adapter)")
        }
        let agent = pairingAgent(adapter, loop: watcher.loop, log: log)
        for peer in followed {
            watcher.follow(address: peer.description, cachesGATT: true) {
                () throws(TransportError) -> any PendingConnection in
                try PendingATTConnection.start(adapter: adapter, to: peer)
            }
        }
        return agent
    }

    /// The bluetoothd path of `cuff watch --adapter`: each cuff through `Device1.Connect` (the
    /// kernel connects when it advertises) and bluetoothd's GATT objects.
    public static func watchThroughBluetoothd(
        adapter: BluetoothAdapter, peers: [BluetoothAddress], watcher: Watcher, log: Logger
    ) throws {
        guard BlueZBus.isAvailable() else {
            log.info(
                "bluetoothd does not answer on the system bus (\(DBusConnection.systemBusPath())): start it, or use --backend raw"
            )
            throw LiveBluetoothFailure(.connectionFailed)
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
            log.info("bluetoothd: \(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        if found.isEmpty {
            log.info(
                "bluetoothd keeps no paired cuff (a device with a Blood Pressure Service) on \(adapter) yet; pair one (cuff pair ADDRESS --adapter \(adapter.name)) and it is followed, or name it with --device ADDRESS"
            )
        } else {
            log.info("following the \(found.count) cuff(s) bluetoothd keeps paired on \(adapter)")
        }
        found.forEach(follow)
        // Cuffs paired later are followed too.
        watcher.repeatEvery(.seconds(5)) {
            guard let now = try? bonded() else { return }
            now.forEach(follow)  // follow() ignores what it follows already
        }
    }

    /// `cuff simulate --adapter`: advertises `name` and serves each central that connects with
    /// `driver`, one after another, until SIGINT/SIGTERM. `label` names the cuff in the log.
    /// `backend` (unresolved): through bluetoothd (``simulateThroughBluetoothd(adapter:driver:name:label:log:)``)
    /// or on raw sockets.
    public static func simulate<P: GATTPeripheral>(
        adapter: BluetoothAdapter, backend: Backend, driver: PeripheralDriver<P>, name: String, label: String,
        log: Logger
    ) throws(LiveBluetoothFailure) {
        if backend.resolved(log: log) == .bluetoothd {
            return try simulateThroughBluetoothd(adapter: adapter, driver: driver, name: name, label: label, log: log)
        }
        let signals = SignalFlags.shared
        // With bluetoothd running, the newest ATT listener gets each incoming link: ours, as we
        // start after bluetoothd. If bluetoothd (re)starts after us, it takes them and serves its
        // own database; the watcher sees the central connect without our accept and we stop.
        let watcher: LinkWatcher?
        if BluetoothDaemon.isRunning {
            log.info(
                "bluetoothd is running; cuff's ATT listener is the newer one and gets incoming links. If bluetoothd restarts, it takes them: cuff simulate then stops with an error"
            )
            watcher = try? LinkWatcher(adapter: adapter)
        } else {
            watcher = nil
        }
        // One loop: the pairing agent, the waiting for a central, each central's session.
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        // The simulator takes any central on its adapter. With bluetoothd, which answers the
        // kernel's pairing questions itself, that is a D-Bus agent for this adapter only.
        let agent: Agent?
        do {
            if BluetoothDaemon.isRunning {
                agent = .dbus(
                    try BlueZAgent(
                        scope: AgentScope(adapter: adapter, device: nil), loop: loop, path: "/cuff/simulator_agent",
                        logger: log.scoped("pairing agent (D-Bus)")))
            } else {
                agent = .mgmt(try PairingAgent(adapter: adapter, loop: loop, logger: log.scoped("pairing agent")))
                // A cuff bonds with whoever pairs with it (so a bonded central can come back).
                if (try? adapter.makeBondable()) == true { log.info("\(adapter) made bondable (MGMT Set Bondable)") }
            }
        } catch {
            log.info("no pairing agent: \(error.message)")
            agent = nil
        }
        defer { agent?.stop() }
        let listener: L2CAPATTListener
        let advertiser: LEAdvertiser
        let ad = driver.peripheral.advertisement
        do {
            listener = try L2CAPATTListener(adapter: adapter)
            advertiser = try LEAdvertiser(
                adapter: adapter, name: ad.name ?? name, serviceUUIDs16: ad.serviceUUIDs16,
                manufacturerData: ad.manufacturerData)
            try advertiser.start()
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        // A central waiting to be accepted ends the loop's turn (the agent answers in between).
        let listenerFD = listener.fileDescriptor
        func listen() {
            guard let listenerFD else { return }
            do { try loop.watch(listenerFD) { _ in } } catch { log.info("\(error.message)") }
        }
        listen()
        defer {
            if let listenerFD { loop.unwatch(listenerFD) }
            advertiser.stop()
            listener.close()
        }
        log.info(
            "\(label) \"\(ad.name ?? name)\" advertising \(ad.summary) on \(adapter) (\(listener.address)); waiting for a central"
        )
        var session = 0
        var unserved: [UInt16: (LinkWatcher.IncomingLink, ContinuousClock.Instant)] = [:]
        // Advertising is switched on again every few seconds while we wait: on an adapter that
        // bluetoothd shares, the kernel turns it off when bluetoothd's own advertisements change;
        // and a scanner that started meanwhile hears an advertisement at once (an emulated
        // controller such as btvirt reports one only when advertising or scanning is switched on).
        var asserted = ContinuousClock.now
        var assertFailed = false
        var advertised = ad
        while !signals.isRaised(.int) && !signals.isRaised(.term) {
            let bearer: L2CAPATTBearer?
            do {
                try loop.runOnce(timeout: .milliseconds(200))
                bearer = try listener.accept(timeout: .zero)
            } catch {
                log.info("accept failed: \(error.message)")
                throw LiveBluetoothFailure(.connectionFailed)
            }
            // The button between connections (SIGUSR1; during one the session's loop takes it), and
            // what the cuff advertises kept current (an Omron cuff's pairing mode, its data pending).
            if bearer == nil, signals.consume(.usr1) { driver.pressButton() }
            if driver.peripheral.advertisement != advertised {
                advertised = driver.peripheral.advertisement
                do {
                    try advertiser.update(
                        name: advertised.name ?? name, serviceUUIDs16: advertised.serviceUUIDs16,
                        manufacturerData: advertised.manufacturerData)
                } catch {
                    log.info("advertising data could not be changed: \(error.message)")
                }
            }
            if bearer == nil, ContinuousClock.now - asserted >= .seconds(2) {
                do {
                    try advertiser.reassert()
                    assertFailed = false
                } catch {
                    // Once per failing stretch, not every two seconds.
                    if !assertFailed { log.info("advertising could not be switched on again: \(error.message)") }
                    assertFailed = true
                }
                asserted = .now
            }
            if case .dbus(let a)? = agent, a.wasReleased {
                log.info(
                    "bluetoothd stopped or restarted (it released cuff's agent). A restarted bluetoothd's ATT listener is newer than cuff's and takes incoming links, and it resets advertising: stopping. Start cuff simulate again once bluetoothd runs (or stop bluetoothd)"
                )
                throw LiveBluetoothFailure(.connectionFailed)
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
                    log.info(
                        "\(link.peer) connected to \(adapter) but its ATT channel went to bluetoothd, not to cuff (bluetoothd's listener is newer than ours: was it restarted?). Restart cuff simulate after bluetoothd, or stop bluetoothd (`sudo systemctl stop bluetooth`)"
                    )
                    throw LiveBluetoothFailure(.connectionFailed)
                }
            }
            guard let bearer else { continue }
            session += 1
            log.info("session \(session): \(bearer.peerDescription) connected")
            // The next central waits in the listen queue, not in the loop.
            if let listenerFD { loop.unwatch(listenerFD) }
            let end = driver.serve(bearer, client: bearer.peerDescription, on: loop)
            listen()
            log.info("session \(session) ended: \(end)")
            if end == .interrupted { break }
            do { try advertiser.restart() } catch { log.info("re-advertising failed: \(error.message)") }
            asserted = .now
        }
        log.info("stopped")
    }

    /// `cuff simulate --backend bluetoothd`: the peripheral as a GATT application and an LE
    /// advertisement registered with bluetoothd, on one event loop with the peripheral's driver.
    /// No raw sockets (no root); a bluetoothd restart is waited out and registered with again.
    public static func simulateThroughBluetoothd<P: GATTPeripheral>(
        adapter: BluetoothAdapter, driver: PeripheralDriver<P>, name: String, label: String, log: Logger
    ) throws(LiveBluetoothFailure) {
        let signals = SignalFlags.shared
        /// The loop, the peripheral's clock on it, the application registered (answers come on the loop).
        func start() throws(TransportError) -> (EventLoop, BlueZGATTApplication) {
            let loop = try EventLoop()
            driver.attach(to: loop)
            let ad = driver.peripheral.advertisement
            let layout = BlueZGATTLayout(
                database: driver.peripheral.database, name: ad.name ?? name, serviceUUIDs16: ad.serviceUUIDs16,
                manufacturerData: ad.manufacturerData)
            let application = try BlueZGATTApplication(adapter: adapter, layout: layout, loop: loop, log: log) {
                bearer, client in
                if driver.isConnected { driver.interrupt() }
                driver.accept(bearer, client: client) { end in log.info("session ended: \(end)") }
            }
            try application.start()
            return (loop, application)
        }
        let started: Result<(EventLoop, BlueZGATTApplication), TransportError> = Result { () throws(TransportError) in
            try start()
        }
        guard case .success(let (loop, application)) = started else {
            if case .failure(let error) = started { log.info("bluetoothd: \(error.message)") }
            throw LiveBluetoothFailure(.connectionFailed)
        }
        // The simulator takes any central on its adapter: a D-Bus agent for this adapter only.
        let agent: BlueZAgent?
        do {
            agent = try BlueZAgent(
                scope: AgentScope(adapter: adapter, device: nil), loop: loop, path: "/cuff/simulator_agent",
                logger: log.scoped("pairing agent (D-Bus)"))
        } catch {
            log.info("no pairing agent: \(error.message)")
            agent = nil
        }
        defer {
            agent?.stop()
            application.stop()
            log.info("stopped")
        }
        let ad = driver.peripheral.advertisement
        log.info(
            "\(label) \"\(ad.name ?? name)\" through bluetoothd on \(adapter): \(application.layout.objects.count) GATT objects at \(application.layout.root), advertising \(ad.summary)"
        )
        var advertised = ad
        do {
            try loop.run {
                if signals.isRaised(.int) || signals.isRaised(.term) { return true }
                if signals.consume(.usr1) { driver.pressButton() }
                // What the cuff advertises kept current (an Omron cuff's pairing mode, its data pending).
                if driver.peripheral.advertisement != advertised {
                    advertised = driver.peripheral.advertisement
                    application.changeAdvertisement(
                        name: advertised.name ?? name, serviceUUIDs16: advertised.serviceUUIDs16,
                        manufacturerData: advertised.manufacturerData)
                }
                return application.failure != nil
            }
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        if application.failure != nil { throw LiveBluetoothFailure(.connectionFailed) }
    }
}
