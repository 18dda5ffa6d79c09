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
    /// The standard service's Blood Pressure Measurement, when the cuff has one.
    let standardMeasurement: UInt16?
    /// `BLESmart_` and 20 hex digits, as Omron cuffs advertise (e.g. `BLESmart_000000BCF95D33C7649F`).
    public var advertisedName = "BLESmart_00000000000000000000"

    public init(
        cuff: OmronSimulator, localAtPowerOn: Int64, name: String? = nil, modelNumber: String? = nil,
        standardService: Bool = false
    ) {
        self.cuff = cuff
        self.localAtPowerOn = localAtPowerOn
        let p = cuff.profile
        var b = AttributeDatabase.Builder()
        var handles: [OmronCharacteristic: UInt16] = [:]
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
        server = GATTServer(database: b.build())
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
            cuff: cuff, localAtPowerOn: c.clockStart, modelNumber: o.modelNumber, standardService: o.standardService)
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

    public mutating func connected(now: Timestamp, client: String?) -> [PeripheralOutput] {
        poweredOn(now: now)
        server.reset()
        return []
    }

    public mutating func disconnected(now: Timestamp) -> [PeripheralOutput] {
        _ = cuff.handle(.disconnected, localSeconds: local(now))
        server.reset()
        return []
    }

    public mutating func linkSecurityChanged(_ level: SecurityLevel) { server.linkSecurityChanged(level: level) }

    public mutating func receive(_ pdu: [UInt8], now: Timestamp) -> [PeripheralOutput] {
        poweredOn(now: now)
        return serverActions(server.receive(pdu, now: now), now)
    }

    /// The Bluetooth button (SIGUSR1): pairing mode.
    public mutating func buttonPressed(now: Timestamp) -> [PeripheralOutput] {
        _ = cuff.handle(.button, localSeconds: local(now))
        return [.log("Bluetooth button: pairing mode (-P-)")]
    }

    public mutating func tick(now: Timestamp) -> [PeripheralOutput] { serverActions(server.tick(now: now), now) }

    mutating func serverActions(_ actions: [GATTServerAction], _ now: Timestamp) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .written(handle, _, value, _):
                guard let c = byHandle[handle] else { continue }
                out += cuffActions(cuff.handle(.write(c, value), localSeconds: local(now)), now)
            case let .subscriptionChanged(valueHandle, _, _, true) where valueHandle == standardMeasurement:
                out += standardReading(now)
            case let .subscriptionChanged(valueHandle, _, notify, _):
                guard notify, let c = byHandle[valueHandle] else { continue }
                out += cuffActions(cuff.handle(.subscribe(c), localSeconds: local(now)), now)
            case .indicationConfirmed, .indicationTimedOut, .dropped:
                continue
            case let .protocolViolation(why):
                out.append(.log("client protocol violation: \(why)"))
            }
        }
        return out
    }

    /// User 1's newest reading as a standard Blood Pressure Measurement indication.
    mutating func standardReading(_ now: Timestamp) -> [PeripheralOutput] {
        guard let h = standardMeasurement, let r = cuff.stored(user: 0).last else { return [] }
        let m = BloodPressureMeasurement(
            systolic: SFloat(Double(r.systolic)), diastolic: SFloat(Double(r.diastolic)), meanArterialPressure: .nan,
            timestamp: r.time,
            pulseRate: SFloat(Double(r.pulse)), userID: 1)
        return serverActions(server.indicate(handle: h, value: m.encode(), now: now), now)
    }

    mutating func cuffActions(_ actions: [OmronSimulator.Action], _ now: Timestamp) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        for a in actions {
            switch a {
            case let .notify(c, bytes):
                guard let h = handles[c] else { continue }
                out += serverActions(server.notify(handle: h, value: bytes), now)
            case .disconnect:
                out.append(.disconnect("the simulated Omron cuff dropped the link"))
            }
        }
        return out
    }
}
