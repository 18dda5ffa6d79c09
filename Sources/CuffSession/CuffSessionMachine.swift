// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import Omron

/// Options for one measurement session.
public struct CuffSessionConfiguration: Sendable {
    /// Where the cuff is (address, socket path, `simulated`); goes into every record.
    public var address: String
    /// Name seen while scanning, if any.
    public var advertisedName: String?
    /// Security to ask for right after connecting (`--security`); `.low` asks for nothing.
    public var security: SecurityLevel = .low
    /// Send the start command when the cuff has one (`--start`).
    public var sendStart = false
    /// Keep the session open for further measurements (`--follow`).
    public var follow = false
    /// Give up when no result arrived this long after connecting (`--timeout`); nil waits forever.
    public var timeout: Duration? = .seconds(300)
    /// After the first result, wait this long for the stored records that may follow.
    public var settle: Duration = .seconds(2)
    /// A quirk profile chosen by the user; nil picks one from the device's name and model.
    public var quirk: QuirkProfile?
    /// Write Current Time when the cuff lets us (time sync).
    public var setTime = true
    /// Seconds east of UTC of the host's local time, for the Current Time write.
    public var localUTCOffsetSeconds: Int64 = 0
    /// Ask a BPS 1.1 cuff for its stored records through RACP.
    public var requestStoredRecords = true
    /// Deduplication keys of records already kept (from a store).
    public var knownRecordKeys: Set<String> = []
    /// Subscribe to the cuff pressure (progress records). A collector that keeps only results
    /// leaves it off: the cuff then sends nothing while it measures, and a result after the
    /// post-subscription burst counts as live.
    public var followCuffPressure = true
    /// Highest BPS 1.1 record sequence number already kept, to ask only for newer ones.
    public var lastSequenceNumber: UInt16?
    /// A cuff that sends nothing this long after subscription is considered done sending stored records.
    public var storedBurstWindow: Duration = .milliseconds(1500)
    /// Observer mode (replaying a capture): the machine follows the requests a third party was seen
    /// making instead of its own plan. A completion that matches a later step of the plan skips the
    /// steps before it (the observed client did not make them); one that matches no step still
    /// takes effect (a read still fills in the device, a RACP write still starts a stored-record
    /// report); and a step not observed within ``observerStepWindow`` ends the plan, so the
    /// machine never waits for a request the observed client never made. Requests it returns are
    /// only its expectations; a replay driver ignores them.
    public var observer = false
    /// In observer mode, how long to wait for the next planned step before giving the plan up.
    public var observerStepWindow: Duration = .milliseconds(1500)
    /// Hand out `.log` actions. A driver that shows none (a quiet replay) turns this off, and
    /// their text is never built.
    public var logs = true
    /// The cuff protocols to choose from (``CuffProtocolRegistry/builtIn`` unless a library user
    /// or a test registers its own).
    public var protocols: CuffProtocolRegistry = .builtIn
    /// The protocol the user chose (`--protocol`); nil chooses from what the device offers.
    public var forcedProtocol: CuffProtocolID?
    /// Omron: the model profile to use (`--model`); nil picks it from what the cuff reports.
    public var omronModel: String?
    /// Omron: which records, whether to mark them read, the key (`--keep-unread`, `--all-records`,
    /// `--omron-key`; its `setTime` is ``setTime``).
    public var omronSync = OmronSyncOptions()
    /// What the device advertised before the connection (a scan's report), for choosing its
    /// protocol; nil knows only ``advertisedName``.
    public var advertisement: DeviceOffer?
    /// The GATT cache: off, or on with what an earlier session learned about this cuff (its
    /// handles, Device Information, features). ``CuffCentral`` then skips discovery and the reads,
    /// and holds what it learned in ``CuffCentral/learned`` for the edge to keep.
    public var gattCache: GATTCacheMode = .off

    /// What is known of the device before connecting: ``advertisement``, with ``advertisedName``.
    public var offer: DeviceOffer {
        var o = advertisement ?? DeviceOffer()
        if o.name == nil { o.name = advertisedName }
        return o
    }

    public init(address: String) { self.address = address }
}

/// The session a user sees: connect, secure, discover, configure, wait for the cuff, follow the
/// measurement, hand out results, end — as a value that takes events and returns actions.
///
/// The driver executes actions in order. In particular `.emit` comes before `.confirmIndication`:
/// a result is handed to every sink (and made durable there) before the cuff hears it arrived.
public struct CuffSessionMachine: ActionMachine, Sendable {
    public enum State: Sendable, Hashable {
        case idle
        case connecting
        case securing
        case discovering
        case configuring
        case receivingStoredRecords
        case ready
        case measuring(MeasurementPhase)
        case result
        case stopping
        case done(SessionOutcome)

        public var name: String {
            switch self {
            case .idle: "idle"
            case .connecting: "connecting"
            case .securing: "securing"
            case .discovering: "discovering"
            case .configuring: "configuring"
            case .receivingStoredRecords: "receiving_stored_records"
            case .ready: "ready"
            case let .measuring(p): "measuring (\(p.rawValue))"
            case .result: "result"
            case .stopping: "stopping"
            case let .done(o): o == .stopped ? "stopped" : o == .completed ? "done" : o.rawValue
            }
        }

        @inlinable public var isFinal: Bool {
            if case .done = self { return true }
            return false
        }
    }

    public enum Event: Sendable, Hashable {
        case start(EventTime)
        case connected(EventTime)
        case connectionFailed(String, EventTime)
        case securityRaised(SecurityLevel, EventTime)
        case securityRefused(String, EventTime)
        case discovered(CuffProfile, EventTime)
        /// The handles in use proved wrong (the cuff's database changed) and discovery ran again
        /// mid-session: the configuration starts over on the new profile; results kept so far stay.
        case rediscovered(CuffProfile, EventTime)
        case readCompleted(CuffCharacteristic, [UInt8], EventTime)
        case writeCompleted(CuffCharacteristic, EventTime)
        /// Observer mode: the value of a write request seen in the capture (before its
        /// ``writeCompleted(_:_:)``); a live session knows what it wrote.
        case requestWritten(CuffCharacteristic, [UInt8], EventTime)
        case subscribed(CuffCharacteristic, EventTime)
        /// A request failed with an ATT error (code) or a local reason.
        case requestFailed(CuffCharacteristic, String, EventTime)
        case notification(CuffCharacteristic, [UInt8], EventTime)
        case indication(CuffCharacteristic, [UInt8], EventTime)
        case disconnected(String?, EventTime)
        /// The GATT layer gave up: malformed PDUs, wrong answers, a hostile peer.
        case protocolError(String, EventTime)
        /// The 30 s ATT transaction timeout expired.
        case transactionTimedOut(EventTime)
        case stopRequested(EventTime)
        case tick(EventTime)
    }

    public enum Action: Sendable, Hashable {
        case connect
        case raiseSecurity(SecurityLevel)
        case discover
        case read(CuffCharacteristic)
        case write(CuffCharacteristic, [UInt8])
        case subscribe(CuffCharacteristic, indicate: Bool)
        case emit(SessionOutput)
        case confirmIndication
        case disconnect
        case log(String)
        /// The session is over; the driver closes the link and exits with the outcome.
        case finished(SessionOutcome)
    }

    /// Where the session is, with the data only that stage has: the measurement being followed
    /// (its phase, start and peak) lives in `.measuring` (and in `.stopping`, when the user
    /// stopped in the middle of one), and exists nowhere else; the settle window after a live
    /// result in `.result` (and `.stopping`), the stop's deadline in `.stopping`.
    @usableFromInline enum Stage: Sendable {
        case idle
        case connecting
        case securing
        case discovering
        case configuring
        case receivingStoredRecords
        case ready
        case measuring(Measurement)
        /// A live result arrived. `settle`: until when the stored records that may follow it are
        /// awaited (nil once that passed, in follow mode).
        case result(settle: Timestamp?)
        case stopping(Stopping)
        case done(SessionOutcome)

        /// The settle window's end after a live result, if one runs.
        @inlinable var settleDeadline: Timestamp? {
            switch self {
            case let .result(settle): settle
            case let .stopping(s): s.settle
            default: nil
            }
        }

        /// When the stop gives up waiting for the cuff.
        @inlinable var stopDeadline: Timestamp? {
            if case let .stopping(s) = self { return s.deadline }
            return nil
        }
    }

    /// The user asked to stop: the measurement that was under way (if any), when the stop gives up
    /// waiting for the cuff's answer, and the settle window of a result that came before.
    @usableFromInline struct Stopping: Sendable {
        var measurement: Measurement?
        @usableFromInline var deadline: Timestamp
        @usableFromInline var settle: Timestamp?
    }

    /// The configuration step waiting for its answer; in observer mode, with when the plan gives
    /// up waiting for the observed client to make it.
    @usableFromInline struct Pending: Sendable {
        var step: Step
        @usableFromInline var observerDeadline: Timestamp?

        init(step: Step, observerDeadline: Timestamp? = nil) {
            self.step = step
            self.observerDeadline = observerDeadline
        }
    }

    /// A measurement in progress, as its cuff pressure shows it.
    @usableFromInline struct Measurement: Sendable {
        var phase: MeasurementPhase = .inflating
        /// When its first cuff-pressure value arrived.
        var start: Timestamp
        /// The highest pressure so far, in mmHg.
        var peak: Double?
    }

    @usableFromInline var stage: Stage = .idle

    public var state: State {
        switch stage {
        case .idle: .idle
        case .connecting: .connecting
        case .securing: .securing
        case .discovering: .discovering
        case .configuring: .configuring
        case .receivingStoredRecords: .receivingStoredRecords
        case .ready: .ready
        case let .measuring(m): .measuring(m.phase)
        case .result: .result
        case .stopping: .stopping
        case let .done(o): .done(o)
        }
    }

    /// The session is over (``state`` is `.done`), without building the state.
    @inlinable public var isFinished: Bool {
        if case .done = stage { return true }
        return false
    }

    /// Whether a cuff-pressure value now (``progress(notified:_:at:)``) leaves ``nextDeadline``
    /// as it is: mid-measurement with no burst window open, the value changes neither (it only
    /// clears the burst window and keeps the stage measuring). A replay then need not ask for
    /// the deadline again (about 60 instructions a notification).
    @inlinable public var progressKeepsDeadline: Bool {
        guard burstDeadline == nil, case .measuring = stage else { return false }
        return true
    }

    var isStopping: Bool {
        if case .stopping = stage { return true }
        return false
    }

    /// The measurement being followed, if any (cuff pressure seen since the last live result).
    var measurement: Measurement? {
        switch stage {
        case let .measuring(m): m
        case let .stopping(s): s.measurement
        default: nil
        }
    }

    /// The session options.
    @inlinable public var configuration: CuffSessionConfiguration { settings.value }
    /// ``configuration``, held by reference: a machine is copied whole (a replay starts each
    /// session as a copy of a fresh machine) and destroyed whole, and the configuration's two
    /// dozen references were each retained and released again every time.
    @usableFromInline let settings: Settings

    /// An unchanging configuration, shared.
    @usableFromInline final class Settings: Sendable {
        @usableFromInline let value: CuffSessionConfiguration
        /// `value.quirk != nil` (testing the optional profile in place copied it).
        let quirkChosen: Bool
        init(_ value: CuffSessionConfiguration) {
            self.value = value
            quirkChosen = value.quirk != nil
        }
    }
    public private(set) var device: DeviceInfo
    public private(set) var profile: CuffProfile?
    public private(set) var measurements = 0
    /// Results received, new or already kept.
    public internal(set) var resultsReceived = 0
    /// Live (not stored) results.
    public private(set) var liveResults = 0
    /// Results that arrived but were kept already (the store's, or earlier in this session): not
    /// new, yet a session that got only these did get results.
    public private(set) var repeats = 0
    /// Marker records skipped (``QuirkProfile/Behaviour/skipsNaNMarkers``): the cuff has begun
    /// sending its buffer, and its hang-up after it ends the session as completed.
    var markersSkipped = 0
    /// The earliest time the driver must send a `.tick`.
    /// Inlinable, so a caller holding the machine in place (an observer's field) reads the
    /// deadlines where they are instead of copying the whole machine to call a getter.
    // (Always inlined: called out of line on a machine held in place, as a replay's observers hold
    // theirs, it first copied the whole machine: about 1 KB and a retain per field, before every PDU.)
    @inlinable @inline(__always) public var nextDeadline: Timestamp? {
        func earlier(_ a: Timestamp?, _ b: Timestamp?) -> Timestamp? {
            guard let a else { return b }
            guard let b else { return a }
            return b < a ? b : a
        }
        // The stage's own deadlines only in the two stages that have any: taking them from the
        // others too copied the stage out of the machine (a replay asks before every PDU).
        let staged: Timestamp?
        switch stage {
        case .result, .stopping: staged = earlier(stage.settleDeadline, stage.stopDeadline)
        default: staged = nil
        }
        return earlier(earlier(overallDeadline, staged), earlier(burstDeadline, observerStepDeadline))
    }

    /// The configuration plan; `steps[nextStep...]` are still to come (a cursor: no array
    /// shifting per step).
    var steps: [Step] = []
    var nextStep = 0
    /// The configuration's windows in nanoseconds, converted once: `Duration`'s own arithmetic
    /// goes through 128-bit attoseconds, and most events set a deadline from one of these.
    let settleNanoseconds: Int64
    let burstNanoseconds: Int64
    let stepNanoseconds: Int64
    /// The step under way, with its observer deadline.
    @usableFromInline var pending: Pending?
    public internal(set) var startedAt: EventTime?
    /// The time limit (`--timeout`), from the start to the end whatever the stage.
    @usableFromInline var overallDeadline: Timestamp?
    /// The window after the result subscription in which a cuff sends what it stored. It runs
    /// alongside the stages (the plan goes on meanwhile, a measurement may start), so it is not
    /// one stage's data.
    @usableFromInline var burstDeadline: Timestamp?
    @inlinable var observerStepDeadline: Timestamp? { pending?.observerDeadline }
    /// A result indicated while the plan's reads (name, model, serial …) are still to come (a
    /// bonded cuff that kept its subscription indicates at once): held, unconfirmed, until they
    /// are done, so that it is decoded with the quirk profile they pick and names the device as
    /// the later ones do (probe O: a BM85's reading came out with the standard layout, pulse
    /// -20480000, and under the address instead of the serial). The cuff sends no other
    /// indication before it is confirmed.
    var heldResult: (characteristic: CuffCharacteristic, value: [UInt8], at: EventTime)?
    /// Deduplication keys of the records kept: the store's (`knownRecordKeys`), then this
    /// session's. A session's few go in a short array first (compared, not hashed: a session
    /// usually has one or two), then into the set once there are more.
    var seenKeys: Set<String>
    var recentKeys: [String] = []
    static let recentKeysLimit = 8
    /// The session's first kept record while it is the only one and no key is known (a session
    /// usually has one result): its key is made only when another record comes to compare with
    /// it. (Making the key cost about 1,700 instructions a result, for a comparison that never
    /// came.)
    var unkeyedFirst: MeasurementRecord?
    var recordAssembler = RecordAssembler()
    /// Record warnings (segments out of sequence, malformed records) so far: the first
    /// ``recordWarningLimit`` are said, the rest counted and summed up at the end (probe W: a cuff
    /// that sent one stray segment per confirmation, without end, wrote 36 MB of stderr in 10 s).
    var recordWarnings = 0
    static let recordWarningLimit = 20
    var quirks: QuirkProfile.Options = []
    /// The device family's profile in use (forced, or matched from the name, model or control
    /// characteristic), if any: its options are ``quirks``, its behaviour changes the session.
    public private(set) var activeProfile: QuirkProfile?
    /// A RACP report was asked for (or observed) and its response has not come: the plan waits
    /// for it, whatever the stage (a measurement may run meanwhile).
    var racpInProgress = false
    /// What the next RACP report asks for. After the mark (``CuffSessionConfiguration/lastSequenceNumber``)
    /// found no records, the last record: a cuff whose numbering started again (reset, new
    /// batteries, past 65535) holds new readings below the mark, which would stay on it for good.
    /// When that last record lies below the mark, all records.
    enum RACPAsk: Equatable { case afterMark, lastRecord, all }
    var racpAsk = RACPAsk.afterMark
    /// The sequence number of the stored record that came last (read while asking for the last record).
    var lastRecordSequence: UInt16?
    /// Observer mode: the mark the observed client asked for records after (its `≥ N` request),
    /// so a replay leaves out what the live session left out.
    var observedMark: UInt16?
    /// ``askRACPAgain(_:)`` inserted a request, sent once the response is confirmed.
    var racpAskDue = false
    /// Records of the RACP report in progress that did not arrive whole (segments out of sequence,
    /// a malformed segment or record). The mark the next session asks after is the highest number
    /// kept, so one dropped below it would stay on the cuff for good (probe W): the report is asked
    /// for once more (``racpAskedAgainForDrops``), and what came whole is not emitted twice.
    var racpDrops = 0
    var racpAskedAgainForDrops = false
    /// The mark records are asked for after: the configuration's, or in observer mode the one
    /// the client's request showed.
    var racpMark: UInt16? { configuration.observer ? observedMark : configuration.lastSequenceNumber }
    var configured = false
    /// The name and model the quirk profile was last looked up for (when `quirkChecked`; two
    /// fields, not an optional: testing the optional went through its type's value witnesses).
    var quirkCheckedFor = QuirkKey()
    var quirkChecked = false
    /// What the quirk matching found in the names and models seen: a driver that runs many
    /// sessions to the same cuffs (a replay) may hand it from one session's machine to the next.
    public var quirkMemo = QuirkProfile.Memo()

    struct QuirkKey: Sendable, Hashable {
        var name: String? = nil
        var model: String? = nil
    }

    enum Step: Sendable, Hashable {
        case read(CuffCharacteristic)
        case write(CuffCharacteristic, [UInt8])
        case subscribe(CuffCharacteristic, indicate: Bool)
        case racpReport
        case startCommand

        var characteristic: CuffCharacteristic {
            switch self {
            case let .read(c), let .write(c, _), let .subscribe(c, _): c
            case .racpReport: .recordAccessControlPoint
            case .startCommand: .cuffControl
            }
        }
    }

    public init(configuration: CuffSessionConfiguration) {
        settings = Settings(configuration)
        self.device = DeviceInfo(address: configuration.address, name: configuration.advertisedName)
        self.seenKeys = configuration.knownRecordKeys
        // (Without a name there is nothing to match: every replayed session has none, and the
        // search over the profiles cost about 4,400 instructions a session.)
        self.activeProfile =
            configuration.quirk
            ?? configuration.advertisedName.flatMap { QuirkProfile.matching(name: $0, model: nil) }
        self.quirks = activeProfile?.options ?? []
        settleNanoseconds = configuration.settle.nanoseconds
        burstNanoseconds = configuration.storedBurstWindow.nanoseconds
        stepNanoseconds = configuration.observerStepWindow.nanoseconds
    }

    /// What the `.discover` action comes to, in the log: a cuff the GATT cache knows is checked
    /// against it first (``CuffCentral`` then says whether its handles are used or discovered
    /// again; probe U: "discovering services" was followed by "no discovery").
    var discoveryWord: String {
        if case let .on(known?) = configuration.gattCache, known.address == configuration.address {
            return "checking the GATT cache"
        }
        return "discovering services"
    }

    /// Takes one event; appends the actions it calls for to `out`, in the order the driver must
    /// execute them. A driver that keeps one array and empties it (keeping its capacity) between
    /// events allocates nothing per event.
    public mutating func handle(_ event: Event, into out: inout [Action]) {
        if isFinished { return }
        switch event {
        case let .start(at):
            guard case .idle = stage else { return }
            startedAt = at
            stage = .connecting
            if let t = configuration.timeout { overallDeadline = at.monotonic + t }
            out.append(.emit(.session(SessionRecord(event: .start, device: device, at: at))))
            if configuration.quirk == nil, let q = activeProfile {
                log("applying quirk profile \(q.name) for \(device.name ?? "this device") (its advertised name)", &out)
            }
            out.append(.connect)

        case .connected:
            guard case .connecting = stage else { return }
            if configuration.security > .low {
                stage = .securing
                log("connected to \(device.address); raising security to \(configuration.security)", &out)
                out.append(.raiseSecurity(configuration.security))
                return
            }
            stage = .discovering
            log("connected to \(device.address); \(discoveryWord)", &out)
            out.append(.discover)

        case let .connectionFailed(why, at):
            finish(.connectionFailed, why, at, &out)

        case .securityRaised(_, _):
            guard case .securing = stage else { return }
            stage = .discovering
            log("link secured; \(discoveryWord)", &out)
            out.append(.discover)

        case let .securityRefused(why, at):
            finish(.securityRefused, why, at, &out)

        case let .discovered(p, at):
            guard case .discovering = stage else { return }
            profile = p
            guard p.hasBloodPressureService,
                p.has(.bloodPressureMeasurement) || p.has(.enhancedBloodPressureMeasurement)
            else {
                return finish(
                    .serviceMissing,
                    "the device has no Blood Pressure Service (0x1810) with a Blood Pressure Measurement characteristic",
                    at, &out)
            }
            stage = .configuring
            if configuration.quirk == nil, let v = p.vendorStart, activeProfile?.vendorStart != v,
                let q = QuirkProfile.all.first(where: { $0.vendorStart == v })
            {
                // A family's own control characteristic names the family.
                activeProfile = q
                quirks = q.options
                log(
                    "applying quirk profile \(q.name) (its control characteristic \(v.characteristicUUID.lowercased()))",
                    &out)
            }
            steps = plan(p)
            nextStep = 0
            advance(at, &out)

        case let .rediscovered(p, at):
            switch stage {
            case .discovering: return handle(.discovered(p, at), into: &out)
            case .idle, .connecting, .securing, .stopping, .done: return
            case .configuring, .receivingStoredRecords, .ready, .measuring, .result: break
            }
            profile = p
            guard p.hasBloodPressureService,
                p.has(.bloodPressureMeasurement) || p.has(.enhancedBloodPressureMeasurement)
            else {
                return finish(
                    .serviceMissing,
                    "the device no longer has a Blood Pressure Service (0x1810) with a Blood Pressure Measurement characteristic",
                    at, &out)
            }
            if case .ready = stage { stage = .configuring }
            pending = nil
            configured = false
            // What was known of the device (the GATT cache's values, as if read) may be another
            // cuff's: it is read again, and the quirk profile looked for again (probe B3: a cuff
            // behind a known name kept the old one's name, model and quirks).
            device = DeviceInfo(address: configuration.address, name: configuration.advertisedName)
            activeProfile =
                configuration.quirk
                ?? configuration.advertisedName.flatMap { QuirkProfile.matching(name: $0, model: nil) }
            quirks = activeProfile?.options ?? []
            quirkChecked = false
            steps = plan(p)
            nextStep = 0
            log("configuring again on the rediscovered handles", &out)
            advance(at, &out)

        case let .readCompleted(c, value, at):
            guard pending?.step == .read(c) || observe({ $0 == .read(c) }) else {
                // Observer mode: a read outside the plan still tells us about the device.
                if configuration.observer { apply(read: c, value: value, at: at, &out) }
                return
            }
            pending = nil
            apply(read: c, value: value, at: at, &out)
            advance(at, &out)

        case let .requestWritten(c, value, _):
            // What a RACP request asked for: a session that asked for the last record after the
            // records from N on found none did not emit it again (``racpAsk``).
            guard configuration.observer, c == .recordAccessControlPoint,
                case let .request(op, oper, filter)? = try? RecordAccessControlPoint.decode(value[...], as: .request)
                    .value, op == .reportStoredRecords
            else { return }
            if oper == .greaterThanOrEqualTo, case let .sequenceNumber(n)? = filter, n > 0 {
                observedMark = n - 1
                racpAsk = .afterMark
            } else {
                racpAsk = oper == .lastRecord ? .lastRecord : .all
            }

        case let .writeCompleted(c, at):
            _ = observe { s in
                switch s {
                case .write(c, _): true
                case .startCommand: c == .cuffControl
                case .racpReport: c == .recordAccessControlPoint
                default: false
                }
            }
            if configuration.observer, c == .recordAccessControlPoint, pending?.step != .racpReport {
                // An observed stored-record request outside the plan.
                toStoredRecords()
                racpInProgress = true
                log("the client asked the cuff for its stored records", &out)
                return
            }
            guard let p = pending?.step else { return }
            pending?.observerDeadline = nil
            switch p {
            case .write(c, _),
                .startCommand where c == .cuffControl:
                pending = nil
                if isStopping { return finish(.stopped, "stopped by the user", at, &out) }
                advance(at, &out)
            case .racpReport where c == .recordAccessControlPoint:
                pending = nil
                // Records and the RACP response arrive as indications.
                toStoredRecords()
                racpInProgress = true
                log("asked the cuff for its stored records", &out)
            default:
                return
            }

        case let .subscribed(c, at):
            _ = observe { if case let .subscribe(sc, _) = $0 { sc == c } else { false } }
            guard case let .subscribe(pc, _) = pending?.step, pc == c else { return }
            pending = nil
            advance(at, &out)

        case let .requestFailed(c, why, at):
            _ = observe { $0.characteristic == c }
            guard let p = pending?.step else { return }
            pending = nil
            switch p {
            case .read:
                log("reading \(c.rawValue) failed: \(why) — continuing", &out)
            case .write(.currentTime, _), .write(.dateTime, _):
                log("setting the cuff's clock failed: \(why) — continuing", &out)
            case .racpReport:
                log("stored-record request failed: \(why) — continuing", &out)
            case .startCommand, .write:
                if isStopping { return finish(.stopped, "stopped by the user", at, &out) }
                log("start command failed: \(why) — press the cuff's button", &out)
            case .subscribe(.bloodPressureMeasurement, _), .subscribe(.enhancedBloodPressureMeasurement, _):
                return finish(.protocolError, "subscribing to \(c.rawValue) failed: \(why)", at, &out)
            case .subscribe:
                log("subscribing to \(c.rawValue) failed: \(why) — continuing", &out)
            }
            advance(at, &out)

        case let .notification(c, value, at):
            received(c, value, at, indication: false, &out)

        case let .indication(c, value, at):
            received(c, value, at, indication: true, &out)

        case let .disconnected(why, at):
            // (A replay's observer keeps what the capture's central got: a result it held for
            // reads that central never made is decoded with what is known.)
            if configuration.observer, let held = heldResult {
                heldResult = nil
                received(held.characteristic, held.value, held.at, indication: true, mayHold: false, &out)
            }
            if isStopping { return finish(.stopped, "stopped by the user", at, &out) }
            if case .result = stage {
                return finish(.completed, why ?? "the cuff disconnected", at, &out)
            }
            if liveResults > 0 || (measurements + repeats + markersSkipped > 0 && !isMidMeasurement) {
                return finish(.completed, why ?? "the cuff disconnected", at, &out)
            }
            finish(
                .disconnected,
                "the cuff disconnected" + (why.map { ": " + $0 } ?? "")
                    + (isMidMeasurement ? " in the middle of a measurement" : ""), at, &out)

        case let .protocolError(why, at):
            finish(.protocolError, why, at, &out)

        case let .transactionTimedOut(at):
            finish(.timedOut, "the cuff did not answer an ATT request within 30 s", at, &out)

        case let .stopRequested(at):
            switch stage {
            case .measuring, .ready, .result, .receivingStoredRecords, .configuring:
                let sendStop =
                    profile?.has(.cuffControl) == true && profile?.vendorStart == nil && pending == nil
                    && (isMidMeasurement || state == .ready)
                stage = .stopping(
                    Stopping(
                        measurement: measurement, deadline: at.monotonic + .seconds(2), settle: stage.settleDeadline))
                if sendStop {
                    pending = Pending(step: .write(.cuffControl, [CuffControl.Command.stop.rawValue]))
                    log("stopping the cuff", &out)
                    out.append(.write(.cuffControl, [CuffControl.Command.stop.rawValue]))
                    return
                }
                out.append(.disconnect)
                finish(.stopped, "stopped by the user", at, &out)
            case .stopping:
                return
            default:
                finish(.stopped, "stopped by the user", at, &out)
            }

        case let .tick(at):
            let now = at.monotonic
            if let d = observerStepDeadline, now >= d {
                // Observer mode: the observed client did not make the step we expected; it is done configuring.
                pending = nil
                steps = []
                nextStep = 0
                advance(at, &out)
                if isFinished { return }
                return handle(.tick(at), into: &out)
            }
            if let d = stage.stopDeadline, now >= d {
                out.append(.disconnect)
                return finish(.stopped, "stopped by the user (the cuff did not acknowledge)", at, &out)
            }
            if let d = stage.settleDeadline, now >= d {
                settleEnded()
                if !configuration.follow {
                    out.append(.disconnect)
                    return finish(.completed, "measurement complete", at, &out)
                }
            }
            if let d = burstDeadline, now >= d {
                burstDeadline = nil
                if case .receivingStoredRecords = stage, !racpInProgress { stage = .ready }
                if activeProfile?.behaviour.contains(.dumpsMemoryOnSubscribe) == true, !configuration.follow,
                    configured,
                    liveResults == 0, state == .ready
                {
                    // The cuff sent its memory on subscription and has nothing more to say.
                    out.append(.disconnect)
                    return finish(
                        .completed,
                        resultsReceived > 0 ? "the cuff's memory dump is complete" : "the cuff sent no readings", at,
                        &out)
                }
            }
            if let d = overallDeadline, now >= d {
                overallDeadline = nil
                if measurements + repeats == 0 {
                    out.append(.disconnect)
                    return finish(
                        .timedOut, "no result within \(configuration.timeout.map { "\($0.secondsDouble)" } ?? "?") s",
                        at, &out)
                }
                if !configuration.follow {
                    out.append(.disconnect)
                    return finish(.completed, "time limit reached", at, &out)
                }
            }
        }
    }

    /// The settle window after a live result passed (the session goes on in follow mode).
    mutating func settleEnded() {
        switch stage {
        case .result: stage = .result(settle: nil)
        case var .stopping(s):
            s.settle = nil
            stage = .stopping(s)
        default: break
        }
    }

    /// A stored record came within the settle window: it runs until `end` now.
    mutating func settleAgain(until end: Timestamp) {
        switch stage {
        case .result: stage = .result(settle: end)
        case var .stopping(s):
            s.settle = end
            stage = .stopping(s)
        default: break
        }
    }

    /// True when `r` is new (and now remembered); false for a record already kept (one with
    /// its ``MeasurementRecord/dedupKey``).
    /// A stored record with a known ``MeasurementRecord/unsequencedDedupKeys`` key (received live
    /// before, without a sequence number) is one already kept too.
    mutating func remember(_ r: borrowing MeasurementRecord) -> Bool {
        if let first = unkeyedFirst {
            unkeyedFirst = nil
            recentKeys.append(first.dedupKey)
        } else if seenKeys.isEmpty, recentKeys.isEmpty {
            unkeyedFirst = copy r
            return true
        }
        if r.wasKeptLive({ seenKeys.contains($0) || recentKeys.contains($0) }) { return false }
        return remember(r.dedupKey)
    }

    /// True when `key` is new (and now remembered); false for a record already kept.
    mutating func remember(_ key: String) -> Bool {
        if !seenKeys.isEmpty, seenKeys.contains(key) { return false }
        if recentKeys.contains(key) { return false }
        if recentKeys.count < Self.recentKeysLimit {
            recentKeys.append(key)
        } else {
            seenKeys.insert(key)
        }
        return true
    }

    /// Stored records are coming (a RACP report was asked for, or observed).
    mutating func toStoredRecords() {
        switch stage {
        case .configuring, .ready: stage = .receivingStoredRecords
        default: break
        }
    }

    /// Observer mode: when the pending step does not match but a later one does, skips to it and
    /// makes it the pending step. Returns true when `matches` now holds for the pending step.
    mutating func observe(_ matches: (Step) -> Bool) -> Bool {
        guard configuration.observer else { return false }
        if let p = pending?.step, matches(p) { return true }
        guard let i = steps[nextStep...].firstIndex(where: matches) else { return false }
        pending = Pending(step: steps[i], observerDeadline: pending?.observerDeadline)
        nextStep = i + 1
        return true
    }

    var isMidMeasurement: Bool {
        if case .measuring = stage { return true }
        return false
    }

    // MARK: - Configuration plan

    /// What the plan reads when the cuff lets it, in this order.
    static let plannedReads: [CuffCharacteristic] = [
        .bloodPressureFeature, .deviceName, .manufacturerName, .modelNumber, .serialNumber, .firmwareRevision,
    ]

    func plan(_ p: CuffProfile) -> [Step] {
        var s: [Step] = []
        s.reserveCapacity(16)  // (at most 6 reads, a write, 4 subscriptions and 2 commands)
        for c in Self.plannedReads where p.properties(c).contains(.read) {
            s.append(.read(c))
        }
        if configuration.setTime, p.properties(.currentTime).contains(.write), let t = startedAt {
            let local = t.wallMicros / 1_000_000 + configuration.localUTCOffsetSeconds
            s.append(.write(.currentTime, CurrentTime(localSeconds: local, adjustReason: 1).encode()))
        }
        func subscribe(_ c: CuffCharacteristic) {
            let props = p.properties(c)
            if props.contains(.indicate) {
                s.append(.subscribe(c, indicate: true))
            } else if props.contains(.notify) {
                s.append(.subscribe(c, indicate: false))
            }
        }
        // One cuff-pressure stream and one result stream: the 1.0 characteristics when present.
        if configuration.followCuffPressure {
            subscribe(p.has(.intermediateCuffPressure) ? .intermediateCuffPressure : .enhancedIntermediateCuffPressure)
        }
        subscribe(p.has(.bloodPressureMeasurement) ? .bloodPressureMeasurement : .enhancedBloodPressureMeasurement)
        if configuration.requestStoredRecords, p.has(.recordAccessControlPoint), p.has(.bloodPressureRecord) {
            subscribe(.bloodPressureRecord)
            subscribe(.recordAccessControlPoint)
            s.append(.racpReport)
        }
        if configuration.sendStart, p.properties(.cuffControl).contains(.write) {
            s.append(.startCommand)
        }
        if activeProfile?.behaviour.contains(.dateTimeFirst) == true { return clockFirst(s, p) }
        return s
    }

    /// Whether the plan's reads are still to come (see ``heldResult``).
    var identityToCome: Bool {
        guard case .configuring = stage else { return false }
        func read(_ s: Step) -> Bool { if case .read = s { true } else { false } }
        return pending.map { read($0.step) } == true || steps[nextStep...].contains(where: read)
    }

    mutating func advance(_ at: EventTime, _ out: inout [Action]) {
        // Configuration goes on whatever the cuff does meanwhile (it may start measuring, or send
        // stored records, as soon as it sees the first subscription).
        switch stage {
        case .done, .stopping, .discovering, .securing: return
        default: break
        }
        if let held = heldResult, !identityToCome {
            heldResult = nil
            received(held.characteristic, held.value, held.at, indication: true, &out)
        }
        guard pending == nil else { return }
        guard nextStep < steps.count else {
            if !configured {
                configured = true
                guard case .configuring = stage else { return }
                stage = .ready
                burstDeadline = at.monotonic.adding(nanoseconds: burstNanoseconds)
                log(
                    "ready: waiting for the cuff (\(configuration.sendStart && profile?.has(.cuffControl) == true ? "start command sent" : "start it with its button if it has not started"))",
                    &out)
            }
            return
        }
        let step = steps[nextStep]
        nextStep += 1
        pending = Pending(
            step: step,
            observerDeadline: configuration.observer ? at.monotonic.adding(nanoseconds: stepNanoseconds) : nil)
        switch step {
        case let .read(c): out.append(.read(c))
        case let .write(c, v): out.append(.write(c, v))
        case let .subscribe(c, indicate):
            if c == .bloodPressureMeasurement || c == .enhancedBloodPressureMeasurement {
                burstDeadline = at.monotonic.adding(nanoseconds: burstNanoseconds)
            }
            out.append(.subscribe(c, indicate: indicate))
        case .racpReport:
            racpDrops = 0
            let req: RecordAccessControlPoint =
                if racpAsk == .lastRecord {
                    .request(opCode: .reportStoredRecords, operator: .lastRecord, filter: nil)
                } else if racpAsk == .afterMark, let last = racpMark, last < UInt16.max {
                    .request(
                        opCode: .reportStoredRecords, operator: .greaterThanOrEqualTo, filter: .sequenceNumber(last + 1)
                    )
                } else {
                    .request(opCode: .reportStoredRecords, operator: .allRecords, filter: nil)
                }
            out.append(.write(.recordAccessControlPoint, req.encode()))
        case .startCommand:
            log("sending the start command", &out)
            out.append(.write(.cuffControl, profile?.vendorStart?.value ?? [CuffControl.Command.start.rawValue]))
        }
    }

    mutating func apply(read c: CuffCharacteristic, value: [UInt8], at: EventTime, _ out: inout [Action]) {
        func text() -> String {
            String(decoding: value.prefix { $0 != 0 }, as: UTF8.self)
        }
        switch c {
        case .bloodPressureFeature:
            do {
                device.features = try BloodPressureFeature.decode(value[...]).value
            } catch {
                return log("Blood Pressure Feature unreadable: \(error.message)", &out)
            }
        case .deviceName: if device.name == nil || device.name!.isEmpty { device.name = text() }
        case .manufacturerName: device.manufacturer = text()
        case .modelNumber: device.model = text()
        case .serialNumber: device.serial = text()
        case .firmwareRevision:
            device.firmware = text()
        default: break
        }
        // The profile depends on name and model only: look again only when one of them changed
        // (only these two reads change them; the first read of all looks once).
        // (Flags first: copying the last key out to compare cost more than the rest.)
        if quirkChecked, c != .deviceName, c != .modelNumber { return }
        guard !settings.quirkChosen else { return }
        if quirkChecked {
            guard quirkCheckedFor.name != device.name || quirkCheckedFor.model != device.model else { return }
        }
        quirkChecked = true
        quirkCheckedFor = QuirkKey(name: device.name, model: device.model)
        if let q = quirkMemo.matching(name: device.name, model: device.model), activeProfile?.name != q.name {
            activeProfile = q
            quirks = q.options
            log("applying quirk profile \(q.name) for \(device.model ?? device.name ?? "this device")", &out)
            if q.behaviour.contains(.dateTimeFirst), let p = profile {
                // Learned mid-plan: the clock write and the result subscription go next.
                let rest = Array(steps[nextStep...])
                steps = Array(steps[..<nextStep]) + clockFirst(rest, p)
            }
        }
    }

    /// `steps` with the Date Time write (when the cuff has a writable 2A08 and time sync is on)
    /// and the result subscription first: a cuff that disconnects unless both come within about
    /// 5 s (A&D) gets them before the reads.
    func clockFirst(_ steps: [Step], _ p: CuffProfile) -> [Step] {
        var first: [Step] = []
        if configuration.setTime, p.properties(.dateTime).contains(.write), let t = startedAt {
            let local = t.wallMicros / 1_000_000 + configuration.localUTCOffsetSeconds
            var w = ByteWriter(capacity: DateTime.byteCount)
            DateTime(unixSeconds: local).encode(into: &w)
            first.append(.write(.dateTime, w.bytes))
        }
        let results = steps.filter {
            if case let .subscribe(c, _) = $0 {
                c == .bloodPressureMeasurement || c == .enhancedBloodPressureMeasurement
            } else {
                false
            }
        }
        first += results
        return first
            + steps.filter { s in
                if case .write(.dateTime, _) = s { return false }
                return !results.contains(s)
            }
    }

    // MARK: - Received values

    mutating func received(
        _ c: CuffCharacteristic, _ value: [UInt8], _ at: EventTime, indication: Bool, mayHold: Bool = true,
        _ out: inout [Action]
    ) {
        if indication, mayHold, c == .bloodPressureMeasurement || c == .enhancedBloodPressureMeasurement,
            heldResult == nil, identityToCome
        {
            heldResult = (c, value, at)
            return log("a result came before the device's details were read: held, unconfirmed, until they are", &out)
        }
        switch c {
        case .intermediateCuffPressure, .enhancedIntermediateCuffPressure:
            cuffPressure(c, value, at, &out)
        case .bloodPressureMeasurement:
            do {
                let d = try BloodPressureMeasurement.decode(value[...], quirks: quirks)
                // (Markers come before the buffer: an all-NaN result after a reading is the cuff's
                // error reading, kept as a strict session keeps it.)
                if let q = activeProfile, q.behaviour.contains(.skipsNaNMarkers), resultsReceived == 0,
                    d.value.systolic == .nan, d.value.diastolic == .nan, d.value.meanArterialPressure == .nan
                {
                    log(
                        "skipped a marker record from the cuff (every pressure NaN; \(q.name) sends these before its readings)",
                        &out)
                    markersSkipped += 1
                    if indication { out.append(.confirmIndication) }
                    return
                }
                let stored = isStored
                result(
                    MeasurementRecord.from(
                        bpm: d.value, warnings: d.warnings, raw: value, device: device, at: at, stored: stored), at,
                    &out)
            } catch {
                // Never kept (no values to keep), and confirmed like every indication: see
                // ``UninvitedIndication/malformed(_:_:_:)``. Said without its bytes.
                log(UninvitedIndication.malformed("Blood Pressure Measurement", value.count, error), &out)
            }
        case .enhancedBloodPressureMeasurement:
            do {
                let d = try EnhancedBloodPressureMeasurement.decode(value[...], cuffPressure: false)
                if let r = MeasurementRecord.from(
                    enhanced: d.value, warnings: d.warnings, raw: value, device: device, at: at, stored: isStored,
                    sequenceNumber: nil)
                {
                    result(r, at, &out)
                }
            } catch {
                log(UninvitedIndication.malformed("Enhanced Blood Pressure Measurement", value.count, error), &out)
            }
        case .bloodPressureRecord:
            record(value, at, &out)
        case .recordAccessControlPoint:
            racpResponse(value, at, &out)
        default:
            log("unexpected value from \(c.rawValue): \(Hex.encode(value))", &out)
        }
        // Confirm only after the result was emitted (and made durable by the sinks).
        if indication { out.append(.confirmIndication) }
        if racpAskDue {
            racpAskDue = false
            advance(at, &out)
        }
    }

    /// A result is live when cuff pressure was seen since the previous result, or when the cuff has
    /// no cuff-pressure characteristic and the post-subscription burst is over.
    var isStored: Bool {
        if measurement != nil { return false }
        let hasICP =
            configuration.followCuffPressure
            && (profile.map { $0.has(.intermediateCuffPressure) || $0.has(.enhancedIntermediateCuffPressure) } ?? false)
        if !hasICP && burstDeadline == nil && state == .ready { return false }
        return true
    }

    /// The hot path of `handle(.notification(c, value, at))` for a cuff-pressure value (most of a
    /// session's traffic): the same state change and the same progress record, without building
    /// the event or the action array. Returns nil, changing nothing, where `handle` must decide
    /// instead: a final state, another characteristic, a value that does not decode, or an
    /// enhanced value that is not a cuff pressure.
    public mutating func progress(notified c: CuffCharacteristic, _ value: UnsafeRawBufferPointer, at: EventTime)
        -> ProgressRecord?
    {
        guard !isFinished else { return nil }
        let decoded: (pressure: SFloat, unit: PressureUnit)?
        switch c {
        case .intermediateCuffPressure: decoded = BloodPressureMeasurement.cuffPressure(in: value)
        case .enhancedIntermediateCuffPressure: decoded = EnhancedBloodPressureMeasurement.cuffPressure(in: value)
        default: return nil
        }
        guard let decoded, !quirks.contains(.unsignedIntegerValues) else { return nil }
        return cuffPressure(decoded.pressure, decoded.unit, at)
    }

    mutating func cuffPressure(_ c: CuffCharacteristic, _ value: [UInt8], _ at: EventTime, _ out: inout [Action]) {
        let pressure: SFloat
        let unit: PressureUnit
        do {
            if c == .intermediateCuffPressure {
                let d = try BloodPressureMeasurement.decode(value[...], quirks: quirks, cuffPressure: true)
                pressure = d.value.cuffPressure
                unit = d.value.unit
            } else {
                let d = try EnhancedBloodPressureMeasurement.decode(value[...], cuffPressure: true)
                guard case let .cuffPressure(p) = d.value.kind else { return }
                pressure = p
                unit = d.value.unit
            }
        } catch {
            return log("ignored a malformed cuff-pressure value: \(error.message)", &out)
        }
        out.append(.emit(.progress(cuffPressure(pressure, unit, at))))
    }

    /// A decoded cuff pressure: phase tracking, and the progress record. (Always inlined: the
    /// replay's short path calls it for most of a capture's records.)
    @inline(__always) mutating func cuffPressure(_ pressure: SFloat, _ unit: PressureUnit, _ at: EventTime)
        -> ProgressRecord
    {
        // The first cuff pressure since the last live result starts a measurement.
        var m = measurement ?? Measurement(start: at.monotonic)
        burstDeadline = nil
        if let v = pressure.doubleValue {
            // The oscillometric wiggle makes the pressure rise a little during deflation: the phase
            // turns to deflating once the pressure fell clearly below its peak, and back to
            // inflating only if it climbs above that peak again (a re-inflation).
            let mmHg = unit == .kPa ? v * PressureUnit.mmHgPerKPa : v
            let peak = m.peak ?? mmHg
            if mmHg > peak + 0.5 {
                m.phase = .inflating
                m.peak = mmHg
            } else if mmHg < peak - 3 {
                m.phase = .deflating
            }
            if m.peak == nil { m.peak = mmHg }
        }
        if case var .stopping(s) = stage {
            s.measurement = m
            s.settle = nil
            stage = .stopping(s)
        } else {
            stage = .measuring(m)
        }
        // (at − start).secondsDouble, without the round trip through Duration.
        // (Saturating: a capture's clock may jump by centuries between two notifications.)
        let elapsed = Double(Timestamp.difference(at.monotonic.nanoseconds, m.start.nanoseconds)) / 1e9
        return ProgressRecord(phase: m.phase, cuffPressure: pressure, unit: unit, elapsed: elapsed, at: at)
    }

    mutating func result(_ r: consuming MeasurementRecord, _ at: EventTime, _ out: inout [Action]) {
        let isNew = remember(r)
        resultsReceived += 1
        let stored = r.stored, hasValues = r.hasValues
        // (Only "no values" when it gave none: a result may lack one pressure and keep others.)
        let noValues =
            !hasValues && r.meanArterialPressure.doubleValue == nil && r.systolic.doubleValue == nil
            && r.diastolic.doubleValue == nil
        if isNew {
            measurements += 1
            out.append(.emit(.measurement(consume r)))  // (the record's last use: moved, not copied)
        } else {
            repeats += 1
            let timestamp = r.timestamp
            log(
                "skipped a \(stored ? "stored record" : "result") already received (\(timestamp ?? "no time stamp"))",
                &out)
        }
        if !stored {
            // A live result ends the measurement even when it repeats one already kept.
            if isNew { liveResults += 1 }
            let settle = at.monotonic.adding(nanoseconds: settleNanoseconds)
            if case var .stopping(s) = stage {
                s.measurement = nil
                s.settle = settle
                stage = .stopping(s)
            } else {
                stage = .result(settle: settle)
            }
            if isNew && !hasValues {
                log(
                    noValues
                        ? "the cuff reported an error (no values) — measure again"
                        : "the cuff's result lacks a systolic or diastolic pressure (a special value) — measure again",
                    &out)
            }
        } else {
            // The burst lasts until the window passes without a stored record: a memory dump
            // sent at radio pace (Veroval: 102 records, one every 100 ms) is all stored, and a
            // dump that ends the session ends after its last record (probe O: cut after 1.5 s).
            switch stage {
            case .ready:
                stage = .receivingStoredRecords
                burstDeadline = at.monotonic.adding(nanoseconds: burstNanoseconds)
            case .configuring, .receivingStoredRecords:
                burstDeadline = at.monotonic.adding(nanoseconds: burstNanoseconds)
            default: break
            }
        }
        if stored, stage.settleDeadline != nil {
            settleAgain(until: at.monotonic.adding(nanoseconds: settleNanoseconds))
        }
    }

    /// One Blood Pressure Record message. The segments of a record are reassembled (bounded,
    /// in counter order) and the whole record is decoded as its recorded characteristic and
    /// emitted like a single-segment one. A broken sequence (a gap, a counter out of order, a new
    /// first segment before the last, a record over 512 bytes) drops the unfinished record with a
    /// warning: a partial reading is never emitted. A record whose recorded value does not decode
    /// is reported with its sequence number and UUID, and not emitted (it has no values to keep).
    /// A record warning: said while under ``recordWarningLimit``, counted after.
    mutating func recordWarning(_ text: String, _ out: inout [Action]) {
        recordWarnings += 1
        if recordWarnings <= Self.recordWarningLimit { return log(text, &out) }
        if recordWarnings == Self.recordWarningLimit + 1 {
            log("more Blood Pressure Record warnings follow: counted, not said (the session end sums them up)", &out)
        }
    }

    mutating func record(_ value: [UInt8], _ at: EventTime, _ out: inout [Action]) {
        let seg: RecordSegment
        do {
            seg = try RecordSegment.decode(value[...])
        } catch {
            if racpInProgress { racpDrops += 1 }
            return recordWarning("ignored a malformed Blood Pressure Record: \(error.message)", &out)
        }
        let step = recordAssembler.add(seg)
        if let why = step.dropped {
            if racpInProgress { racpDrops += 1 }
            recordWarning("warning: Blood Pressure Record segments out of sequence: \(why.message)", &out)
        }
        guard let body = step.body else { return }
        let hasCRC = device.features?.contains(.e2eCRC) ?? false
        let rec: BloodPressureRecord
        do {
            rec = try BloodPressureRecord.decodeBody(body[...], hasCRC: hasCRC).value
        } catch {
            if racpInProgress { racpDrops += 1 }
            return recordWarning("ignored a malformed Blood Pressure Record: \(error.message)", &out)
        }
        if racpAsk == .lastRecord, racpInProgress {
            lastRecordSequence = rec.sequenceNumber
            // Asked only to learn its number: one not after the mark is kept already, or comes
            // again with all the others.
            if let mark = racpMark, rec.sequenceNumber <= mark { return }
        }
        let inner: Decoded<EnhancedBloodPressureMeasurement>
        do {
            guard let d = try rec.enhancedMeasurement() else {
                return log(
                    "stored record \(rec.sequenceNumber) holds characteristic 0x\(String(rec.recordedUUID, radix: 16)); skipped",
                    &out)
            }
            inner = d
        } catch {
            return log(
                "warning: stored record \(rec.sequenceNumber) (\(Hex.handle(rec.recordedUUID))): \(DecodeWarning.Code.invalidRecordedValue.rawValue): \(error.message) (recorded value of \(rec.recorded.count) bytes); skipped",
                &out)
        }
        guard
            let r = MeasurementRecord.from(
                enhanced: inner.value, warnings: inner.warnings, raw: rec.recorded, device: device, at: at,
                stored: true, sequenceNumber: rec.sequenceNumber)
        else {
            return
        }
        result(r, at, &out)
    }

    mutating func racpResponse(_ value: [UInt8], _ at: EventTime, _ out: inout [Action]) {
        guard let d = try? RecordAccessControlPoint.decode(value[...], as: .response) else {
            return log("ignored a malformed RACP response \(Hex.encode(value))", &out)
        }
        switch d.value {
        case let .responseCode(_, code):
            log(code == .success ? "stored records complete" : "stored records: \(code.name)", &out)
        case let .numberOfRecords(n, _), let .combinedReportResponse(n, _):
            log("the cuff holds \(n) stored record(s)", &out)
        case .request:
            break
        }
        let wasInProgress = racpInProgress
        racpInProgress = false
        guard wasInProgress else { return }
        // (An observer only follows: the observed client asks what it asks.)
        if case let .responseCode(op, code) = d.value, op == .reportStoredRecords, !configuration.observer,
            code == .success, racpAsk != .lastRecord, racpDrops > 0
        {
            guard racpAskedAgainForDrops else {
                racpAskedAgainForDrops = true
                log(
                    "stored records did not arrive whole (segments out of sequence, or malformed); asking for the stored records again",
                    &out)
                return askRACPAgain(racpAsk)
            }
            log(
                "warning: stored records did not arrive whole after asking again; they are not asked for again in this session",
                &out)
        }
        if case let .responseCode(op, code) = d.value, op == .reportStoredRecords, !configuration.observer,
            let mark = racpMark
        {
            switch racpAsk {
            case .afterMark where code == .noRecordsFound:
                return askRACPAgain(.lastRecord)
            case .lastRecord where code == .success:
                if let last = lastRecordSequence, last < mark {
                    log(
                        "the cuff's last stored record is number \(last), below \(mark), the last one kept: its numbering started again; asking for all its records",
                        &out)
                    return askRACPAgain(.all)
                }
            default: break
            }
        }
        // Back to the remaining configuration steps (or ready when none are left).
        if case .receivingStoredRecords = stage { stage = configured ? .ready : .configuring }
        advance(at, &out)
    }

    /// Another RACP report, asked for next (before the plan's remaining steps), once the response
    /// indication is confirmed: until then the cuff's procedure is still in progress, and a cuff
    /// answers a new request with Procedure Already In Progress (0xFE), as the simulated one does.
    mutating func askRACPAgain(_ ask: RACPAsk) {
        racpAsk = ask
        lastRecordSequence = nil
        steps.insert(.racpReport, at: nextStep)
        racpAskDue = true
    }

    mutating func finish(_ outcome: SessionOutcome, _ message: String, _ at: EventTime, _ out: inout [Action]) {
        // Results received before a fault are kept; the exit status says whether any arrived.
        stage = .done(outcome)
        overallDeadline = nil
        burstDeadline = nil
        pending?.observerDeadline = nil
        log(message, &out)
        if recordWarnings > Self.recordWarningLimit {
            log(
                "\(recordWarnings) Blood Pressure Record warnings in all, \(recordWarnings - Self.recordWarningLimit) not said",
                &out)
        }
        if repeats > 0 { log(Self.newAndKept(measurements, repeats), &out) }
        // (Made where it goes: a record made first and appended after the logs was copied.)
        out.append(
            .emit(
                .session(
                    SessionRecord(
                        event: .end, device: device, at: at, outcome: outcome, measurements: measurements,
                        message: message))))
        out.append(.finished(outcome))
    }

    /// The end of a session some of whose results the store had already: `0 new measurements; 4 results already kept`.
    static func newAndKept(_ new: Int, _ repeats: Int) -> String {
        "\(new) new measurement\(new == 1 ? "" : "s"); \(repeats) result\(repeats == 1 ? "" : "s") already kept"
    }

    /// A `.log` action, when logs are wanted (the text is built only then).
    func log(_ text: @autoclosure () -> String, _ out: inout [Action]) {
        if configuration.logs { out.append(.log(text())) }
    }

    /// Exit status: 0 when any result arrived (also one already kept: "0 new"), else the outcome's own code.
    public var exitCode: Int32 {
        guard case let .done(o) = stage else { return SessionOutcome.noResult.exitCode }
        if measurements + repeats > 0 { return 0 }
        return o == .completed ? SessionOutcome.noResult.exitCode : o.exitCode
    }
}
