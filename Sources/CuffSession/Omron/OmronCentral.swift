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
    /// `--timeout` (and `--follow`), from the start whatever the stage.
    var timeLimit: SessionTimeLimit
    var discovery: GATTRequestID?
    public private(set) var measurements = 0
    public private(set) var outcome: SessionOutcome?
    var started = false

    var options: OmronSyncOptions
    let utcOffsetSeconds: Int64
    /// Said once at the start (an unknown model and the profile used instead).
    var note: String?
    /// The model the cuff named before discovery (its advert), then Device Information's model number.
    var modelHint: String?
    /// ``modelHint`` as given (before a model number read replaced it).
    let initialModelHint: String?
    /// An unknown model on a cuff that also has the standard Blood Pressure Service hands the link
    /// to the standard session (not when `--protocol omron` forced this one).
    let standardFallback: Bool
    /// The protocols a device without any Omron service is handed to (the GATT cache chose this
    /// session, and another cuff now answers at the address); nil when `--protocol omron` forced it.
    let protocols: CuffProtocolRegistry?
    var startedAt: EventTime?
    /// The session's and the client's actions for one event, kept between events (emptied, their
    /// capacity kept: ``ActionMachine``); an event taken while another one's actions run gets a new array.
    var sessionScratch = ActionBuffer<OmronSession.Action>()
    var clientScratch = ActionBuffer<GATTClientAction>()
    public private(set) var handOver: DiscoveredLink?

    // GATT cache
    /// What an earlier session learned, and how this one uses it (``GATTCacheState``).
    var cache: GATTCacheState
    public var gattCacheUse: GATTCacheUse? { cache.use }
    /// Device Information's model number as read (or as the cache had it), for ``learned``.
    var readValues: [CuffCharacteristic: [UInt8]] = [:]
    var hashCheck: GATTRequestID?
    var hashRead: GATTRequestID?
    var serviceChangedSubscription: GATTRequestID?
    /// The last request submitted, and the last one on handles found wrong: what those answer is ignored.
    var lastRequest: GATTRequestID?
    var staleUpTo: GATTRequestID?
    /// Requests the client had sent when the first reading arrived.
    var requestsBeforeReading: Int?

    /// - Parameter utcOffsetSeconds: seconds east of UTC of the host's local time: the cuff's
    ///   clock holds local time, read and set against `start`'s wall clock plus this.
    /// - Parameter modelForced: `profile` is the user's choice; otherwise discovery's family and
    ///   Device Information's model number (or `modelHint`) pick the profile.
    public init(
        profile: OmronProfile, options: OmronSyncOptions, device: DeviceInfo, utcOffsetSeconds: Int64,
        note: String? = nil,
        modelForced: Bool = true, modelHint: String? = nil, standardFallback: Bool = false, preferredMTU: UInt16 = 247,
        gattCache: GATTCacheMode = .off, protocols: CuffProtocolRegistry? = nil, timeLimit: Duration? = nil,
        follow: Bool = false
    ) {
        self.protocols = protocols
        self.timeLimit = SessionTimeLimit(timeLimit, follow: follow)
        self.profile = profile
        self.modelForced = modelForced
        self.modelHint = modelHint
        initialModelHint = modelHint
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
        cache = GATTCacheState(gattCache, address: device.address)
    }

    /// What this session learned about the cuff, for the GATT cache: the database (discovered or
    /// the cache's), the MTU, the Database Hash and Device Information's model number; nil with the
    /// cache off, before discovery, and after a hand-over to another protocol. Nothing of the
    /// Omron memory is kept: the settings block read each session holds the unread counters and
    /// the clock, which change between sessions, and the records are what a session is for.
    public var learned: LearnedCuff? {
        guard handOver == nil else { return nil }
        return cache.learned(address: device.address, profile: discoveredProfile, mtu: client.mtu, values: readValues)
    }

    /// True when `profile` has an Omron service (of either family).
    static func hasOmronService(_ profile: GATTProfile) -> Bool {
        OmronTransport.allCases.contains { profile.service(BluetoothUUID($0.serviceUUID)!) != nil }
    }

    public var isFinished: Bool { outcome != nil }
    public var protocolID: CuffProtocolID { .omron }
    /// 0 when any reading was handed out, as for every protocol (also when the link then dropped
    /// or the end was refused: the readings were printed and stored; the cuff, not told they were
    /// read, sends them again, and the store keeps them once); else the outcome's own code.
    public var exitCode: Int32 { measurements > 0 ? 0 : (outcome ?? .noResult).exitCode }
    public var stateName: String {
        if let outcome { return "finished (\(outcome.rawValue))" }
        return started ? "syncing" : "discovering"
    }

    /// Local date and time as seconds since 1970 read as UTC (what an Omron clock holds).
    public static func localSeconds(_ at: EventTime, _ utcOffsetSeconds: Int64) -> Int64 {
        let s = at.wallMicros / 1_000_000 - (at.wallMicros % 1_000_000 < 0 ? 1 : 0)
        return s + utcOffsetSeconds
    }
    public var nextDeadline: Timestamp? {
        [sessionDeadline, client.nextDeadline, timeLimit.deadline].compactMap { $0 }.min()
    }

    public mutating func start(at: EventTime, into out: inout [Output]) {
        startedAt = at
        timeLimit.start(at: at.monotonic)
        out.append(.emit(.session(SessionRecord(event: .start, device: device, at: at))))
        guard let known = cache.known else { return discover(at, &out) }
        guard Self.hasOmronService(known.profile) else {
            cache.use = .stale
            out.append(.log("the GATT cache for \(known.address) has no Omron service: discovering"))
            return discover(at, &out)
        }
        if known.databaseHash != nil {
            // Read by UUID: the hash's own handle may have moved with the rest.
            let now = at.monotonic
            return request(\.hashCheck, at, &out) { $0.read(type: .databaseHash, now: now, into: &$1) }
        }
        useCache(known, at, &out)
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
        // The time limit holds whatever the cuff does, also one that answers each frame just
        // before the reply timeout (probe V: `--timeout 10` ran 55 s, the first reading at 40 s).
        // Without a reading by then it is a time-out; after some, the readings stand and the
        // sync stops there (the cuff's counters stay: it sends them again, the store keeps them once).
        if outcome == nil, let (o, why) = timeLimit.expired(at: at.monotonic, readings: measurements) {
            finish(o, why, at, &out)
            out.append(.disconnect)
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
        timeLimit.stop()
        // Why, on stderr too, as the standard session says it (probe V: a refused unlock said
        // only "session ended: protocol_error" there; the reason was in the end record alone).
        if let message { out.append(.log(message)) }
        var end = SessionRecord(
            event: .end, device: device, at: at, outcome: o, measurements: measurements, message: message,
            clockDriftSeconds: session.driftSeconds)
        end.attRequests = client.requestsSent
        end.attRequestsBeforeReading = requestsBeforeReading
        end.gattCache = cache.use
        out.append(.emit(.session(end)))
        out.append(.finished(o))
    }

    /// Submits a GATT procedure with ``clientScratch`` (as ``clientStep(_:_:_:noting:)`` does), keeps its
    /// ID at `record` when one is given, then runs its first actions into `out`.
    mutating func request(
        _ record: WritableKeyPath<OmronCentral, GATTRequestID?>?, _ at: EventTime, _ out: inout [Output],
        _ submit: (inout GATTClient, inout [GATTClientAction]) -> GATTRequestID
    ) {
        clientStep(submit, at, &out) {
            if let record { $0[keyPath: record] = $1 }
            $0.lastRequest = $1
        }
    }

    // MARK: GATT → session

    mutating func gatt(_ actions: [GATTClientAction], _ at: EventTime, _ out: inout [Output]) {
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .completed(id, result):
                if let staleUpTo, id.rawValue <= staleUpTo.rawValue {
                    continue  // a request on handles found wrong since: answered, and ignored
                } else if id == hashCheck {
                    hashCheck = nil
                    hashChecked(result, at, &out)
                } else if id == hashRead {
                    if case let .success(.value(v)) = result { cache.databaseHash = v }
                } else if id == serviceChangedSubscription {
                    continue
                } else if id == discovery {
                    discovery = nil
                    discovered(result, at, &out)
                } else if id == modelRead {
                    modelRead = nil
                    modelNumber(result, at, &out)
                } else if case let .failure(e) = result, client.failure == nil, outcome == nil {
                    if cache.usingCache, GATTCacheState.showsStaleHandle(e),
                        invalidate("a request on a cached handle failed: \(e.message)", at, &out)
                    {
                        continue
                    }
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
        if cache.usingCache,
            handle == discoveredProfile?.characteristic(.serviceChanged, in: .genericAttribute)?.valueHandle
        {
            // Nothing to keep: confirmed at once; the cache's handles may be wrong now.
            clientStep({ $0.confirmIndication(into: &$1) }, at, &out)
            _ = invalidate("the cuff indicated Service Changed", at, &out)
            return
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
        if cache.use != .off { learn(gp, at, &out) }
        begin(gp, at, &out)
    }

    /// The standard session discovered the link and hands it over: carry on with its client.
    public mutating func adopt(_ link: DiscoveredLink, at: EventTime, into out: inout [Output]) {
        client = link.client
        cache.adopted(link)
        startedAt = link.startedAt
        timeLimit.start(at: link.startedAt.monotonic)
        var d = link.device
        if d.model == nil { d.model = profile.id }
        if d.manufacturer == nil { d.manufacturer = "OMRON HEALTHCARE" }
        device = d
        if cache.use != .off { learn(link.profile, at, &out) }
        begin(link.profile, at, &out)
    }

    mutating func begin(_ gp: GATTProfile, _ at: EventTime, _ out: inout [Output]) {
        discoveredProfile = gp
        // Without --model, Device Information's model number (HEM-7361T_ESL) picks the profile;
        // with it, the number is checked against it (``checkForcedModel(_:)``).
        if !modelChecked, let ch = gp.characteristic(BluetoothUUID(0x2A24)) {
            modelChecked = true
            // Read on every connection, the GATT cache notwithstanding: another cuff can answer at
            // the same address (a simulator of another model, a cuff replaced under a kept
            // address), and a profile chosen from the cache's model number would read its memory
            // with the wrong layout.
            let now = at.monotonic
            return request(\.modelRead, at, &out) { $0.read(ch.valueHandle, now: now, into: &$1) }
        }
        let hasOmronService = OmronTransport.allCases.contains { gp.service(BluetoothUUID($0.serviceUUID)!) != nil }
        if !hasOmronService, let protocols, let next = protocols.handOver(from: protocolID, DeviceOffer(profile: gp)) {
            handOver = DiscoveredLink(
                protocolID: next.id, client: client, profile: gp,
                device: DeviceInfo(address: device.address, name: device.name),
                startedAt: startedAt ?? at)
            return out.append(
                .log("discovery shows no Omron service but a \(next.id) device; handing the link to its session"))
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
        if modelForced { checkForcedModel(&out) }
        out.append(
            .log("Omron \(profile.id) (\(profile.transport.rawValue) service, \(profile.pairing.rawValue) pairing)"))
        session = OmronSession(
            profile: profile, options: options, localSeconds: Self.localSeconds(at, utcOffsetSeconds))
        startSession(gp, at, &out)
    }

    mutating func modelNumber(
        _ result: Result<GATTClientResponse, GATTClientError>, _ at: EventTime, _ out: inout [Output]
    ) {
        if case let .failure(e) = result, cache.usingCache, GATTCacheState.showsStaleHandle(e),
            invalidate("the model number at its cached handle failed: \(e.message)", at, &out)
        {
            return
        }
        if case let .success(.value(v)) = result {
            readValues[.modelNumber] = v
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

    /// `--model` names a profile whose memory map is not the one of the model the cuff names
    /// itself (Device Information): its addresses are another model's, so the sync only reads —
    /// no clock written, no record marked read (probe A2: a HEM-7322T read as HEM-7361T gave
    /// garbage readings and had a clock window written outside any of its areas, where a real cuff
    /// keeps calibration data). The readings it gives are what that profile makes of the bytes.
    mutating func checkForcedModel(_ out: inout [Output]) {
        guard let named = modelHint, let own = OmronCatalog.profile(named: named), own.id != profile.id,
            !Self.sameMemoryMap(own, profile)
        else { return }
        options.setTime = false
        options.keepUnread = true
        device.model = profile.id  // (the layout the readings were decoded with, for a store to rebuild them)
        out.append(
            .log(
                "warning: the cuff names itself \(named) (profile \(own.id)), whose memory is laid out otherwise than \(profile.id)'s (--model): reading only, nothing is written to it (no clock set, no record marked read); leave --model out to use its own profile"
            ))
    }

    /// Whether two profiles read and write the same addresses the same way.
    static func sameMemoryMap(_ a: OmronProfile, _ b: OmronProfile) -> Bool {
        a.transport == b.transport && a.layout == b.layout && a.slotSize == b.slotSize && a.users == b.users
            && a.block == b.block && a.settingsRead == b.settingsRead && a.settingsWrite == b.settingsWrite
            && a.unreadSection == b.unreadSection && a.index == b.index && a.clock == b.clock
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

    // MARK: GATT cache

    /// Exchange MTU (once a connection) and full discovery.
    mutating func discover(_ at: EventTime, _ out: inout [Output]) {
        exchangeMTUOnce(at, &out)
        let now = at.monotonic
        request(\.discovery, at, &out) { $0.discover(services: [], now: now, into: &$1) }
    }

    mutating func exchangeMTUOnce(_ at: EventTime, _ out: inout [Output]) {
        guard !cache.mtuExchanged else { return }
        cache.mtuExchanged = true
        let now = at.monotonic
        request(nil, at, &out) { $0.exchangeMTU(now: now, into: &$1) }
    }

    mutating func hashChecked(
        _ result: Result<GATTClientResponse, GATTClientError>, _ at: EventTime, _ out: inout [Output]
    ) {
        // The client itself failed: its `.failed` action says why, once.
        guard let known = cache.known, client.failure == nil else { return }
        switch result {
        case let .success(.value(v)) where cache.hashMatches(v):
            return useCache(known, at, &out)
        case .success:
            cache.use = .stale
            out.append(.log("the cuff's Database Hash changed: discovering its handles again"))
        case let .failure(e):
            if e.code == .securityRefused {
                finish(.securityRefused, "GATT request failed: \(e.message)", at, &out)
                return out.append(.disconnect)
            }
            cache.use = .stale
            out.append(.log("the cuff's Database Hash could not be read (\(e.message)): discovering its handles again"))
        }
        discover(at, &out)
    }

    /// After a discovery with the cache on: the Database Hash read and the Service Changed
    /// subscription, queued before the session's own requests (as ``CuffCentral`` does).
    mutating func learn(_ gp: GATTProfile, _ at: EventTime, _ out: inout [Output]) {
        let followUps = GATTCacheState.followUps(gp)
        let now = at.monotonic
        if let h = followUps.hash {
            request(\.hashRead, at, &out) { $0.read(h.valueHandle, now: now, into: &$1) }
        }
        if let sc = followUps.serviceChanged {
            request(\.serviceChangedSubscription, at, &out) {
                $0.subscribe(sc, notify: false, indicate: true, now: now, into: &$1)
            }
        }
    }

    /// The cache's handles, as if discovery had found them: straight to the subscriptions and
    /// the unlock. The FE4A family carries a whole frame in one notification, so it needs the
    /// larger MTU the cache says the cuff took; the classic one's 16-byte pieces fit the default.
    mutating func useCache(_ known: LearnedCuff, _ at: EventTime, _ out: inout [Output]) {
        cache.hit()
        out.append(.log("using the GATT cache for \(known.address): no discovery"))
        if known.mtu > GATTServer.minimumMTU, known.profile.service(BluetoothUUID(OmronUUID.modernService)!) != nil {
            exchangeMTUOnce(at, &out)
        }
        begin(known.profile, at, &out)
    }

    /// The handles in use proved wrong: forget them and discover again, then start the Omron
    /// session over on the new ones. Only before the first reading (a session started over reads
    /// the same unread records again) and a bounded number of times: false when it does not.
    mutating func invalidate(_ why: String, _ at: EventTime, _ out: inout [Output]) -> Bool {
        guard outcome == nil, measurements == 0, cache.invalidate() else {
            out.append(.log("\(why); not discovering again"))
            return false
        }
        staleUpTo = lastRequest
        discoveredProfile = nil
        handles = [:]
        byHandle = [:]
        started = false
        sessionDeadline = nil
        modelRead = nil
        // The model number is read again at the handle discovery finds (the one read at a cached
        // handle may have been another characteristic's value).
        modelChecked = false
        modelHint = initialModelHint
        out.append(.log("\(why): discovering the cuff's handles again"))
        discover(at, &out)
        return true
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
            case let .clockRefused(status):
                out.append(
                    .log(
                        "the cuff refused the clock write (status 0x\(Hex.digits(status, 2))): its clock stays as it was; the records are read all the same (--no-set-time leaves the clock alone)"
                    ))
            case let .reading(r):
                if requestsBeforeReading == nil { requestsBeforeReading = client.requestsSent }
                measurements += 1
                let record = MeasurementRecord.from(
                    omron: r.reading, profile: profile, user: r.user, slot: r.slot, raw: r.raw, device: device, at: at)
                out.append(.emit(.measurement(record)))
            case let .badRecord(user, slot, e):
                out.append(.log("user \(user) slot \(slot): \(e.message)"))
            case let .countersKept(n):
                out.append(
                    .log(
                        "\(n) record\(n == 1 ? "" : "s") did not decode: the cuff's unread counters are left as they were, so it still counts them unread and the next sync reads them again"
                    ))
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
        case .deviceStatus, .protocolError, .refusedReplies: .protocolError
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
        case let .refusedReplies(what, last):
            "no usable reply to the \(what): each attempt's reply was refused; the last: \(last.message)"
        case .disconnected: "the link dropped mid-transaction; nothing was marked read"
        case let .deviceStatus(cmd, s): "the cuff answered the \(cmd) with status 0x\(Hex.digits(s, 2))"
        case let .protocolError(e): e.message
        }
    }
}
