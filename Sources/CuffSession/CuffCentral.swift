// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// A measurement session over GATT: the ``CuffSessionMachine`` driving a ``GATTClient``.
///
/// Pure: PDUs and time in; PDUs, records and requests to the link out. The same value runs
/// against a real cuff, the simulator, and a recorded capture.
///
/// The standard protocol's central session (``StandardBPSProtocol``): on discovery it hands the
/// link over (``handOver``) when the registry has a protocol that fits the device better.
public struct CuffCentral: CuffProtocolSession {
    public typealias Output = CentralAction

    enum Pending: Sendable, Hashable {
        case mtu
        case discovery
        /// Read By Type of the Database Hash, compared with the cached one before the cache is used.
        case hashCheck
        /// The Database Hash read after discovery, for the cache.
        case hashRead
        /// The Service Changed subscription a session that discovered makes, so the cuff can say later.
        case serviceChangedSubscription
        case read(CuffCharacteristic)
        case write(CuffCharacteristic)
        case subscribe(CuffCharacteristic)
    }

    public private(set) var session: CuffSessionMachine
    public internal(set) var client: GATTClient
    var gattProfile: GATTProfile?
    var byHandle: [UInt16: CuffCharacteristic] = [:]
    var byCharacteristic: [CuffCharacteristic: GATTProfile.Characteristic] = [:]
    var pending: [GATTRequestID: Pending] = [:]
    var securityForClient = false
    /// An indication that came before discovery ended (its handle not known yet): unconfirmed
    /// until discovery tells what it is.
    var heldIndication: (handle: UInt16, value: [UInt8])?
    public private(set) var handOver: DiscoveredLink?

    /// The GATT cache: what an earlier session learned, and how this one uses it.
    var cache: GATTCacheState
    /// How this session used the cache so far (the end record's `gatt_cache`).
    public var cacheUse: GATTCacheUse { cache.use }
    public var gattCacheUse: GATTCacheUse? { cache.use }
    var known: LearnedCuff? { cache.known }
    var usingCache: Bool { cache.usingCache }
    /// The planned reads' values (from the cuff, or from the cache), for ``learned``.
    var readValues: [CuffCharacteristic: [UInt8]] = [:]
    /// Requests the client had sent when the first reading arrived.
    var requestsBeforeReading: Int?
    /// The session's and the client's actions for one event, kept between events (emptied, their
    /// capacity kept: ``ActionMachine``); an event taken while another one's actions run gets a new array.
    var sessionScratch = ActionBuffer<CuffSessionMachine.Action>()
    var clientScratch = ActionBuffer<GATTClientAction>()

    public init(configuration: CuffSessionConfiguration, preferredMTU: UInt16 = 247) {
        session = CuffSessionMachine(configuration: configuration)
        client = GATTClient(preferredMTU: preferredMTU)
        cache = GATTCacheState(configuration.gattCache, address: configuration.address)
    }

    /// What this session learned about the cuff, for the GATT cache: set once discovery (or the
    /// cache) gave the handles, with the values read since; nil with the cache off, before that,
    /// and after a hand-over to another protocol.
    public var learned: LearnedCuff? {
        guard handOver == nil else { return nil }
        return cache.learned(
            address: session.configuration.address, profile: gattProfile, mtu: client.mtu, values: readValues)
    }

    public var state: CuffSessionMachine.State { session.state }
    public var isFinished: Bool { session.isFinished }
    public var protocolID: CuffProtocolID { .bps }
    public var outcome: SessionOutcome? {
        if case let .done(o) = session.state { return o }
        return nil
    }
    public var exitCode: Int32 { session.exitCode }
    public var measurements: Int { session.measurements }
    public var stateName: String { session.state.name }
    public var nextDeadline: Timestamp? { [session.nextDeadline, client.nextDeadline].compactMap { $0 }.min() }

    /// The link is up: start the session.
    public mutating func start(at: EventTime, into out: inout [Output]) {
        sessionStep(.start(at), at, &out)
        sessionStep(.connected(at), at, &out)
    }

    public mutating func receive(_ pdu: [UInt8], at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.receive(pdu, now: now, into: &$1) }, at, &out)
    }

    public mutating func tick(at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.tick(now: now, into: &$1) }, at, &out)
        sessionStep(.tick(at), at, &out)
    }

    public mutating func disconnected(_ why: String?, at: EventTime, into out: inout [Output]) {
        sessionStep(.disconnected(why, at), at, &out)
    }

    public mutating func stop(at: EventTime, into out: inout [Output]) {
        sessionStep(.stopRequested(at), at, &out)
    }

    public mutating func securityRaised(_ level: SecurityLevel, at: EventTime, into out: inout [Output]) {
        if securityForClient {
            securityForClient = false
            let now = at.monotonic
            return clientStep({ $0.securityRaised(level: level, now: now, into: &$1) }, at, &out)
        }
        sessionStep(.securityRaised(level, at), at, &out)
    }

    public mutating func securityRefused(_ why: String, at: EventTime, into out: inout [Output]) {
        if securityForClient {
            securityForClient = false
            let now = at.monotonic
            return clientStep({ $0.securityRefused(now: now, into: &$1) }, at, &out)
        }
        sessionStep(.securityRefused(why, at), at, &out)
    }

    // MARK: - Scratch arrays

    /// The session takes `event` with ``sessionScratch`` (emptied; an event taken while another
    /// one's actions run gets a new array), and its actions run into `out`.
    mutating func sessionStep(_ event: CuffSessionMachine.Event, _ at: EventTime, _ out: inout [Output]) {
        var actions = sessionScratch.take()
        session.handle(event, into: &actions)
        run(actions, at, &out)
        sessionScratch.giveBack(&actions)
    }

    // MARK: - Session actions → GATT procedures

    /// Submits a GATT procedure with ``clientScratch`` (as ``clientStep(_:_:_:noting:)`` does), notes
    /// what it is for, then runs its first actions (an immediate completion among them) into `out`.
    mutating func request(
        _ what: Pending, _ at: EventTime, _ out: inout [Output],
        _ submit: (inout GATTClient, inout [GATTClientAction]) -> GATTRequestID
    ) {
        clientStep(submit, at, &out) { $0.pending[$1] = what }
    }

    mutating func run(_ actions: [CuffSessionMachine.Action], _ at: EventTime, _ out: inout [Output]) {
        let now = at.monotonic
        if requestsBeforeReading == nil, session.resultsReceived > 0 { requestsBeforeReading = client.requestsSent }
        for a in actions {
            switch a {
            case .connect:
                break  // the driver hands us a connected link
            case let .raiseSecurity(l):
                securityForClient = false
                out.append(.raiseSecurity(l))
            case .discover:
                if let known {
                    if known.databaseHash != nil {
                        // Read by UUID: the hash's own handle may have moved with the rest.
                        request(.hashCheck, at, &out) { $0.read(type: .databaseHash, now: now, into: &$1) }
                    } else {
                        useCache(known, at, &out)
                    }
                } else {
                    discover(at, &out)
                }
            case let .read(c):
                if cacheUse == .hit, let v = known?.values[c] {
                    // Read on an earlier connection: a value that does not change.
                    sessionStep(.readCompleted(c, v, at), at, &out)
                    continue
                }
                guard let ch = byCharacteristic[c] else {
                    sessionStep(.requestFailed(c, "not on this device", at), at, &out); continue
                }
                request(.read(c), at, &out) { $0.read(ch.valueHandle, now: now, into: &$1) }
            case let .write(c, v):
                guard let ch = byCharacteristic[c] else {
                    sessionStep(.requestFailed(c, "not on this device", at), at, &out); continue
                }
                request(.write(c), at, &out) { $0.write(ch.valueHandle, v, now: now, into: &$1) }
            case let .subscribe(c, indicate):
                guard let ch = byCharacteristic[c] else {
                    sessionStep(.requestFailed(c, "not on this device", at), at, &out); continue
                }
                request(.subscribe(c), at, &out) {
                    $0.subscribe(ch, notify: !indicate, indicate: indicate, now: now, into: &$1)
                }
            case let .emit(o):
                guard case var .session(s) = o, s.event == .end else {
                    out.append(.emit(o))
                    continue
                }
                s.attRequests = client.requestsSent
                s.attRequestsBeforeReading = requestsBeforeReading
                s.gattCache = cacheUse
                out.append(.emit(.session(s)))
            case .confirmIndication:
                clientStep({ $0.confirmIndication(into: &$1) }, at, &out)
            case .disconnect:
                out.append(.disconnect)
            case let .log(s):
                out.append(.log(s))
            case let .finished(o):
                out.append(.finished(o))
            }
        }
    }

    // MARK: - GATT actions → session events

    mutating func gatt(_ actions: [GATTClientAction], _ at: EventTime, _ out: inout [Output]) {
        for a in actions {
            switch a {
            case let .send(pdu):
                out.append(.send(pdu))
            case let .completed(id, result):
                guard let p = pending.removeValue(forKey: id) else { continue }
                completed(p, result, at, &out)
            case let .notification(handle, value):
                if let c = byHandle[handle] {
                    sessionStep(.notification(c, value, at), at, &out)
                } else {
                    out.append(
                        .log("notification from unknown handle 0x\(String(handle, radix: 16)): \(Hex.encode(value))"))
                }
            case let .indication(handle, value):
                indication(handle, value, at, &out)
            case let .raiseSecurity(level):
                securityForClient = true
                out.append(.log("the cuff asks for more security; raising the link to \(level)"))
                out.append(.raiseSecurity(level))
            case let .failed(error):
                if error.code == .timeout {
                    sessionStep(.transactionTimedOut(at), at, &out)
                } else if error.code == .securityRefused {
                    sessionStep(.securityRefused(error.message, at), at, &out)
                } else {
                    sessionStep(.protocolError(error.message, at), at, &out)
                }
            }
        }
    }

    /// An indication is confirmed only once what it carried was kept (a measurement, whatever
    /// characteristic instance it came from) or when it is known to carry no reading: never
    /// "confirmed and dropped", as a cuff deletes what was confirmed.
    mutating func indication(_ handle: UInt16, _ value: [UInt8], _ at: EventTime, _ out: inout [Output]) {
        let h = "0x" + String(handle, radix: 16)
        if session.isFinished {
            // Nothing is kept any more: the cuff keeps it and sends it again next time.
            return out.append(
                .log("indication from handle \(h) after the session ended: not confirmed, so the cuff keeps it"))
        }
        if let c = byHandle[handle] {
            return self.sessionStep(.indication(c, value, at), at, &out)
        }
        if handle == gattProfile?.characteristic(.serviceChanged, in: .genericAttribute)?.valueHandle {
            // Nothing to keep: confirmed at once. With the cache's handles in use, they may be wrong now.
            // (The confirmation's actions are only PDUs to send, so the log may go first.)
            guard usingCache else {
                out.append(.log("the cuff indicated Service Changed (handles discovered on this connection)"))
                return clientStep({ $0.confirmIndication(into: &$1) }, at, &out)
            }
            clientStep({ $0.confirmIndication(into: &$1) }, at, &out)
            return invalidate("the cuff indicated Service Changed", at, &out)
        }
        guard let profile = gattProfile else {
            heldIndication = (handle, value)
            return out.append(
                .log(
                    "indication from handle \(h) before discovery ended: held, unconfirmed, until it is known what it is"
                ))
        }
        if let ch = profile.characteristic(valueHandle: handle) {
            // A characteristic that carries no reading (Service Changed, a vendor's): nothing to keep.
            out.append(.log("indication from \(ch.uuid) at handle \(h) confirmed (it carries no reading)"))
            return clientStep({ $0.confirmIndication(into: &$1) }, at, &out)
        }
        out.append(.log("indication from handle \(h), which is no characteristic of this device: not confirmed"))
    }

    /// A vendor protocol's session discovered the link and gives it back (an Omron cuff of a model
    /// no profile knows, which has the standard service too): the session starts (its start record
    /// is out already) and goes on from the discovered database with the same client.
    public mutating func adopt(_ link: DiscoveredLink, at: EventTime, into out: inout [Output]) {
        client = link.client
        cache.adopted(link)
        var discover = false
        for a in session.handle(.start(link.startedAt)) + session.handle(.connected(at)) {
            switch a {
            case .emit(.session): continue
            case .discover: discover = true
            default: run([a], at, &out)
            }
        }
        // (With security to raise first, discovery runs again once it is up.)
        if discover { use(link.profile, at, &out) }
    }

    mutating func completed(
        _ p: Pending, _ result: Result<GATTClientResponse, GATTClientError>, _ at: EventTime, _ out: inout [Output]
    ) {
        // When the client itself failed (timeout, protocol violation), every queued procedure fails
        // first; the `.failed` action that follows says why, once.
        if case .failure = result, client.failure != nil { return }
        switch (p, result) {
        case (.mtu, _):
            return
        case let (.hashCheck, .success(.value(v))):
            guard let known else { return }
            if cache.hashMatches(v) { return useCache(known, at, &out) }
            out.append(.log("the cuff's Database Hash changed: discovering its handles again"))
            discover(at, &out)
        case let (.hashCheck, .failure(e)):
            if e.code == .securityRefused { return sessionStep(.securityRefused(e.message, at), at, &out) }
            cache.use = .stale
            out.append(
                .log("the cuff's Database Hash could not be read (\(e.message)): discovering its handles again"))
            discover(at, &out)
        case let (.hashRead, .success(.value(v))):
            cache.databaseHash = v
        case (.hashRead, .failure), (.serviceChangedSubscription, _):
            return
        case let (.discovery, .success(.profile(profile))):
            let configuration = session.configuration
            if configuration.forcedProtocol == nil, configuration.protocols.protocols.count > 1 {
                var offer = configuration.offer
                offer.profile = profile
                if let next = configuration.protocols.handOver(from: protocolID, offer) {
                    handOver = DiscoveredLink(
                        protocolID: next.id, client: client, profile: profile, device: session.device,
                        startedAt: session.startedAt ?? at)
                    if configuration.logs {
                        out.append(.log("discovery shows a \(next.id) device; handing the link to its session"))
                    }
                    return
                }
            }
            if cacheUse != .off { learn(profile, at, &out) }
            use(profile, at, &out)
        case let (.discovery, .failure(e)):
            if e.code == .securityRefused { return sessionStep(.securityRefused(e.message, at), at, &out) }
            return sessionStep(.protocolError("discovery failed: \(e.message)", at), at, &out)
        case let (.read(c), .success(.value(v))):
            if CuffSessionMachine.plannedReads.contains(c) { readValues[c] = v }
            return sessionStep(.readCompleted(c, v, at), at, &out)
        case let (.write(c), .success):
            return sessionStep(.writeCompleted(c, at), at, &out)
        case let (.subscribe(c), .success):
            return sessionStep(.subscribed(c, at), at, &out)
        case let (.read(c), .failure(e)), let (.write(c), .failure(e)), let (.subscribe(c), .failure(e)):
            if e.code == .securityRefused { return sessionStep(.securityRefused(e.message, at), at, &out) }
            if usingCache,
                GATTCacheState.showsStaleHandle(e)
            {
                return invalidate("\(c.rawValue) at its cached handle failed: \(e.message)", at, &out)
            }
            return sessionStep(.requestFailed(c, e.message, at), at, &out)
        default:
            out.append(.log("unexpected GATT completion for \(p)"))
        }
    }

    // MARK: - GATT cache

    /// Exchange MTU (once a connection) and full discovery.
    mutating func discover(_ at: EventTime, _ out: inout [Output]) {
        exchangeMTUOnce(at, &out)
        let now = at.monotonic
        request(.discovery, at, &out) { $0.discover(services: [], now: now, into: &$1) }
    }

    /// Exchange MTU, unless this connection did already.
    mutating func exchangeMTUOnce(_ at: EventTime, _ out: inout [Output]) {
        guard !cache.mtuExchanged else { return }
        cache.mtuExchanged = true
        let now = at.monotonic
        request(.mtu, at, &out) { $0.exchangeMTU(now: now, into: &$1) }
    }

    /// After a discovery with the cache on: the Database Hash read (to check the cache with next
    /// time) and the Service Changed subscription (so the cuff can say when its handles change),
    /// queued before the session's own requests.
    mutating func learn(_ profile: GATTProfile, _ at: EventTime, _ out: inout [Output]) {
        let followUps = GATTCacheState.followUps(profile)
        if let h = followUps.hash {
            let now = at.monotonic
            request(.hashRead, at, &out) { $0.read(h.valueHandle, now: now, into: &$1) }
        }
        if let sc = followUps.serviceChanged {
            let now = at.monotonic
            request(.serviceChangedSubscription, at, &out) {
                $0.subscribe(sc, notify: false, indicate: true, now: now, into: &$1)
            }
        }
    }

    /// The cache's handles, as if discovery had found them (and its values, as if read: ``run(_:_:)``).
    mutating func useCache(_ known: LearnedCuff, _ at: EventTime, _ out: inout [Output]) {
        cache.hit()
        if session.configuration.logs { out.append(.log("using the GATT cache for \(known.address): no discovery")) }
        let mapped = CuffCentral.map(known.profile)
        // A value over 20 bytes (BPS 1.1's enhanced and record characteristics) needs the larger MTU.
        let large: [CuffCharacteristic] = [
            .enhancedBloodPressureMeasurement, .enhancedIntermediateCuffPressure, .bloodPressureRecord,
        ]
        if known.mtu > GATTServer.minimumMTU, large.contains(where: { mapped.profile.has($0) }) {
            exchangeMTUOnce(at, &out)
        }
        use(known.profile, at, &out)
    }

    /// Maps `profile` and hands it to the session (again, after a rediscovery).
    mutating func use(_ profile: GATTProfile, _ at: EventTime, _ out: inout [Output]) {
        gattProfile = profile
        let mapped = CuffCentral.map(profile)
        byHandle = mapped.byHandle
        byCharacteristic = mapped.byCharacteristic
        let event: CuffSessionMachine.Event =
            session.state == .discovering ? .discovered(mapped.profile, at) : .rediscovered(mapped.profile, at)
        sessionStep(event, at, &out)
        if let held = heldIndication {
            heldIndication = nil
            indication(held.handle, held.value, at, &out)
        }
    }

    /// The handles in use proved wrong: forget them and discover again; the session configures
    /// again on the new ones (results received meanwhile are kept).
    mutating func invalidate(_ why: String, _ at: EventTime, _ out: inout [Output]) {
        guard !session.isFinished, cache.invalidate() else {
            return out.append(.log("\(why); not discovering again"))
        }
        gattProfile = nil
        byHandle = [:]
        byCharacteristic = [:]
        // A request on the old handles still on the air is answered, and ignored.
        pending = pending.filter { $0.value == .mtu }
        out.append(.log("\(why): discovering the cuff's handles again"))
        discover(at, &out)
    }

    /// Our vendor control point's UUID, parsed once.
    public static let controlPointUUID = BluetoothUUID(CuffControl.controlPointUUID)!
    /// Device families' start characteristics (QardioArm's), parsed once.
    static let vendorStarts: [(uuid: BluetoothUUID, start: QuirkProfile.VendorStart)] = QuirkProfile.all.compactMap {
        p in
        p.vendorStart.flatMap { v in BluetoothUUID(v.characteristicUUID).map { ($0, v) } }
    }

    /// Reduces a discovered GATT profile to the characteristics a cuff session uses.
    public static func map(_ profile: GATTProfile) -> (
        profile: CuffProfile, byHandle: [UInt16: CuffCharacteristic],
        byCharacteristic: [CuffCharacteristic: GATTProfile.Characteristic]
    ) {
        // Sized once (a cuff has a dozen characteristics): no rehashing while they are added.
        let count = profile.services.reduce(0) { $0 + $1.characteristics.count }
        var chars = [CuffCharacteristic: CuffProperties](minimumCapacity: count)
        var byHandle = [UInt16: CuffCharacteristic](minimumCapacity: count)
        var byChar = [CuffCharacteristic: GATTProfile.Characteristic](minimumCapacity: count)
        let control = CuffCentral.controlPointUUID
        var vendorStart: QuirkProfile.VendorStart?
        for s in profile.services {
            for ch in s.characteristics {
                let c: CuffCharacteristic?
                if let u = ch.uuid.uuid16 {
                    c = CuffCharacteristic(uuid16: u)
                } else if ch.uuid == control {
                    c = .cuffControl
                } else if let v = vendorStarts.first(where: { $0.uuid == ch.uuid }) {
                    c = .cuffControl
                    if byChar[.cuffControl] == nil { vendorStart = v.start }
                } else {
                    c = nil
                }
                guard let c else { continue }
                // Every instance's values are read as what they are (a second Blood Pressure
                // Measurement's indication is a measurement too); the first is the one used.
                byHandle[ch.valueHandle] = c
                guard byChar[c] == nil else { continue }
                chars[c] = CuffProperties(rawValue: ch.properties.rawValue)
                byChar[c] = ch
            }
        }
        let hasBPS = profile.service(BluetoothUUID(BPSUUID.bloodPressureService)) != nil
        var cuff = CuffProfile(hasBloodPressureService: hasBPS, characteristics: chars)
        cuff.vendorStart = vendorStart
        return (cuff, byHandle, byChar)
    }
}
