// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffSimulator
import GATT

/// A small cuff protocol registered from the tests only: a vendor service with one
/// characteristic that notifies `[systolic, diastolic, pulse]` (one byte each, mmHg and bpm) once
/// the client subscribes. It exercises every role of the seam — the central session (also as the
/// protocol a standard session hands a discovered link to), the capture observer and the
/// simulated cuff — without any change to the CLI.
struct SeamTestProtocol: CuffProtocol {
    static let id: CuffProtocolID = "seam-test"
    static let service = BluetoothUUID("b1a5e0c1-2f3e-4d5c-9a8b-7c6d5e4f3a2b")!
    static let reading = BluetoothUUID("b1a5e0c2-2f3e-4d5c-9a8b-7c6d5e4f3a2b")!
    static let source = RecordCharacteristic.named("seam-test")

    var id: CuffProtocolID { Self.id }
    var summary: String { "the seam's test protocol" }

    func match(_ offer: DeviceOffer) -> ProtocolMatch? {
        if offer.profile?.service(Self.service) != nil { return .certain }
        if offer.advertisedServices.contains(Self.service) { return .likely }
        return nil
    }

    func makeCentral(configuration: CuffSessionConfiguration) -> any CuffProtocolSession {
        SeamTestCentral(configuration: configuration)
    }

    func makeObserver(configuration: CuffSessionConfiguration, discovered: GATTProfile?) -> (any CuffProtocolObserver)?
    {
        SeamTestObserver(
            address: configuration.address, valueHandle: discovered?.characteristic(Self.reading)?.valueHandle)
    }

    func makePeripheral(configuration: SimulatorConfiguration, requireEncryption: Bool) -> (any GATTPeripheral)? {
        SeamTestPeripheral(name: configuration.name, reading: [128, 82, 71])
    }

    func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?
    ) -> MeasurementRecord? {
        guard characteristic == Self.source, var r = Self.record(raw, device: device, at: receivedAt) else {
            return nil
        }
        r.stored = stored
        return r
    }

    /// The record a value gives (nil unless it is 3 bytes).
    static func record(_ value: [UInt8], device: DeviceInfo, at: EventTime) -> MeasurementRecord? {
        guard value.count == 3 else { return nil }
        let decoded = JSON.object([
            ("type", .string("measurement")), ("characteristic", .string(source.uuidString)),
            ("raw", .string(Hex.encode(value))),
            ("systolic", .int(Int64(value[0]))), ("diastolic", .int(Int64(value[1]))),
            ("pulse_rate", .int(Int64(value[2]))),
        ])
        return MeasurementRecord(
            characteristic: source, raw: value, unit: .mmHg, systolic: SFloat(Double(value[0])),
            diastolic: SFloat(Double(value[1])),
            meanArterialPressure: .nan, pulseRate: SFloat(Double(value[2])), timestamp: nil, userID: nil, status: nil,
            warnings: [],
            device: device, receivedAt: at, stored: false, sequenceNumber: nil, decoded: decoded)
    }
}

/// The central side: discover (unless handed a discovered link), subscribe, take one reading, end.
struct SeamTestCentral: CuffProtocolSession {
    enum Stage: Sendable {
        case idle
        case discovering(GATTRequestID)
        case subscribing(GATTRequestID, valueHandle: UInt16)
        case waiting(valueHandle: UInt16)
        case done(SessionOutcome)
    }

    var stage = Stage.idle
    var client = GATTClient()
    var device: DeviceInfo
    private(set) var measurements = 0

    init(configuration: CuffSessionConfiguration) {
        device = DeviceInfo(address: configuration.address, name: configuration.advertisedName)
    }

    var protocolID: CuffProtocolID { SeamTestProtocol.id }
    var isFinished: Bool { outcome != nil }
    var outcome: SessionOutcome? {
        if case let .done(o) = stage { return o }
        return nil
    }
    var exitCode: Int32 { measurements > 0 ? 0 : (outcome ?? .noResult).exitCode }
    var nextDeadline: Timestamp? { isFinished ? nil : client.nextDeadline }
    var stateName: String { "\(stage)" }

    mutating func startActions(at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = [.emit(.session(SessionRecord(event: .start, device: device, at: at)))]
        let d = client.discover(now: at.monotonic)
        stage = .discovering(d.id)
        out += gatt(d.actions, at)
        return out
    }

    mutating func adoptActions(_ link: DiscoveredLink, at: EventTime) -> [CentralAction] {
        client = link.client
        device = link.device
        return subscribe(link.profile, at)
    }

    mutating func receiveActions(_ pdu: [UInt8], at: EventTime) -> [CentralAction] {
        gatt(client.receive(pdu, now: at.monotonic), at)
    }
    mutating func tickActions(at: EventTime) -> [CentralAction] { gatt(client.tick(now: at.monotonic), at) }
    mutating func disconnectedActions(_ why: String?, at: EventTime) -> [CentralAction] {
        end(measurements > 0 ? .completed : .disconnected, why, at)
    }
    mutating func stopActions(at: EventTime) -> [CentralAction] { end(.stopped, nil, at) }
    mutating func securityRaisedActions(_ level: SecurityLevel, at: EventTime) -> [CentralAction] {
        gatt(client.securityRaised(level: level, now: at.monotonic), at)
    }
    mutating func securityRefusedActions(_ why: String, at: EventTime) -> [CentralAction] {
        end(.securityRefused, why, at)
    }

    mutating func subscribe(_ profile: GATTProfile, _ at: EventTime) -> [CentralAction] {
        guard let ch = profile.characteristic(SeamTestProtocol.reading) else {
            return end(.serviceMissing, "no reading characteristic", at)
        }
        let s = client.subscribe(ch, notify: true, indicate: false, now: at.monotonic)
        stage = .subscribing(s.id, valueHandle: ch.valueHandle)
        return gatt(s.actions, at)
    }

    mutating func gatt(_ actions: [GATTClientAction], _ at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        for a in actions where !isFinished {
            switch (a, stage) {
            case let (.send(pdu), _):
                out.append(.send(pdu))
            case let (.completed(id, .success(.profile(p))), .discovering(expected)) where id == expected:
                out += subscribe(p, at)
            case let (.completed(id, .success), .subscribing(expected, handle)) where id == expected:
                stage = .waiting(valueHandle: handle)
            case let (.notification(h, v), .waiting(handle)) where h == handle:
                guard let r = SeamTestProtocol.record(v, device: device, at: at) else { continue }
                measurements += 1
                out.append(.emit(.measurement(r)))
                out += end(.completed, nil, at)
            case let (.completed(_, .failure(e)), _), let (.failed(e), _):
                out += end(.protocolError, e.message, at)
            default:
                continue
            }
        }
        return out
    }

    mutating func end(_ outcome: SessionOutcome, _ why: String?, _ at: EventTime) -> [CentralAction] {
        guard !isFinished else { return [] }
        stage = .done(outcome)
        let record = SessionRecord(
            event: .end, device: device, at: at, outcome: outcome, measurements: measurements, message: why)
        return [.emit(.session(record)), .disconnect, .finished(outcome)]
    }
}

/// The observer: a reading is a 3-byte notification on the reading's handle (any handle when
/// it followed no discovery).
struct SeamTestObserver: CuffProtocolObserver {
    let address: String
    let valueHandle: UInt16?
    private(set) var measurements = 0
    var ended = false

    var deadline: Timestamp? { nil }
    var isFinished: Bool { ended }

    mutating func connected(at: EventTime, into out: inout [ObserverOutput]) {}

    mutating func pdu(_ bytes: [UInt8], fromCentral: Bool, at: EventTime, into out: inout [ObserverOutput]) {
        guard !fromCentral, !ended, bytes.count == 6, bytes[0] == 0x1B else { return }
        let h = UInt16(bytes[1]) | UInt16(bytes[2]) << 8
        guard valueHandle.map({ $0 == h }) ?? true,
            let r = SeamTestProtocol.record(Array(bytes[3...]), device: DeviceInfo(address: address), at: at)
        else { return }
        measurements += 1
        out.append(.emit(.measurement(r)))
    }

    mutating func advance(to time: Timestamp, inclusive: Bool, into out: inout [ObserverOutput]) {}

    mutating func disconnected(_ why: String?, at: EventTime, into out: inout [ObserverOutput]) {
        ended = true
        out.append(.log("\(address): seam-test connection ended (\(measurements) readings)"))
    }
}

/// The simulated cuff: GAP name, the vendor service; notifies its reading once subscribed.
struct SeamTestPeripheral: GATTPeripheral {
    var server: GATTServer
    let valueHandle: UInt16
    let reading: [UInt8]

    init(name: String, reading: [UInt8]) {
        var b = AttributeDatabase.Builder()
        b.addGenericAccessService(deviceName: name, appearance: 0x0380)
        _ = b.addService(SeamTestProtocol.service)
        valueHandle =
            b.addCharacteristic(
                SeamTestProtocol.reading, properties: .notify, permissions: [], value: reading,
                cccdPermissions: .readWrite
            ).valueHandle
        server = GATTServer(database: b.build())
        self.reading = reading
    }

    var nextDeadline: Timestamp? { server.nextDeadline }
    var database: AttributeDatabase { server.database }
    mutating func connected(now: Timestamp, client: String?, into out: inout [PeripheralOutput]) {
        server.reset()
    }
    mutating func disconnected(now: Timestamp, into out: inout [PeripheralOutput]) {
        server.reset()
    }
    mutating func linkSecurityChanged(_ level: SecurityLevel) { server.linkSecurityChanged(level: level) }
    mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [PeripheralOutput]) {
        let actions = server.receive(pdu, now: now)  // (first: `run` must see the server after it)
        out += run(actions)
    }
    mutating func buttonPressed(now: Timestamp, into out: inout [PeripheralOutput]) {
        out += run(server.notify(handle: valueHandle, value: reading))
    }
    mutating func tick(now: Timestamp, into out: inout [PeripheralOutput]) {
        let actions = server.tick(now: now)
        out += run(actions)
    }

    func run(_ actions: [GATTServerAction]) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        for a in actions {
            switch a {
            case let .send(pdu): out.append(.send(pdu))
            case let .subscriptionChanged(h, _, notify, _) where h == valueHandle && notify:
                out += run(server.notify(handle: valueHandle, value: reading))
            default: continue
            }
        }
        return out
    }
}

/// The ``CuffProtocolSession`` entry points: each appends its array-returning form's actions to `out`.
extension SeamTestCentral {
    mutating func start(at: EventTime, into out: inout [CentralAction]) { out += startActions(at: at) }
    mutating func receive(_ pdu: [UInt8], at: EventTime, into out: inout [CentralAction]) {
        out += receiveActions(pdu, at: at)
    }
    mutating func tick(at: EventTime, into out: inout [CentralAction]) { out += tickActions(at: at) }
    mutating func disconnected(_ why: String?, at: EventTime, into out: inout [CentralAction]) {
        out += disconnectedActions(why, at: at)
    }
    mutating func stop(at: EventTime, into out: inout [CentralAction]) { out += stopActions(at: at) }
    mutating func securityRaised(_ level: SecurityLevel, at: EventTime, into out: inout [CentralAction]) {
        out += securityRaisedActions(level, at: at)
    }
    mutating func securityRefused(_ why: String, at: EventTime, into out: inout [CentralAction]) {
        out += securityRefusedActions(why, at: at)
    }
    mutating func adopt(_ link: DiscoveredLink, at: EventTime, into out: inout [CentralAction]) {
        out += adoptActions(link, at: at)
    }
}
