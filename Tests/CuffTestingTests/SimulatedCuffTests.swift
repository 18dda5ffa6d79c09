// SPDX-License-Identifier: GPL-2.0-or-later

import CuffLogging
import CuffRuntime
import CuffTesting
import CuffTestSupport
import Transport
import Foundation
import Testing

/// A GATT client of our own, as a developer would write one: it subscribes to the Blood Pressure
/// Measurement's indications through the CCCD (no discovery: the handles come from the cuff's
/// table) and confirms every indication, until the cuff closes the link.
struct IndicationClient {
    let valueHandle: UInt16
    let cccdHandle: UInt16
    /// The Blood Pressure Measurement values the cuff indicated.
    var values: [[UInt8]] = []
    /// Every PDU the cuff sent, in order.
    var received: [[UInt8]] = []

    init(_ cuff: SimulatedCuff) throws {
        let bpm = try #require(cuff.database.characteristic(BluetoothUUID(0x2A35)))
        valueHandle = bpm.valueHandle
        cccdHandle = try #require(bpm.cccdHandle)
    }

    /// Little-endian handle bytes.
    static func le(_ h: UInt16) -> [UInt8] { [UInt8(h & 0xFF), UInt8(h >> 8)] }

    /// Connects and writes 0x0002 (indications) to the CCCD; returns the write's answer.
    mutating func subscribe(_ cuff: inout SimulatedCuff) -> [[UInt8]] {
        take(cuff.connect(), &cuff)
        let reply = cuff.receive([0x12] + Self.le(cccdHandle) + [0x02, 0x00])
        take(reply, &cuff)
        return reply.pdus
    }

    /// Notes what the cuff sent and confirms each indication of the measurement.
    mutating func take(_ reply: CuffReply, _ cuff: inout SimulatedCuff) {
        for pdu in reply.pdus {
            received.append(pdu)
            guard pdu.first == 0x1D, pdu.count >= 3 else { continue }
            if Array(pdu[1...2]) == Self.le(valueHandle) { values.append(Array(pdu.dropFirst(3))) }
            take(cuff.receive([0x1E]), &cuff)
        }
    }

    /// Lets simulated time run, event by event, until the cuff closes the link (or `limit` passes).
    mutating func run(_ cuff: inout SimulatedCuff, limit: Duration = .seconds(600)) {
        while cuff.isConnected, cuff.now < limit {
            take(cuff.advance(by: cuff.nextEvent ?? .seconds(1)), &cuff)
        }
    }
}

/// What cuff's own central gets from the same simulated cuff, in process (`cuff measure --simulated`,
/// which starts the measurement on subscription).
func centralMeasurements(_ given: CuffSimulation) throws -> [MeasurementRecord] {
    var simulation = given
    simulation.configuration.autostart = true
    var session = CuffSessionConfiguration(address: "simulated:test")
    session.setTime = false
    var got: [MeasurementRecord] = []
    let hooks = SessionHooks(emit: { if case let .measurement(m) = $0 { got.append(m) } }, log: .silent)
    let link = SimulatedLink(
        simulator: simulation.configuration, session: session, hooks: hooks, speed: nil,
        peripheral: try simulation.makePeripheral())
    #expect(link.run() == .completed)
    return got
}

/// Each measurement's numbers, decoded again from its raw value.
func readings(_ measurements: [MeasurementRecord]) -> [[Double?]] {
    measurements.map { numbers(CuffDecoder.decode($0.raw).json) }
}

/// The decoded numbers of a measurement object (`cuff decode`'s keys).
func numbers(_ json: JSON) -> [Double?] {
    ["systolic", "diastolic", "mean_arterial_pressure", "pulse_rate"].map { key -> Double? in
        switch json[key] {
        case let .double(d)?: d
        case let .int(i)?: Double(i)
        default: nil
        }
    }
}

@Suite("CuffTesting: a simulated cuff in process")
struct SimulatedCuffTests {
    /// Our own client gets the readings cuff's own central gets from the same cuff and seed.
    @Test(arguments: [Scenario.normal, .hypertensive, .irregularPulse])
    func ownClientGetsTheReadingsCuffsCentralGets(_ scenario: Scenario) throws {
        let simulation = CuffSimulation(scenario: scenario, seed: 5, autostart: true)
        var cuff = try SimulatedCuff(simulation)
        var client = try IndicationClient(cuff)
        #expect(client.subscribe(&cuff) == [[0x13]])  // Write Response
        client.run(&cuff)
        #expect(!cuff.isConnected)
        let central = try centralMeasurements(simulation)
        #expect(!central.isEmpty)
        #expect(client.values.count == central.count)
        let ours = client.values.map { numbers(CuffDecoder.decode($0).json) }
        #expect(ours == readings(central))
        #expect(ours.allSatisfy { $0[0] != nil && $0[1] != nil })
    }

    /// Without autostart the cuff waits for the button; the clock moves only when told.
    @Test func withoutAutostartTheButtonStartsTheMeasurement() throws {
        var cuff = try SimulatedCuff(CuffSimulation(scenario: .normal, seed: 2))
        var client = try IndicationClient(cuff)
        _ = client.subscribe(&cuff)
        client.take(cuff.advance(by: .seconds(120)), &cuff)
        #expect(client.values.isEmpty)
        #expect(cuff.now == .seconds(120))
        client.take(cuff.pressButton(), &cuff)
        client.run(&cuff)
        #expect(client.values.count == 1)
        #expect(cuff.now > .seconds(120))
    }

    /// A quirk gives the device family's names: a Read Request for the Device Name answers them.
    @Test func aQuirkCuffAnswersWithItsFamilysName() throws {
        var cuff = try SimulatedCuff(CuffSimulation(quirk: .andUA651))
        let name = try #require(cuff.database.characteristic(BluetoothUUID(0x2A00)))
        _ = cuff.connect()
        let reply = cuff.receive([0x0A] + IndicationClient.le(name.valueHandle))
        #expect(reply.pdus == [[0x0B] + Array("UA-651BLE".utf8)])
    }

    /// `--model`: an Omron cuff serves Omron's own service, not the Blood Pressure Service.
    @Test func anOmronModelServesOmronsServiceAndAnUnknownOneIsRefused() throws {
        let cuff = try SimulatedCuff(try CuffSimulation.omron(model: "HEM-7361T"))
        #expect(!cuff.database.services.isEmpty)
        #expect(cuff.database.characteristic(BluetoothUUID(0x2A35)) == nil)
        let error = #expect(throws: CuffTestingError.self) { try CuffSimulation.omron(model: "HEM-0000X") }
        #expect(error?.code == .unknownModel)
    }

    /// PDUs sent to a cuff nobody is connected to go nowhere; a disconnect is the client's to make.
    @Test func nothingIsSentWhileDisconnected() throws {
        var cuff = try SimulatedCuff(CuffSimulation())
        #expect(cuff.receive([0x0A, 0x01, 0x00]).pdus.isEmpty)
        _ = cuff.connect()
        #expect(cuff.receive([0x0A, 0x01, 0x00]).pdus.count == 1)
        cuff.disconnect()
        #expect(!cuff.isConnected)
        #expect(cuff.receive([0x0A, 0x01, 0x00]).pdus.isEmpty)
    }
}

@Suite("CuffTesting: a simulated cuff on a Unix socket")
struct SimulatedCuffServerTests {
    static func socketPath(_ name: String) -> String {
        temporaryPath("\(name).sock")
    }

    /// cuff's own central over the socket at `path` (`cuff measure --connect unix:PATH`): the
    /// session's outcome and its measurements.
    static func measure(_ path: String, _ configure: (inout CuffSessionConfiguration) -> Void = { _ in }) throws
        -> (outcome: SessionOutcome, measurements: [MeasurementRecord])
    {
        var config = CuffSessionConfiguration(address: "unix:" + path)
        config.settle = .milliseconds(200)
        config.timeout = .seconds(60)
        configure(&config)
        var got: [MeasurementRecord] = []
        let hooks = SessionHooks(emit: { if case let .measurement(m) = $0 { got.append(m) } }, log: .silent)
        let bearer = try UnixSeqpacketBearer.connect(path: path)
        let outcome = CentralDriver(configuration: config, hooks: hooks, signals: nil).run(bearer)
        return (outcome, got)
    }

    /// cuff's own central connects over the socket (as `cuff measure --connect unix:PATH`) and
    /// gets the reading the same cuff gives in process.
    @Test func servesARealClientOverTheSocket() throws {
        let path = Self.socketPath("serve")
        let simulation = CuffSimulation(scenario: .hypertensive, seed: 9, autostart: true)
        let server = SimulatedCuffServer(simulation, path: path, speed: 200)
        try server.start()
        defer { server.stop() }
        #expect(FileManager.default.fileExists(atPath: path))

        let (outcome, got) = try Self.measure(path) { $0.setTime = false }
        #expect(outcome == .completed)
        #expect(got.count == 1)
        #expect(readings(got) == readings(try centralMeasurements(simulation)))
        #expect(server.sessions == 1)
        server.stop()
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// A raw client of our own on the socket: it subscribes by the CCCD, presses the button
    /// through the server, and gets the measurement's indication (a cuff without autostart waits).
    @Test func aRawClientSubscribesAndTheButtonStartsAMeasurement() throws {
        let path = Self.socketPath("button")
        let simulation = CuffSimulation(scenario: .normal, seed: 4)
        let server = SimulatedCuffServer(simulation, path: path, speed: 200)
        try server.start()
        defer { server.stop() }
        let bpm = try #require(try SimulatedCuff(simulation).database.characteristic(BluetoothUUID(0x2A35)))
        let bearer = try UnixSeqpacketBearer.connect(path: path)
        defer { bearer.close() }
        try bearer.send([0x12] + IndicationClient.le(try #require(bpm.cccdHandle)) + [0x02, 0x00])
        guard case let .pdu(answer) = try bearer.next(timeout: .seconds(10)) else {
            Issue.record("no write response")
            return
        }
        #expect(answer == [0x13])
        server.pressButton()
        var value: [UInt8]?
        while value == nil, case let .pdu(pdu) = try bearer.next(timeout: .seconds(30)) {
            guard pdu.first == 0x1D else { continue }
            try bearer.send([0x1E])
            if Array(pdu[1...2]) == IndicationClient.le(bpm.valueHandle) { value = Array(pdu.dropFirst(3)) }
        }
        let decoded = CuffDecoder.decode(try #require(value))
        #expect(decoded.failure == nil)
        #expect(numbers(decoded.json) == readings(try centralMeasurements(simulation)).first)
    }

    /// `CuffSimulation.omron(model:)` on the socket: cuff's own central syncs its memory over
    /// Omron's protocol, and each record's raw slot decodes alone to the same reading.
    @Test func anOmronModelOnTheSocketSyncsItsMemory() throws {
        let model = "HEM-7142T2"
        let path = Self.socketPath("omron")
        let server = SimulatedCuffServer(try CuffSimulation.omron(model: model, seed: 5), path: path, speed: 20)
        try server.start()
        defer { server.stop() }
        let (outcome, got) = try Self.measure(path) {
            $0.omronModel = model
            $0.forcedProtocol = .omron
        }
        #expect(outcome == .completed)
        #expect(!got.isEmpty)
        for m in got {
            #expect(m.characteristic.uuidString == "omron")
            let alone = try CuffDecoder.decode(omronRecord: m.raw, model: model)
            #expect(alone.failure == nil)
            #expect(numbers(alone.json)[0] == m.systolic.doubleValue)
            #expect(numbers(alone.json)[1] == m.diastolic.doubleValue)
        }
    }

    /// A captured session served back (`--from-capture`): cuff's central over the socket gets
    /// the measurement the capture's replay gives, byte for byte; a file that is no capture, or a
    /// session the capture does not have, is refused with its code.
    @Test func aCapturedCuffServedBackGivesTheCapturedMeasurement() throws {
        let capture = capturesDirectory.appendingPathComponent("irregular-pulse.btsnoop").path
        let path = Self.socketPath("captured")
        let server = SimulatedCuffServer(try CuffSimulation.captured(path: capture), path: path, speed: 200)
        try server.start()
        defer { server.stop() }
        let (outcome, got) = try Self.measure(path)
        #expect(outcome == .completed)
        let replayed = try CuffReplay.replay(path: capture).measurements
        #expect(!replayed.isEmpty)
        #expect(got.map(\.raw) == replayed.map(\.raw))

        let notACapture = #expect(throws: CuffTestingError.self) {
            try CuffSimulation.captured(path: capturesDirectory.appendingPathComponent("README.md").path)
        }
        #expect(notACapture?.code == .badCapture)
        let noSession = #expect(throws: CuffTestingError.self) {
            try CuffSimulation.captured(path: capture, session: 9)
        }
        #expect(noSession?.code == .nothingToServe)
    }

    /// A server nobody holds any more stops: its thread ends and its socket goes.
    @Test func aServerThatGoesAwayStops() throws {
        let path = Self.socketPath("dropped")
        do {
            let server = SimulatedCuffServer(CuffSimulation(), path: path)
            try server.start()
            withExtendedLifetime(server) { #expect(FileManager.default.fileExists(atPath: path)) }
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aPathInUseIsRefusedWithACode() throws {
        let path = Self.socketPath("busy")
        let first = SimulatedCuffServer(CuffSimulation(), path: path)
        try first.start()
        defer { first.stop() }
        let second = SimulatedCuffServer(CuffSimulation(), path: path)
        let error = #expect(throws: CuffTestingError.self) { try second.start() }
        #expect(error?.code == .cannotListen)
        let again = #expect(throws: CuffTestingError.self) { try first.start() }
        #expect(again?.code == .alreadyStarted)
    }
}
