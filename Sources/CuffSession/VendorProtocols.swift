// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSimulator
import GATT

/// Microlife's protocol (BP3GY1-2N) on the seam: ``MicrolifeSession`` live, ``MicrolifeCuff``
/// simulated (shared/spec/other-cuffs.md).
public struct MicrolifeProtocol: CuffProtocol {
    public init() {}

    public func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?
    ) -> MeasurementRecord? {
        vendorStoredRecord(characteristic, raw: raw, device: device, receivedAt: receivedAt, stored: stored)
    }
    public var id: CuffProtocolID { "microlife" }
    public var summary: String {
        "Microlife's download protocol (BP3GY1-2N: service fff0, commands on fff2, answers on fff1)"
    }

    static let service = BluetoothUUID(Microlife.serviceUUID16)

    public func match(_ offer: DeviceOffer) -> ProtocolMatch? {
        let named = namedAs("microlife", offer)
        if let p = offer.profile, p.service(Self.service) != nil,
            p.characteristic(BluetoothUUID(Microlife.responseUUID16)) != nil,
            p.characteristic(BluetoothUUID(Microlife.commandUUID16)) != nil
        {
            // fff0 is a common vendor service: with the name it is certain; alone it beats only
            // the standard session's fallback (a 0x1810 cuff stays with the standard session).
            return named ? .certain : .likely
        }
        return named ? .possible : nil
    }

    public func makeCentral(configuration: CuffSessionConfiguration) -> any CuffProtocolSession {
        // The cuff's clock is set to the host's local time at the session's start.
        VendorProtocolCentral(id: id, configuration: configuration) { at in
            .microlife(
                MicrolifeSession(
                    setTime: configuration.setTime
                        ? at.wallMicros / 1_000_000 + configuration.localUTCOffsetSeconds : nil))
        }
    }

    /// Follows a captured download. The session is made without a clock to set: it then takes
    /// the cuff's answer to a clock the central set as "no measurement list; still waiting", and
    /// a capture of a central that set none is followed as well.
    public func makeObserver(configuration c: CuffSessionConfiguration, discovered: GATTProfile?) -> (
        any CuffProtocolObserver
    )? {
        vendorObserver(.microlife(MicrolifeSession(setTime: nil)), configuration: c, discovered: discovered)
    }

    public func makePeripheral(configuration: SimulatorConfiguration, requireEncryption: Bool) -> (any GATTPeripheral)?
    {
        // A memory of three readings a day apart (from the seed) and an empty slot.
        var random = SeededRandom(seed: configuration.seed)
        var slots: [Microlife.Record?] = []
        for i in 0..<3 {
            let t = DateTime(unixSeconds: configuration.clockStart - Int64(3 - i) * 86_400 + Int64(i) * 613)
            slots.append(
                Microlife.Record(
                    systolic: UInt8(115 + Int.random(in: 0...15, using: &random)),
                    diastolic: UInt8(72 + Int.random(in: 0...12, using: &random)),
                    pulse: UInt8(62 + Int.random(in: 0...16, using: &random)),
                    time: DateTime(
                        year: t.year, month: t.month, day: t.day, hours: t.hours, minutes: t.minutes, seconds: 0)))
        }
        slots.append(nil)
        return VendorCuffPeripheral(.microlife(MicrolifeCuff(slots: slots)), name: "BP3GY1-2N")
    }

    /// Its simulated cuff is the vendor's own: a seeded memory and clock, none of the standard
    /// cuff's scenarios, quirks or GATT options.
    public func simulatorHonours(_ setting: SimulatorSetting) -> Bool { false }
}

/// Yonker's protocol (YK-IBPA1, YK-BPW5) on the seam: ``YonkerSession`` live, ``YonkerCuff``
/// simulated.
public struct YonkerProtocol: CuffProtocol {
    public init() {}

    public func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?
    ) -> MeasurementRecord? {
        vendorStoredRecord(characteristic, raw: raw, device: device, receivedAt: receivedAt, stored: stored)
    }
    public var id: CuffProtocolID { "yonker" }
    public var summary: String { "Yonker's result notification (YK-IBPA1, YK-BPW5: service cdeacd80-…)" }

    static let service = BluetoothUUID(Yonker.serviceUUID)!

    public func match(_ offer: DeviceOffer) -> ProtocolMatch? {
        if offer.profile?.service(Self.service) != nil { return .certain }
        if offer.advertisedServices.contains(Self.service) { return .likely }
        if namedAs("yonker", offer) { return .possible }
        return nil
    }

    public func makeCentral(configuration: CuffSessionConfiguration) -> any CuffProtocolSession {
        VendorProtocolCentral(id: id, configuration: configuration) { _ in
            .yonker(
                YonkerSession(timeout: configuration.timeout ?? .seconds(86_400 * 365), settle: configuration.settle))
        }
    }

    public func makeObserver(configuration c: CuffSessionConfiguration, discovered: GATTProfile?) -> (
        any CuffProtocolObserver
    )? {
        vendorObserver(
            .yonker(YonkerSession(timeout: c.timeout ?? .seconds(86_400 * 365), settle: c.settle)), configuration: c,
            discovered: discovered)
    }

    public func makePeripheral(configuration: SimulatorConfiguration, requireEncryption: Bool) -> (any GATTPeripheral)?
    {
        var random = SeededRandom(seed: configuration.seed)
        let t = DateTime(unixSeconds: configuration.clockStart)
        let result = Yonker.Result(
            systolic: UInt8(115 + Int.random(in: 0...15, using: &random)),
            diastolic: UInt8(72 + Int.random(in: 0...12, using: &random)),
            pulse: UInt8(62 + Int.random(in: 0...16, using: &random)),
            time: DateTime(year: t.year, month: t.month, day: t.day, hours: t.hours, minutes: t.minutes, seconds: 0))
        return VendorCuffPeripheral(.yonker(YonkerCuff(result: result)), name: "YK-IBPA1")
    }

    /// Its simulated cuff is the vendor's own: a seeded memory and clock, none of the standard
    /// cuff's scenarios, quirks or GATT options.
    public func simulatorHonours(_ setting: SimulatorSetting) -> Bool { false }
}

extension CuffProtocol {
    /// A kept row of this vendor protocol (its name in `characteristic`): the reading again from
    /// its raw bytes (``VendorReading/rebuild(protocolName:raw:stored:)``).
    func vendorStoredRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool
    ) -> MeasurementRecord? {
        guard characteristic == .named(id.rawValue) else { return nil }
        return VendorReading.rebuild(protocolName: id.rawValue, raw: raw, stored: stored)?.record(
            device: device, at: receivedAt)
    }
}

extension CuffProtocol {
    /// The observer of a captured vendor session, once discovery has shown the database (its
    /// characteristics are found by UUID, as the live central finds them); nil before.
    func vendorObserver(
        _ session: VendorCentral.Session, configuration c: CuffSessionConfiguration, discovered: GATTProfile?
    ) -> (any CuffProtocolObserver)? {
        guard let gatt = discovered else { return nil }
        return VendorCaptureObserver(
            session, gatt: gatt, device: DeviceInfo(address: c.address, name: c.advertisedName),
            known: c.knownRecordKeys)
    }
}

/// The device's name is one of the protocol's cuffs (the names `cuff scan` knows).
func namedAs(_ protocolName: String, _ offer: DeviceOffer) -> Bool {
    guard let name = offer.name else { return false }
    return CuffRecognition.recognise(name: name, serviceUUIDs16: [], serviceUUIDs128: [], manufacturerData: [])
        == .vendorProtocol(protocolName)
}

/// The records a vendor session handed out, by dedup key (the store's to start with), shared by
/// the live session (``VendorProtocolCentral``) and the replay's (``VendorCaptureObserver``): a
/// record is new unless it, or the live reading it was, is known; a repeat is counted.
struct VendorRecordKeys: Sendable {
    private(set) var seen: Set<String>
    private(set) var repeats = 0

    init(_ known: Set<String>) { seen = known }

    /// True when `record` is new (its key is kept from now on); else the repeat is counted.
    mutating func admit(_ record: MeasurementRecord) -> Bool {
        if !record.wasKeptLive({ seen.contains($0) }), seen.insert(record.dedupKey).inserted { return true }
        repeats += 1
        return false
    }

    /// The log line of a repeat.
    static func skipped(_ record: MeasurementRecord) -> String {
        "skipped a stored record already received (\(record.timestamp ?? "no time stamp"))"
    }
}

/// A vendor protocol's central session on the seam: ``VendorCentral`` with the session records,
/// the readings as records, and the store's deduplication.
struct VendorProtocolCentral: CuffProtocolSession {
    let protocolID: CuffProtocolID
    let configuration: CuffSessionConfiguration
    let makeSession: @Sendable (EventTime) -> VendorCentral.Session
    var central: VendorCentral?
    var device: DeviceInfo
    var keys: VendorRecordKeys
    private(set) var measurements = 0
    /// Readings that arrived but were kept already (the store had them).
    var repeats: Int { keys.repeats }
    private(set) var outcome: SessionOutcome?
    /// The vendor central's outputs for one event, kept between events (``ActionMachine``).
    var scratch = ActionBuffer<VendorCentral.Output>()

    init(
        id: CuffProtocolID, configuration: CuffSessionConfiguration,
        makeSession: @escaping @Sendable (EventTime) -> VendorCentral.Session
    ) {
        protocolID = id
        self.configuration = configuration
        self.makeSession = makeSession
        device = DeviceInfo(address: configuration.address, name: configuration.advertisedName)
        keys = VendorRecordKeys(configuration.knownRecordKeys)
        timeLimit = SessionTimeLimit(configuration.timeout, follow: configuration.follow)
    }

    var isFinished: Bool { outcome != nil }
    /// 0 when any reading arrived, also one kept already ("0 new"), as the standard session's.
    var exitCode: Int32 {
        measurements + repeats > 0
            ? 0 : (outcome.map { $0 == .completed ? SessionOutcome.noResult : $0 } ?? .noResult).exitCode
    }
    /// `--timeout` from the start, whatever the stage (a Microlife answer that trickles in, a
    /// Yonker cuff that keeps talking).
    var timeLimit: SessionTimeLimit
    var nextDeadline: Timestamp? {
        isFinished ? nil : [central?.nextDeadline, timeLimit.deadline].compactMap { $0 }.min()
    }
    var stateName: String { isFinished ? (outcome?.rawValue ?? "done") : "\(protocolID)" }

    mutating func start(at: EventTime, into out: inout [CentralAction]) {
        timeLimit.start(at: at.monotonic)
        central = VendorCentral(makeSession(at), device: device)
        out.append(.emit(.session(SessionRecord(event: .start, device: device, at: at))))
        step(at, &out) { $0.start(at: at, into: &$1) }
    }

    mutating func adopt(_ link: DiscoveredLink, at: EventTime, into out: inout [CentralAction]) {
        device = link.device
        timeLimit.start(at: link.startedAt.monotonic)
        central = VendorCentral(makeSession(at), device: device)
        step(at, &out) { $0.adopt(client: link.client, profile: link.profile, at: at, into: &$1) }
    }

    mutating func receive(_ pdu: [UInt8], at: EventTime, into out: inout [CentralAction]) {
        step(at, &out) { $0.receive(pdu, at: at, into: &$1) }
    }
    mutating func tick(at: EventTime, into out: inout [CentralAction]) {
        step(at, &out) { $0.tick(at: at, into: &$1) }
        if !isFinished, let (o, why) = timeLimit.expired(at: at.monotonic, readings: measurements + repeats) {
            out.append(.disconnect)
            end(o, why, at, &out)
        }
    }
    mutating func disconnected(_ why: String?, at: EventTime, into out: inout [CentralAction]) {
        step(at, &out) { $0.disconnected(at: at, into: &$1) }
    }
    mutating func securityRaised(_ level: SecurityLevel, at: EventTime, into out: inout [CentralAction]) {
        step(at, &out) { $0.securityRaised(level, at: at, into: &$1) }
    }
    mutating func securityRefused(_ why: String, at: EventTime, into out: inout [CentralAction]) {
        step(at, &out) { $0.securityRefused(at: at, into: &$1) }
    }

    mutating func stop(at: EventTime, into out: inout [CentralAction]) {
        guard !isFinished else { return }
        out.append(.disconnect)
        end(.stopped, "stopped by the user", at, &out)
    }

    /// `f` with the vendor central (taken out meanwhile, so its own arrays are not shared) and
    /// ``scratch`` (emptied; a nested call gets a new array); what it asks for, mapped into `out`.
    mutating func step(
        _ at: EventTime, _ out: inout [CentralAction], _ f: (inout VendorCentral, inout [VendorCentral.Output]) -> Void
    ) {
        guard !isFinished, var c = central else { return }
        central = nil
        var outputs = scratch.take()
        f(&c, &outputs)
        central = c
        map(outputs, at, &out)
        scratch.giveBack(&outputs)
    }

    mutating func map(_ outputs: [VendorCentral.Output], _ at: EventTime, _ out: inout [CentralAction]) {
        for o in outputs where !isFinished {
            switch o {
            case let .send(p): out.append(.send(p))
            case let .raiseSecurity(l): out.append(.raiseSecurity(l))
            case let .emit(r): kept(r.record(device: device, at: at), &out)
            case let .measurement(record): kept(record, &out)
            case let .log(s): if configuration.logs { out.append(.log(s)) }
            case .disconnect: out.append(.disconnect)
            case let .finished(o): end(o, nil, at, &out)
            }
        }
    }

    /// A reading, emitted unless the store (or this session) has it already.
    mutating func kept(_ record: MeasurementRecord, _ out: inout [CentralAction]) {
        if keys.admit(record) {
            measurements += 1
            return out.append(.emit(.measurement(record)))
        }
        if configuration.logs { out.append(.log(VendorRecordKeys.skipped(record))) }
    }

    mutating func end(_ o: SessionOutcome, _ why: String?, _ at: EventTime, _ out: inout [CentralAction]) {
        outcome = o
        if let why, configuration.logs { out.append(.log(why)) }
        var record = SessionRecord(
            event: .end, device: device, at: at, outcome: o, measurements: measurements, message: why)
        record.attRequests = central?.client.requestsSent
        if repeats > 0, configuration.logs {
            out.append(.log(CuffSessionMachine.newAndKept(measurements, repeats)))
        }
        out.append(.emit(.session(record)))
        out.append(.finished(o))
    }
}
