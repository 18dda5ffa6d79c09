// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT
import Omron

/// An Omron sync over GATT: the ``OmronSession`` driving a ``GATTClient``. The same outputs and
/// entry points as ``CuffCentral``, so one driver runs either.
///
/// Discovery finds the Omron service of the profile's transport; each session action becomes a
/// GATT procedure (CCCD writes, unlock writes with response, TX writes with response on the
/// classic channels and without on FE4A); notifications go back to the session by handle.
public struct OmronCentral: CuffProtocolSession {
    public typealias Output = CentralAction

    public private(set) var session: OmronSession
    public internal(set) var client: GATTClient
    public private(set) var profile: OmronProfile
    /// `--model` chose the profile; otherwise Device Information's model number may correct it.
    let modelForced: Bool
    var modelRead: GATTRequestID?
    var modelChecked = false
    /// The database discovery found (also what an unasked indication is checked against).
    var discoveredProfile: GATTProfile?
    var device: DeviceInfo
    var handles: [OmronCharacteristic: GATTProfile.Characteristic] = [:]
    var byHandle: [UInt16: OmronCharacteristic] = [:]
    var sessionDeadline: Timestamp?
    var discovery: GATTRequestID?
    public private(set) var measurements = 0
    public private(set) var outcome: SessionOutcome?
    var started = false

    let options: OmronSyncOptions
    let utcOffsetSeconds: Int64
    /// Said once at the start (an unknown model and the profile used instead).
    var note: String?
    /// The model the cuff named before discovery (its advert), then Device Information's model number.
    var modelHint: String?
    /// An unknown model on a cuff that also has the standard Blood Pressure Service hands the link
    /// to the standard session (not when `--protocol omron` forced this one).
    let standardFallback: Bool
    var startedAt: EventTime?
    /// The session's and the client's actions for one event, kept between events (emptied, their
    /// capacity kept: ``ActionMachine``); an event taken while another one's actions run gets a new array.
    var sessionScratch = ActionBuffer<OmronSession.Action>()
    var clientScratch = ActionBuffer<GATTClientAction>()
    public private(set) var handOver: DiscoveredLink?

    /// - Parameter utcOffsetSeconds: seconds east of UTC of the host's local time: the cuff's
    ///   clock holds local time, read and set against `start`'s wall clock plus this.
    /// - Parameter modelForced: `profile` is the user's choice; otherwise discovery's family and
    ///   Device Information's model number (or `modelHint`) pick the profile.
    public init(
        profile: OmronProfile, options: OmronSyncOptions, device: DeviceInfo, utcOffsetSeconds: Int64,
        note: String? = nil,
        modelForced: Bool = true, modelHint: String? = nil, standardFallback: Bool = false, preferredMTU: UInt16 = 247
    ) {
        self.profile = profile
        self.modelForced = modelForced
        self.modelHint = modelHint
        self.standardFallback = standardFallback
        self.options = options
        self.utcOffsetSeconds = utcOffsetSeconds
        self.note = note
        session = OmronSession(profile: profile, options: options, localSeconds: 0)
        client = GATTClient(preferredMTU: preferredMTU)
        var d = device
        if d.model == nil { d.model = profile.id }
        if d.manufacturer == nil { d.manufacturer = "OMRON HEALTHCARE" }
        self.device = d
    }

    public var isFinished: Bool { outcome != nil }
    public var protocolID: CuffProtocolID { .omron }
    public var exitCode: Int32 { (outcome ?? .noResult).exitCode }
    public var stateName: String {
        if let outcome { return "finished (\(outcome.rawValue))" }
        return started ? "syncing" : "discovering"
    }

    /// Local date and time as seconds since 1970 read as UTC (what an Omron clock holds).
    public static func localSeconds(_ at: EventTime, _ utcOffsetSeconds: Int64) -> Int64 {
        let s = at.wallMicros / 1_000_000 - (at.wallMicros % 1_000_000 < 0 ? 1 : 0)
        return s + utcOffsetSeconds
    }
    public var nextDeadline: Timestamp? { [sessionDeadline, client.nextDeadline].compactMap { $0 }.min() }

    public mutating func start(at: EventTime, into out: inout [Output]) {
        startedAt = at
        out.append(.emit(.session(SessionRecord(event: .start, device: device, at: at))))
        let now = at.monotonic
        request(nil, at, &out) { $0.exchangeMTU(now: now, into: &$1) }
        request(\.discovery, at, &out) { $0.discover(services: [], now: now, into: &$1) }
    }

    public mutating func receive(_ pdu: [UInt8], at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.receive(pdu, now: now, into: &$1) }, at, &out)
    }

    public mutating func tick(at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.tick(now: now, into: &$1) }, at, &out)
        if let d = sessionDeadline, at.monotonic >= d {
            sessionDeadline = nil
            sessionStep(.timer, at, &out)
        }
    }

    public mutating func disconnected(_ why: String?, at: EventTime, into out: inout [Output]) {
        guard outcome == nil else { return }
        if !started { return finish(.disconnected, why ?? "the link went down", at, &out) }
        sessionStep(.disconnected, at, &out)
    }

    /// Stopping a sync ends it at once: whatever was read is kept, the cuff's counters stay.
    public mutating func stop(at: EventTime, into out: inout [Output]) {
        guard outcome == nil else { return }
        finish(.stopped, "stopped", at, &out)
        out.append(.disconnect)
    }

    public mutating func securityRaised(_ level: SecurityLevel, at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.securityRaised(level: level, now: now, into: &$1) }, at, &out)
    }

    public mutating func securityRefused(_ why: String, at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.securityRefused(now: now, into: &$1) }, at, &out)
    }

    /// The session takes `event` with ``sessionScratch`` (emptied; an event taken while another
    /// one's actions run gets a new array), and its actions run into `out`.
    mutating func sessionStep(_ event: OmronSession.Event, _ at: EventTime, _ out: inout [Output]) {
        var actions = sessionScratch.take()
        session.handle(event, now: at.monotonic, into: &actions)
        run(actions, at, &out)
        sessionScratch.giveBack(&actions)
    }

    mutating func finish(_ o: SessionOutcome, _ message: String?, _ at: EventTime, _ out: inout [Output]) {
        guard outcome == nil else { return }
        outcome = o
        sessionDeadline = nil
        var end = SessionRecord(
            event: .end, device: device, at: at, outcome: o, measurements: measurements, message: message,
            clockDriftSeconds: session.driftSeconds)
        end.attRequests = client.requestsSent
        out.append(.emit(.session(end)))
        out.append(.finished(o))
    }

    /// Submits a GATT procedure with ``clientScratch`` (as ``clientStep(_:_:_:noting:)`` does), keeps its
    /// ID at `record` when one is given, then runs its first actions into `out`.
    mutating func request(
        _ record: WritableKeyPath<OmronCentral, GATTRequestID?>?, _ at: EventTime, _ out: inout [Output],
        _ submit: (inout GATTClient, inout [GATTClientAction]) -> GATTRequestID
    ) {
        clientStep(submit, at, &out) { if let record { $0[keyPath: record] = $1 } }
    }

    // MARK: GATT → session

    mutating func gatt(_ actions: [GATTClientAction], _ at: EventTime, _ out: inout [Output]) {
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .completed(id, result):
                if id == discovery {
                    discovery = nil
                    discovered(result, at, &out)
                } else if id == modelRead {
                    modelRead = nil
                    modelNumber(result, at, &out)
                } else if case let .failure(e) = result, client.failure == nil, outcome == nil {
                    finish(
                        e.code == .securityRefused ? .securityRefused : .protocolError,
                        "GATT request failed: \(e.message)", at, &out)
                    out.append(.disconnect)
                }
            case let .notification(handle, value):
                guard let c = byHandle[handle] else { continue }
                sessionStep(.notified(c, value), at, &out)
            case let .indication(handle, value):
                indication(handle, value, at, &out)
            case let .raiseSecurity(level):
                out.append(.raiseSecurity(level))
            case let .failed(error):
                let o: SessionOutcome =
                    error.code == .timeout
                    ? .timedOut : error.code == .securityRefused ? .securityRefused : .protocolError
                finish(o, error.message, at, &out)
                out.append(.disconnect)
            }
        }
    }

    /// An indication is confirmed only once what it carried was kept, or when it carries no
    /// reading: a cuff deletes what was confirmed. On the Omron service's own channels it is the
    /// session's (as a notification would be); elsewhere ``UninvitedIndication`` decides (a
    /// standard measurement is kept as one).
    mutating func indication(_ handle: UInt16, _ value: [UInt8], _ at: EventTime, _ out: inout [Output]) {
        guard outcome == nil else {
            return out.append(
                .log(
                    "indication from handle 0x\(String(handle, radix: 16)) after the session ended: not confirmed, so the cuff keeps it"
                ))
        }
        if let c = byHandle[handle] {
            sessionStep(.notified(c, value), at, &out)
            return clientStep({ $0.confirmIndication(into: &$1) }, at, &out)
        }
        let verdict = UninvitedIndication.classify(
            handle: handle, value: value, profile: discoveredProfile, device: device, at: at)
        if case .keep = verdict { measurements += 1 }
        out += verdict.outputs(log: Output.log, measurement: { .emit(.measurement($0)) }) {
            var confirm: [Output] = []
            clientStep({ $0.confirmIndication(into: &$1) }, at, &confirm)
            return confirm
        }
    }

    mutating func discovered(
        _ result: Result<GATTClientResponse, GATTClientError>, _ at: EventTime, _ out: inout [Output]
    ) {
        guard case let .success(.profile(gp)) = result else {
            finish(.protocolError, "discovery failed", at, &out)
            return out.append(.disconnect)
        }
        begin(gp, at, &out)
    }

    /// The standard session discovered the link and hands it over: carry on with its client.
    public mutating func adopt(_ link: DiscoveredLink, at: EventTime, into out: inout [Output]) {
        client = link.client
        startedAt = link.startedAt
        var d = link.device
        if d.model == nil { d.model = profile.id }
        if d.manufacturer == nil { d.manufacturer = "OMRON HEALTHCARE" }
        device = d
        begin(link.profile, at, &out)
    }

    mutating func begin(_ gp: GATTProfile, _ at: EventTime, _ out: inout [Output]) {
        discoveredProfile = gp
        // Without --model, Device Information's model number (HEM-7361T_ESL) picks the profile.
        if !modelForced, !modelChecked, let ch = gp.characteristic(BluetoothUUID(0x2A24)) {
            modelChecked = true
            let now = at.monotonic
            return request(\.modelRead, at, &out) { $0.read(ch.valueHandle, now: now, into: &$1) }
        }
        if !modelForced,
            let family = OmronTransport.allCases.first(where: { gp.service(BluetoothUUID($0.serviceUUID)!) != nil })
        {
            let choice = OmronCatalog.choose(name: modelHint, transport: family)
            if case let .unknown(closest) = choice, standardFallback, gp.service(BluetoothUUID(0x1810)) != nil,
                gp.characteristic(BluetoothUUID(0x2A35)) != nil
            {
                handOver = DiscoveredLink(
                    protocolID: .bps, client: client, profile: gp, device: device, startedAt: startedAt ?? at)
                return out.append(
                    .log(
                        "unknown Omron model \(modelHint ?? ""); the closest profile is \(closest.id); reading the standard Blood "
                            + "Pressure Service instead (--model NAME reads the Omron memory with a profile)"))
            }
            profile = choice.profile
            note = Self.note(choice, name: modelHint ?? "", family: family)
            // The records name the profile they were read with: Device Information's words when
            // they name it, else its id (so a store rebuilds them with the same layout).
            if case .known = choice {} else { device.model = profile.id }
        }
        if let note { out.append(.log(note)) }
        out.append(
            .log("Omron \(profile.id) (\(profile.transport.rawValue) service, \(profile.pairing.rawValue) pairing)"))
        session = OmronSession(
            profile: profile, options: options, localSeconds: Self.localSeconds(at, utcOffsetSeconds))
        startSession(gp, at, &out)
    }

    mutating func modelNumber(
        _ result: Result<GATTClientResponse, GATTClientError>, _ at: EventTime, _ out: inout [Output]
    ) {
        if case let .success(.value(v)) = result {
            let text = String(decoding: v.prefix { $0 != 0 }, as: UTF8.self).split(separator: " ").joined(
                separator: " ")
            if !text.isEmpty {
                device.model = text
                modelHint = text
            }
        }
        guard let gp = discoveredProfile else { return }
        begin(gp, at, &out)
    }

    /// What the log says about a profile discovery chose (nil: the cuff named it).
    static func note(_ c: OmronProfileChoice, name: String, family: OmronTransport) -> String? {
        let f = family.rawValue
        switch c {
        case .known: return nil
        case let .sibling(p, named):
            return
                "\(name) is \(named.id), a \(named.transport.rawValue) profile, but the cuff has the \(f) service: using \(p.id) "
                + "(--model NAME chooses another)"
        case let .otherFamily(p, named):
            return
                "\(name) is \(named.id), a \(named.transport.rawValue) profile, but the cuff has the \(f) service: using the "
                + "closest \(f) profile, \(p.id) (--model NAME chooses another)"
        case let .unknown(p):
            return "unknown Omron model \(name); using the closest \(f) profile, \(p.id) (--model NAME chooses one)"
        case let .defaulted(p):
            return "the cuff names no Omron model; using \(p.id), the default \(f) profile (--model NAME chooses one)"
        }
    }

    mutating func startSession(_ gp: GATTProfile, _ at: EventTime, _ out: inout [Output]) {
        let service = BluetoothUUID(profile.transport.serviceUUID)!
        guard gp.service(service) != nil else {
            let other: OmronTransport = profile.transport == .classic ? .modern : .classic
            let hint =
                gp.service(BluetoothUUID(other.serviceUUID)!) != nil
                ? " (the cuff has the \(other.rawValue) one: another model?)" : ""
            finish(.serviceMissing, "no Omron \(profile.transport.rawValue) service on this device\(hint)", at, &out)
            return out.append(.disconnect)
        }
        for (i, u) in profile.transport.txUUIDs.enumerated() {
            handles[.tx(i)] = gp.characteristic(BluetoothUUID(u)!, in: service)
        }
        for (i, u) in profile.transport.rxUUIDs.enumerated() {
            handles[.rx(i)] = gp.characteristic(BluetoothUUID(u)!, in: service)
        }
        handles[.unlock] = gp.characteristic(BluetoothUUID(OmronUUID.unlock)!)
        byHandle = Dictionary(handles.map { ($1.valueHandle, $0) }, uniquingKeysWith: { a, _ in a })
        started = true
        sessionStep(.start, at, &out)
    }

    // MARK: session → GATT

    mutating func run(_ actions: [OmronSession.Action], _ at: EventTime, _ out: inout [Output]) {
        let now = at.monotonic
        for a in actions {
            switch a {
            case let .subscribe(c):
                guard let ch = handles[c] else { return missing(c, at, &out) }
                request(nil, at, &out) { $0.subscribe(ch, notify: true, indicate: false, now: now, into: &$1) }
            case let .write(c, bytes):
                guard let ch = handles[c] else { return missing(c, at, &out) }
                if profile.transport == .modern, case .tx = c {
                    request(nil, at, &out) { $0.writeWithoutResponse(ch.valueHandle, bytes, into: &$1) }
                } else {
                    request(nil, at, &out) { $0.write(ch.valueHandle, bytes, now: now, into: &$1) }
                }
            case let .setTimer(t):
                sessionDeadline = t
            case let .clock(_, drift):
                if let drift {
                    out.append(.log("cuff clock \(drift >= 0 ? "+" : "")\(drift) s from ours"))
                } else {
                    out.append(.log("cuff clock not set (reset by a battery change?)"))
                }
            case let .reading(r):
                measurements += 1
                let record = MeasurementRecord.from(
                    omron: r.reading, profile: profile, user: r.user, slot: r.slot, raw: r.raw, device: device, at: at)
                out.append(.emit(.measurement(record)))
            case let .badRecord(user, slot, e):
                out.append(.log("user \(user) slot \(slot): \(e.message)"))
            case let .finished(o):
                // A pairing session reads nothing: completing is its result.
                let outcome =
                    options.pair && o == .completed
                    ? SessionOutcome.completed : Self.outcome(o, measurements: measurements)
                finish(outcome, Self.message(o), at, &out)
                out.append(.disconnect)
            }
        }
    }

    mutating func missing(_ c: OmronCharacteristic, _ at: EventTime, _ out: inout [Output]) {
        finish(.serviceMissing, "the Omron service has no \(c) characteristic", at, &out)
        out.append(.disconnect)
    }

    static func outcome(_ o: OmronSessionOutcome, measurements: Int) -> SessionOutcome {
        switch o {
        case .completed: measurements > 0 ? .completed : .noResult
        case .keyRefused: .keyRefused
        case .notInPairingMode: .notInPairingMode
        case .keyLatched: .keyLatched
        case .linkNotEncrypted: .securityRefused
        case .timedOut: .timedOut
        case .disconnected: .disconnected
        case .deviceStatus, .protocolError: .protocolError
        }
    }

    static func message(_ o: OmronSessionOutcome) -> String? {
        switch o {
        case .completed: nil
        case let .keyRefused(s):
            "the cuff refused the key (status 0x\(Hex.digits(s, 2))): pair it with `cuff pair` (or --omron-key)"
        case .notInPairingMode: "the cuff is not in pairing mode: hold its Bluetooth button until -P- blinks"
        case .linkNotEncrypted: "the cuff takes a key only over a bonded, encrypted link (82 0F)"
        case let .keyLatched(s):
            "the cuff latched a refused key (status 0x\(Hex.digits(s, 2))): take its batteries out and in, then pair again"
        case let .timedOut(what): "no reply to the \(what)"
        case .disconnected: "the link dropped mid-transaction; nothing was marked read"
        case let .deviceStatus(cmd, s): "the cuff answered the \(cmd) with status 0x\(Hex.digits(s, 2))"
        case let .protocolError(e): e.message
        }
    }
}
