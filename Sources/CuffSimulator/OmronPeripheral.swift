// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT
import Omron

/// What makes a simulated cuff an Omron one: the profile, the Omron scenario, and whether it
/// starts factory-fresh (`--unpaired`) instead of paired with the default key.
public struct OmronSimulation: Sendable, Hashable {
    public var profile: OmronProfile
    public var scenario: OmronScenario
    public var unpaired: Bool
    /// What Device Information's model number says (default: the profile's id), e.g. a sales
    /// name such as `X4 Smart`, or a model no profile knows.
    public var modelNumber: String?
    /// Also serve the standard Blood Pressure Service, indicating user 1's newest reading once
    /// subscribed (as most Omron cuffs do beside their own service).
    public var standardService: Bool

    public init(
        profile: OmronProfile, scenario: OmronScenario = .normal, unpaired: Bool = false, modelNumber: String? = nil,
        standardService: Bool = false
    ) {
        self.profile = profile
        self.scenario = scenario
        self.unpaired = unpaired
        self.modelNumber = modelNumber
        self.standardService = standardService
    }
}

/// A simulated Omron cuff as a GATT server: the Omron service of its profile's transport (four
/// TX/RX channel pairs and the unlock characteristic, or the FE4A single channel), Device
/// Information naming the model, and the ``OmronSimulator`` deciding what the cuff answers.
///
/// Pure: PDUs and monotonic time in, PDUs out. The cuff's local wall clock is `localAtPowerOn`
/// plus the monotonic time since ``poweredOn(now:)``.
public struct OmronPeripheral: GATTPeripheral {
    public private(set) var server: GATTServer
    public private(set) var cuff: OmronSimulator
    let byHandle: [UInt16: OmronCharacteristic]
    let handles: [OmronCharacteristic: UInt16]
    let localAtPowerOn: Int64
    var poweredAt: Timestamp?
    /// The server's and the cuff's actions for one call, kept between calls (emptied, their
    /// capacity kept: ``ActionMachine``); a call made while another one's actions run gets a new array.
    var serverScratch = ActionBuffer<GATTServerAction>()
    var cuffScratch = ActionBuffer<OmronSimulator.Action>()
    /// The standard service's Blood Pressure Measurement, when the cuff has one.
    let standardMeasurement: UInt16?
    /// Service Changed's value and CCCD handles, when the cuff indicates it on connecting.
    let serviceChangedOnConnect: (value: UInt16, cccd: UInt16)?
    /// `BLESmart_` and 20 hex digits, as Omron cuffs advertise (e.g. `BLESmart_000000BCF95D33C7649F`).
    public var advertisedName = "BLESmart_00000000000000000000"

    public init(
        cuff: OmronSimulator, localAtPowerOn: Int64, name: String? = nil, modelNumber: String? = nil,
        standardService: Bool = false, gatt: SimulatorConfiguration = SimulatorConfiguration()
    ) {
        self.cuff = cuff
        self.localAtPowerOn = localAtPowerOn
        let p = cuff.profile
        var b = AttributeDatabase.Builder()
        var handles: [OmronCharacteristic: UInt16] = [:]
        let gattLayout = SimulatedGATTLayout(gatt, &b)
        b.addService(.genericAccess)
        b.addCharacteristic(
            BluetoothUUID(0x2A00), properties: .read, permissions: .read, value: Array((name ?? p.id).utf8))
        b.addService(BluetoothUUID(BPSUUID.deviceInformationService))
        b.addCharacteristic(
            BluetoothUUID(0x2A29), properties: .read, permissions: .read, value: Array("OMRON HEALTHCARE".utf8))
        b.addCharacteristic(
            BluetoothUUID(0x2A24), properties: .read, permissions: .read, value: Array((modelNumber ?? p.id).utf8))
        if standardService {
            b.addService(BluetoothUUID(BPSUUID.bloodPressureService))
            standardMeasurement =
                b.addCharacteristic(
                    BluetoothUUID(BPSCharacteristic.bloodPressureMeasurement.rawValue), properties: .indicate,
                    permissions: []
                )
                .valueHandle
            b.addCharacteristic(
                BluetoothUUID(BPSCharacteristic.bloodPressureFeature.rawValue), properties: .read, permissions: .read,
                value: [0, 0])
        } else {
            standardMeasurement = nil
        }
        b.addService(BluetoothUUID(p.transport.serviceUUID)!)
        let txProps: GATT.CharacteristicProperties =
            p.transport == .classic ? [.write, .writeWithoutResponse] : .writeWithoutResponse
        for (i, u) in p.transport.txUUIDs.enumerated() {
            handles[.tx(i)] =
                b.addCharacteristic(BluetoothUUID(u)!, properties: txProps, permissions: .write).valueHandle
        }
        for (i, u) in p.transport.rxUUIDs.enumerated() {
            handles[.rx(i)] = b.addCharacteristic(BluetoothUUID(u)!, properties: .notify, permissions: []).valueHandle
        }
        handles[.unlock] =
            b.addCharacteristic(
                BluetoothUUID(OmronUUID.unlock)!, properties: [.write, .writeWithoutResponse, .notify],
                permissions: .write
            ).valueHandle
        server = GATTServer(database: gattLayout.finish(b.build()))
        serviceChangedOnConnect = gattLayout.serviceChangedOnConnect
        self.handles = handles
        byHandle = Dictionary(uniqueKeysWithValues: handles.map { ($1, $0) })
    }

    /// The Omron cuff a simulator configuration asks for (its seed; its clock start as the host's
    /// local time at power-on), or nil when it asks for a Blood Pressure Service cuff.
    public init?(configuration c: SimulatorConfiguration) {
        guard let o = c.omron else { return nil }
        let cuff = OmronSimulator(
            profile: o.profile, scenario: o.scenario, seed: c.seed, paired: !o.unpaired, localSeconds: c.clockStart)
        self.init(
            cuff: cuff, localAtPowerOn: c.clockStart, modelNumber: o.modelNumber, standardService: o.standardService,
            gatt: c)
        server.transactionTimeoutHere = c.transactionTimeout
        var rng = SeededRandom(seed: c.seed ^ 0x4F4D524F4E)
        advertisedName =
            "BLESmart_000000" + Hex.encode((0..<7).map { _ in UInt8(truncatingIfNeeded: rng.next()) }).uppercased()
    }

    public var nextDeadline: Timestamp? { server.nextDeadline }
    public var database: AttributeDatabase { server.database }

    /// What an Omron cuff advertises (facts sheet §1.2): a `BLESmart_…` name, the FE4A service
    /// (modern family) or the Blood Pressure Service (classic family, whose 128-bit service does
    /// not fit beside the rest), and company 0x020E's data in format 0x01: the status byte (users,
    /// time not set, pairing mode, data pending), two bytes, then a 3-byte sequence per user (the
    /// readings each has taken).
    public var advertisement: PeripheralAdvertisement {
        let users = min(3, cuff.profile.users.count)
        var status = UInt8(users)
        if cuff.scenario == .clockReset && cuff.clockWrites == 0 { status |= 0x04 }
        if cuff.pairingMode { status |= 0x08 }
        if cuff.unread.contains(where: { $0 > 0 }) { status |= 0x40 }
        var data: [UInt8] = [0x01, status, 0x00, 0x00]
        for u in 0..<users {
            let n = UInt32(truncatingIfNeeded: cuff.taken[u].count)
            data += [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF)]
        }
        return PeripheralAdvertisement(
            name: advertisedName, serviceUUIDs16: cuff.profile.transport == .modern ? [0xFE4A] : [0x1810],
            manufacturerData: [OmronUUID.companyID: data])
    }

    func local(_ now: Timestamp) -> Int64 {
        localAtPowerOn + Int64((now - (poweredAt ?? now)).secondsDouble.rounded(.down))
    }

    public mutating func poweredOn(now: Timestamp) { if poweredAt == nil { poweredAt = now } }

    public mutating func connected(now: Timestamp, client: String?, into out: inout [PeripheralOutput]) {
        poweredOn(now: now)
        server.reset()
        let sc = serviceChangedOnConnect
        serving({ SimulatedGATTLayout.connected(sc, &$0, now: now, into: &$1) }, now, &out)
    }

    public mutating func disconnected(now: Timestamp, into out: inout [PeripheralOutput]) {
        cuffIgnoring(.disconnected, now)
        server.reset()
    }

    public mutating func linkSecurityChanged(_ level: SecurityLevel) { server.linkSecurityChanged(level: level) }

    public mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [PeripheralOutput]) {
        poweredOn(now: now)
        serving({ $0.receive(pdu, now: now, into: &$1) }, now, &out)
    }

    /// The Bluetooth button (SIGUSR1): pairing mode.
    public mutating func buttonPressed(now: Timestamp, into out: inout [PeripheralOutput]) {
        cuffIgnoring(.button, now)
        out.append(.log("Bluetooth button: pairing mode (-P-)"))
    }

    public mutating func tick(now: Timestamp, into out: inout [PeripheralOutput]) {
        serving({ $0.tick(now: now, into: &$1) }, now, &out)
    }

    /// Calls the server with ``serverScratch`` (emptied; a nested call gets a new array) and runs
    /// what it asks for.
    mutating func serving(
        _ call: (inout GATTServer, inout [GATTServerAction]) -> Void, _ now: Timestamp,
        _ out: inout [PeripheralOutput]
    ) {
        var actions = serverScratch.take()
        call(&server, &actions)
        serverActions(actions, now, &out)
        serverScratch.giveBack(&actions)
    }

    /// The cuff takes `event` with ``cuffScratch`` (as ``serving(_:_:_:)`` does); its actions run into `out`.
    mutating func cuffHandling(_ event: OmronSimulator.Event, _ now: Timestamp, _ out: inout [PeripheralOutput]) {
        var actions = cuffScratch.take()
        cuff.handle(event, localSeconds: local(now), into: &actions)
        cuffActions(actions, now, &out)
        cuffScratch.giveBack(&actions)
    }

    /// The cuff takes `event`; what it asks for is dropped (a button press or a lost link asks for nothing).
    mutating func cuffIgnoring(_ event: OmronSimulator.Event, _ now: Timestamp) {
        var actions = cuffScratch.take()
        cuff.handle(event, localSeconds: local(now), into: &actions)
        cuffScratch.giveBack(&actions)
    }

    mutating func serverActions(_ actions: [GATTServerAction], _ now: Timestamp, _ out: inout [PeripheralOutput]) {
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .written(handle, _, value, _):
                guard let c = byHandle[handle] else { continue }
                cuffHandling(.write(c, value), now, &out)
            case let .subscriptionChanged(valueHandle, _, _, true) where valueHandle == standardMeasurement:
                standardReading(now, &out)
            case let .subscriptionChanged(valueHandle, _, notify, _):
                guard notify, let c = byHandle[valueHandle] else { continue }
                cuffHandling(.subscribe(c), now, &out)
            case .indicationConfirmed, .indicationTimedOut, .dropped:
                continue
            case let .protocolViolation(why):
                out.append(.log("client protocol violation: \(why)"))
            }
        }
    }

    /// User 1's newest reading as a standard Blood Pressure Measurement indication.
    mutating func standardReading(_ now: Timestamp, _ out: inout [PeripheralOutput]) {
        guard let h = standardMeasurement, let r = cuff.stored(user: 0).last else { return }
        let m = BloodPressureMeasurement(
            systolic: SFloat(Double(r.systolic)), diastolic: SFloat(Double(r.diastolic)), meanArterialPressure: .nan,
            timestamp: r.time,
            pulseRate: SFloat(Double(r.pulse)), userID: 1)
        serving({ $0.indicate(handle: h, value: m.encode(), now: now, into: &$1) }, now, &out)
    }

    mutating func cuffActions(_ actions: [OmronSimulator.Action], _ now: Timestamp, _ out: inout [PeripheralOutput]) {
        for a in actions {
            switch a {
            case let .notify(c, bytes):
                guard let h = handles[c] else { continue }
                serving({ $0.notify(handle: h, value: bytes, into: &$1) }, now, &out)
            case .disconnect:
                out.append(.disconnect("the simulated Omron cuff dropped the link"))
            }
        }
    }
}
