// SPDX-License-Identifier: GPL-2.0-or-later

/// Which simulated cuff to run: what `cuff simulate` offers (scenario, persona, seed, quirk,
/// Omron `--model`, `--protocol`, `--from-capture`) as one value.
///
/// ```swift
/// let plain = CuffSimulation(scenario: .hypertensive, autostart: true)
/// let omron = try CuffSimulation.omron(model: "HEM-7361T")
/// ```
///
/// ``configuration`` is the simulator's own configuration: set any of its other fields
/// (`recordSegmentLength`, `measureEvery`, `linger`, `clockStart`, …) on it.
public struct CuffSimulation: Sendable {
    /// The simulator's configuration (scenario, persona, seed, names, clock, Omron profile, quirk).
    public var configuration: SimulatorConfiguration
    /// The cuff protocol whose simulated cuff to run instead of the default one (`--protocol`);
    /// ignored for an Omron cuff (``configuration``'s `omron` set).
    public var cuffProtocol: CuffProtocolID?
    /// Refuse to serve the measurement before the link is encrypted (a bonded cuff).
    public var requireEncryption = false
    /// The captured cuff served instead of the simulator (``captured(path:session:handles:loop:)``).
    var capturedCuff: CapturedCuffPeripheral?

    /// A Blood Pressure Service cuff, as `cuff simulate --scenario … --persona … --seed … [--quirk …]`.
    ///
    /// - Parameters:
    ///   - scenario: what the measurement does (`cuff simulate --list`).
    ///   - persona: which version of the Blood Pressure Service it speaks (bps-1.1 adds Enhanced
    ///     BPM/ICP, Record and RACP).
    ///   - seed: the readings' seed (same seed, same readings).
    ///   - autostart: start measuring as soon as a client subscribes; otherwise the client's start
    ///     command or the button (``SimulatedCuff/pressButton()``) starts it, as `cuff simulate`.
    ///   - quirk: behave as a device family's cuff (names, value layout, memory and session habits).
    ///   - cuffProtocol: another registered protocol's simulated cuff (`--protocol`), or nil.
    public init(
        scenario: Scenario = .normal, persona: Persona = .bps10, seed: UInt64 = 1, autostart: Bool = false,
        quirk: QuirkProfile? = nil, cuffProtocol: CuffProtocolID? = nil
    ) {
        configuration = SimulatorConfiguration(scenario: scenario, persona: persona, seed: seed, autostart: autostart)
        if let quirk { configuration.behave(as: quirk) }
        self.cuffProtocol = cuffProtocol
    }

    /// A cuff from a simulator configuration made by hand.
    ///
    /// - Parameters:
    ///   - configuration: the simulator's configuration.
    ///   - cuffProtocol: another registered protocol's simulated cuff, or nil for the default.
    public init(configuration: SimulatorConfiguration, cuffProtocol: CuffProtocolID? = nil) {
        self.configuration = configuration
        self.cuffProtocol = cuffProtocol
    }

    /// An Omron cuff speaking Omron's EEPROM protocol, as `cuff simulate --model NAME`.
    ///
    /// - Parameters:
    ///   - model: a profile id, equivalent model id or sales name (e.g. `HEM-7361T`, `Evolv`).
    ///   - scenario: the Omron scenario (normal, full-memory, empty-user, clock-reset, …).
    ///   - unpaired: start factory-fresh (no key, no bond), so a client must pair it in pairing mode.
    ///   - seed: the readings' seed.
    /// - Returns: the simulation.
    /// - Throws: ``CuffTestingError`` with code ``CuffTestingError/Code/unknownModel`` when no
    ///   profile has that name (the message names the closest one).
    public static func omron(
        model: String, scenario: OmronScenario = .normal, unpaired: Bool = false,
        seed: UInt64 = 1
    ) throws(CuffTestingError) -> CuffSimulation {
        guard let profile = OmronCatalog.profile(named: model) else {
            let closest = OmronCatalog.closest(to: model).id
            throw CuffTestingError(.unknownModel, "unknown Omron model '\(model)' (closest profile: \(closest))")
        }
        var c = SimulatorConfiguration(scenario: .normal, seed: seed)
        c.omron = OmronSimulation(profile: profile, scenario: scenario, unpaired: unpaired)
        return CuffSimulation(configuration: c)
    }

    /// The peripheral of a captured session served back, as `cuff simulate --from-capture FILE`:
    /// its attribute table, its values, and what it notified and indicated, in order, each once
    /// the client has made the writes the captured central made before it, after the captured gap.
    ///
    /// - Parameters:
    ///   - path: a btsnoop, pcap or pcapng file.
    ///   - session: the connection to serve (1-based, as `cuff simulate --list-sessions` numbers
    ///     them), or nil for the first with a Blood Pressure Service.
    ///   - handles: value handles mapped to characteristics, for a capture without service
    ///     discovery (`--handle`).
    ///   - loop: after the last captured notification, play them again.
    /// - Returns: the simulation (``configuration`` does not apply to it).
    /// - Throws: ``CuffTestingError`` with code ``CuffTestingError/Code/badCapture`` (the file
    ///   cannot be read as a capture) or ``CuffTestingError/Code/nothingToServe``.
    public static func captured(
        path: String, session: Int? = nil, handles: [UInt16: CuffCharacteristic] = [:],
        loop: Bool = false
    ) throws(CuffTestingError) -> CuffSimulation {
        let captured: CapturedCuff
        do {
            captured = try CapturedCuff.load(path: path, session: session, overrides: handles)
        } catch let e as CapturedCuffError {
            throw CuffTestingError(.nothingToServe, "\(path): \(e.message)")
        } catch {
            throw CuffTestingError(.badCapture, "\(path): \(error)")
        }
        var simulation = CuffSimulation()
        simulation.capturedCuff = CapturedCuffPeripheral(captured, loop: loop)
        return simulation
    }

    /// The peripheral state machine `cuff simulate` serves for this simulation.
    ///
    /// - Returns: the captured cuff, for a ``captured(path:session:handles:loop:)`` simulation;
    ///   the Omron cuff when ``configuration`` names an Omron profile; otherwise the chosen
    ///   protocol's simulated cuff (the standard Blood Pressure Service cuff by default).
    /// - Throws: ``CuffTestingError`` with code ``CuffTestingError/Code/noSimulatedCuff`` when the
    ///   protocol has none.
    public func makePeripheral() throws(CuffTestingError) -> any GATTPeripheral {
        if let capturedCuff { return capturedCuff }
        if let o = configuration.omron {
            guard let p = OmronPeripheral(configuration: configuration) else {
                throw CuffTestingError(.noSimulatedCuff, "no simulated Omron cuff for \(o.profile.id)")
            }
            return p
        }
        let kind = CuffProtocolRegistry.builtIn.select(DeviceOffer(), forced: cuffProtocol)
        guard let p = kind.makePeripheral(configuration: configuration, requireEncryption: requireEncryption) else {
            throw CuffTestingError(.noSimulatedCuff, "the \(kind.id) protocol has no simulated cuff")
        }
        return p
    }
}

/// What a ``SimulatedCuff`` did in answer to an event: the PDUs it sent, whether it closed the
/// link, and its log lines.
public struct CuffReply: Sendable, Hashable {
    /// ATT PDUs for the client, in order.
    public var pdus: [[UInt8]] = []
    /// Why the cuff closed the link, when it did (the cuff is then disconnected).
    public var disconnected: String?
    /// What the cuff logged (what `cuff simulate` prints on stderr).
    public var log: [String] = []

    /// An empty reply.
    public init() {}
}

/// A simulated cuff in process, for your own GATT client: ATT PDUs in, ATT PDUs out, on a
/// simulated clock you move (tests never wait).
///
/// ```swift
/// var cuff = try SimulatedCuff(CuffSimulation(scenario: .normal, autostart: true))
/// _ = cuff.connect()
/// let reply = cuff.receive([0x12, 0x02, 0x00, 0x02, 0x00])  // write CCCD 0x0002
/// let later = cuff.advance(by: .seconds(60))                 // indications, in order
/// ```
///
/// The same peripheral state machine `cuff simulate` serves on a socket, fed directly: no
/// descriptors, no threads, no real time. Time starts at zero when the cuff is made; it moves
/// only with ``advance(by:)``. Deterministic for a given seed.
public struct SimulatedCuff: Sendable {
    var peripheral: any GATTPeripheral
    var clock: Timestamp = .zero
    /// Whether a client is connected.
    public private(set) var isConnected = false

    /// Makes the cuff and powers it on (its clock starts running at time zero).
    ///
    /// - Parameter simulation: which cuff (scenario, persona, quirk, Omron model, protocol).
    /// - Throws: ``CuffTestingError`` when the simulation has no simulated cuff
    ///   (``CuffSimulation/makePeripheral()``).
    public init(_ simulation: CuffSimulation) throws(CuffTestingError) {
        peripheral = try simulation.makePeripheral()
        peripheral.poweredOn(now: clock)
    }

    /// The attribute table the cuff serves (services, characteristics, value and CCCD handles),
    /// for a client that wants handles without running discovery.
    public var database: AttributeDatabase { peripheral.database }

    /// The simulated time since the cuff was made.
    public var now: Duration { clock - .zero }

    /// How long from ``now`` until the cuff acts on its own (a notification due, a timeout), or
    /// nil when it waits for the client.
    public var nextEvent: Duration? { peripheral.nextDeadline.map { max(.zero, $0 - clock) } }

    /// A client connects.
    ///
    /// - Parameter client: the client's name or Bluetooth address (the cuff remembers which
    ///   stored readings each client confirmed), or nil.
    /// - Returns: what the cuff sent or did at once.
    public mutating func connect(client: String? = nil) -> CuffReply {
        isConnected = true
        return execute(peripheral.connected(now: clock, client: client))
    }

    /// The client sends an ATT PDU.
    ///
    /// - Parameter pdu: the whole ATT PDU, opcode first (e.g. `[0x0A, 0x03, 0x00]`, a Read Request
    ///   for handle 0x0003).
    /// - Returns: the cuff's answer (a response, notifications, indications), or an empty reply
    ///   when no client is connected.
    public mutating func receive(_ pdu: [UInt8]) -> CuffReply {
        guard isConnected else { return CuffReply() }
        return execute(peripheral.receive(pdu, now: clock))
    }

    /// Moves simulated time forward, letting the cuff do what falls due on the way (measure,
    /// notify cuff pressure, indicate the result, give up on a client that is silent).
    ///
    /// - Parameter duration: how much simulated time passes (negative counts as zero).
    /// - Returns: everything the cuff sent or did meanwhile, in order.
    public mutating func advance(by duration: Duration) -> CuffReply {
        let target = clock + max(.zero, duration)
        var reply = CuffReply()
        while let d = peripheral.nextDeadline, d <= target {
            clock = max(clock, d)
            reply.append(execute(peripheral.tick(now: clock)))
        }
        clock = target
        return reply
    }

    /// Presses the cuff's button (what SIGUSR1 does to `cuff simulate`): starts a measurement.
    ///
    /// - Returns: what the cuff sent or did at once.
    public mutating func pressButton() -> CuffReply {
        execute(peripheral.buttonPressed(now: clock))
    }

    /// The client's side of the link sets its security level (after pairing or encryption), for a
    /// cuff made with ``CuffSimulation/requireEncryption``.
    ///
    /// - Parameter level: the link's new security level.
    public mutating func linkSecurityChanged(_ level: SecurityLevel) {
        peripheral.linkSecurityChanged(level)
    }

    /// The client goes away.
    ///
    /// - Returns: what the cuff logged.
    @discardableResult
    public mutating func disconnect() -> CuffReply {
        guard isConnected else { return CuffReply() }
        isConnected = false
        var reply = CuffReply()
        reply.log = logs(peripheral.disconnected(now: clock))
        return reply
    }

    /// Sorts the cuff's outputs, as the runtime's peripheral driver does: PDUs go to a connected
    /// client only; a disconnect tells the cuff the link is gone.
    mutating func execute(_ outputs: [PeripheralOutput]) -> CuffReply {
        var reply = CuffReply()
        for o in outputs {
            switch o {
            case let .send(pdu):
                if isConnected { reply.pdus.append(pdu) }
            case let .log(s):
                reply.log.append(s)
            case let .disconnect(why):
                guard isConnected else { continue }
                isConnected = false
                reply.disconnected = why
                reply.log += logs(peripheral.disconnected(now: clock))
            }
        }
        return reply
    }

    func logs(_ outputs: [PeripheralOutput]) -> [String] {
        outputs.compactMap { if case let .log(s) = $0 { s } else { nil } }
    }
}

extension CuffReply {
    /// Appends a later reply.
    ///
    /// - Parameter later: what the cuff did after this.
    public mutating func append(_ later: CuffReply) {
        pdus += later.pdus
        log += later.log
        disconnected = disconnected ?? later.disconnected
    }
}
