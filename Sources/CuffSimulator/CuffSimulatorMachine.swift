// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// How the simulated cuff is set up.
/// A way `cuff simulate` shapes the standard simulated cuff; a protocol whose simulated cuff does
/// not play one says so (``CuffProtocol/simulatorHonours(_:)``), and the option is refused rather
/// than silently ignored.
public enum SimulatorSetting: String, Sendable, CaseIterable {
    case scenario, persona, quirk, autostart, recordSegment, measureEvery, databaseHash, serviceChanged, handleGap
}

public struct SimulatorConfiguration: Sendable {
    public var scenario: Scenario = .normal
    public var persona: Persona = .bps10
    public var seed: UInt64 = 1
    /// Start measuring as soon as a client subscribed to the result.
    public var autostart = false
    public var name = "cuff-sim"
    public var manufacturer = "cuff project"
    public var model = "CUFF-SIM 1"
    public var serial = "SIM-000001"
    public var firmware = "0.1.0"
    /// The cuff's clock at start-up, as local wall-clock seconds since 1970 (no zone, like the cuff).
    public var clockStart: Int64 = 1_767_254_400  // 2026-01-01T08:00:00
    /// The offset from UTC of the zone the cuff's clock is set in, in seconds east: a BPS 1.1
    /// Time Stamp is UTC (its clock's time less this), its User Facing Time the clock's time.
    public var utcOffsetSeconds: Int64 = 0
    /// Cuff-pressure notifications per second.
    public var icpRate: Double = 5
    /// How long the cuff stays connected after its result was confirmed.
    public var linger: Duration = .seconds(3)
    /// How many seconds of the cuff's own clock pass in one real second (`--speed`). The ATT
    /// transaction timeout is the client's, in real time: it lasts this many times 30 s of the
    /// cuff's clock, so a slow client (bluetoothd on a loaded machine) is not cut off early.
    public var timeScale: Double = 1 { didSet { if !(timeScale >= 1) { timeScale = 1 } } }
    /// The ATT transaction timeout (30 s, Vol 3 Part F §3.3.3) in the cuff's own time.
    public var transactionTimeout: Duration { .seconds(30 * min(timeScale, 1e6)) }
    /// Send every stored reading again after each subscription, also the ones a client already
    /// confirmed (what some careless cuffs do). Off unless the scenario asks for it
    /// (``Scenario/resendsConfirmedReadings``); a faithful cuff sends a reading until it is confirmed.
    public var resendsConfirmedReadings = false
    /// Send each RACP-reported Blood Pressure Record in segments of at most this many bytes
    /// (header included; at least 6, so the first segment holds the sequence number and UUID).
    /// nil: one message per record (header 0x03), which fits any ATT MTU the simulator accepts.
    public var recordSegmentLength: Int? = nil
    /// Take a measurement on its own every this much (simulated) time, connected or not: a
    /// connected client gets it live, otherwise it waits in the cuff's memory as a stored reading.
    /// The first one comes after a seed-chosen part of the interval, so a fleet does not measure
    /// all at once. nil: only on request (start command, button, autostart).
    public var measureEvery: Duration? = nil
    /// How many readings the cuff's memory holds; the oldest goes first when it is full.
    public var memoryCapacity = 200
    /// Have the Generic Attribute service (0x1801) first, with Service Changed (0x2A05); off, the
    /// layout is the one the captures and most tests know.
    public var serviceChanged = false
    /// Have the Database Hash (0x2B2A) in the Generic Attribute service (first in the database).
    public var databaseHash = false
    /// Leave this many handles unused before the cuff's own services: a firmware whose handles
    /// moved (what a GATT cache must notice). The Generic Attribute service stays where it is.
    public var handleGap: UInt16 = 0
    /// Indicate Service Changed (0x0001–0xFFFF) right after each connection, as a bonded cuff
    /// does whose database changed since the client was last connected (the client's
    /// subscription to it is taken as kept from then). Needs ``serviceChanged``.
    public var indicatesServiceChanged = false
    /// Be an Omron cuff of this profile instead (its own protocol; ``OmronPeripheral``).
    public var omron: OmronSimulation?
    /// The device family the cuff behaves as (`cuff simulate --quirk NAME`), set with
    /// ``behave(as:)``: its names, value layout, memory and session habits (shared/spec/other-cuffs.md).
    public private(set) var quirk: QuirkProfile?

    public init(scenario: Scenario = .normal, persona: Persona = .bps10, seed: UInt64 = 1, autostart: Bool = false) {
        self.scenario = scenario
        self.persona = persona
        self.seed = seed
        self.autostart = autostart
        resendsConfirmedReadings = scenario.resendsConfirmedReadings
        if scenario == .beurerBM85 {
            name = "BM85"
            manufacturer = "Beurer GmbH"
            model = "BM85"
        }
    }

    /// Makes the cuff a device family's persona: the names the family's cuffs give (so a session
    /// matches the profile by itself), and the habits ``CuffSimulatorMachine`` plays for it.
    public mutating func behave(as q: QuirkProfile) {
        quirk = q
        (name, manufacturer, model) =
            switch q.name {
            case QuirkProfile.andUA651.name: ("UA-651BLE", "A&D Medical", "UA-651BLE")
            case QuirkProfile.veroval.name: ("VEROVAL", "HARTMANN", "BPU 26")
            case QuirkProfile.sbm69.name: ("SBM69", "HealthForYou", "SBM69")
            case QuirkProfile.beurerBM96.name: ("BM96", "Beurer GmbH", "BM96")
            case QuirkProfile.beurerBM85.name: ("BM85", "Beurer GmbH", "BM85")
            case QuirkProfile.boso.name: ("boso medicus system", "BOSCH + SOHN", "medicus system")
            case QuirkProfile.medisana.name: ("1872B", "Medisana", "BU 575")
            case QuirkProfile.qardio.name: ("QardioARM", "Qardio", "A100")
            default: (q.name, "cuff project", q.name)
            }
    }

    /// Blood Pressure Feature this cuff reports.
    public var features: BloodPressureFeature {
        persona == .bps11 ? [.allVersion10, .userFacingTime] : .allVersion10
    }

    /// How this cuff lays out its values (what the encoder is given).
    var quirks: QuirkProfile.Options {
        if scenario == .beurerBM85 { return QuirkProfile.beurerBM85.options }
        guard let quirk else { return [] }
        // A BM96 sends its user ID with the flag (flags 0xDE in the questions' frames): the
        // profile's tolerance of a user-ID byte without one is the decoder's, not this cuff's way.
        return quirk == .beurerBM96 ? quirk.options.subtracting(.userIDWithoutFlag) : quirk.options
    }

    /// The persona's habits, by family (none without ``quirk``, but the beurer-bm85 scenario's,
    /// which is that cuff).
    var habits: PersonaHabits { PersonaHabits(quirk ?? (scenario == .beurerBM85 ? .beurerBM85 : nil)) }
}

/// What a device family's cuff does differently, as the public sources describe it.
struct PersonaHabits: Sendable {
    enum Memory: Sendable, Hashable {
        /// Stored readings sent on subscription until confirmed, oldest first (the standard persona).
        case standard
        /// NaN marker records, then the buffer oldest first, then the link dropped (A&D).
        case markersThenBufferThenDisconnect(markers: Int)
        /// The whole memory on every subscription, newest first, user 0 then user 1 (Veroval).
        case dumpNewestFirstByUser
        /// The buffer oldest first, then the link dropped (SBM69).
        case bufferThenDisconnect
    }
    var memory: Memory = .standard
    /// Readings in memory at power-on: (user, failed) per reading, oldest first.
    var stored: [(user: UInt8, failed: Bool)] = []
    /// Date Time (2A08) and the result subscription must both come within this of connecting.
    var clockWindow: Duration?
    /// Has Date Time (2A08) in its Blood Pressure Service.
    var hasDateTime = false
    var hasCuffPressure = true
    var hasCurrentTime = true
    /// Measures on its own when a client subscribed (with `--autostart`); cuffs whose memory is
    /// all they send do not.
    var autostarts = true
    /// The start command, when the family has one (QardioArm); nil: our own control point.
    var vendorStart: QuirkProfile.VendorStart?
    /// Values sent with SFLOAT exponent −1 (Beurer BM96).
    var exponentMinusOne = false
    /// MAP not sent (NaN; Veroval and the BM85 send it as 0).
    var noMeanArterialPressure = false
    /// Reserved bits the family sets: in Flags, and in Measurement Status.
    var rfuFlags: UInt8 = 0
    var rfuStatus: UInt16 = 0

    init(_ q: QuirkProfile?) {
        guard let q else { return }
        switch q.name {
        case QuirkProfile.andUA651.name:
            memory = .markersThenBufferThenDisconnect(markers: 2)
            stored = [(1, false), (1, false), (1, false)]
            clockWindow = .seconds(5)
            hasDateTime = true
            hasCuffPressure = false
            hasCurrentTime = false
            autostarts = false
        case QuirkProfile.veroval.name:
            memory = .dumpNewestFirstByUser
            stored = [(0, false), (1, false), (0, false), (0, false), (1, false)]
            autostarts = false
            noMeanArterialPressure = true
            rfuStatus = 0x8000
        case QuirkProfile.sbm69.name:
            memory = .bufferThenDisconnect
            stored = [(1, false), (1, false), (1, false)]
            hasCuffPressure = false
            autostarts = false
        case QuirkProfile.beurerBM96.name:
            stored = [(1, false), (2, false)]
            exponentMinusOne = true
            noMeanArterialPressure = true
            rfuFlags = 0xC0
            rfuStatus = 0x0080
        case QuirkProfile.beurerBM85.name:
            // Its recorded frames carry a MAP of 0: it measures none (derdilla #735/#737, as in the profile).
            noMeanArterialPressure = true
        case QuirkProfile.boso.name:
            stored = [(1, false), (1, true)]
        case QuirkProfile.medisana.name:
            stored = [(0, false), (1, false)]
        case QuirkProfile.qardio.name:
            vendorStart = q.vendorStart
            autostarts = false
        default:
            break
        }
    }
}

extension SimulatorConfiguration {
    var unit: PressureUnit { scenario == .kpa ? .kPa : .mmHg }

    /// Why ``autostart`` does nothing for this cuff (its family never measures on its own), nil
    /// when it applies or was not asked for.
    public var autostartIgnored: String? {
        let h = habits
        guard autostart, omron == nil, !h.autostarts else { return nil }
        return h.vendorStart != nil
            ? "this cuff measures on its start command only (`cuff measure --start`)"
            : "this cuff sends its memory only, it does not measure for a client"
    }
}

/// The simulated cuff: a value that takes GATT-level events (subscriptions, writes,
/// confirmations, button presses, time) and returns what the cuff sends.
///
/// A measurement inflates at about 15 mmHg/s to 30–40 mmHg above systolic, deflates at about
/// 3 mmHg/s with the oscillometric wiggle (largest around the mean arterial pressure, at the
/// pulse rate), notifies the cuff pressure `icpRate` times a second, then indicates the result.
public struct CuffSimulatorMachine: ActionMachine, Sendable {
    public enum Event: Sendable, Hashable {
        case connected(Timestamp)
        case subscriptionChanged(CuffCharacteristic, notify: Bool, indicate: Bool, Timestamp)
        case written(CuffCharacteristic, [UInt8], Timestamp)
        case indicationConfirmed(Timestamp)
        /// The client and the cuff agreed on this ATT_MTU (Exchange MTU): a value longer than it
        /// allows (ATT_MTU − 3) is sent in segments where the characteristic has them.
        case mtuChanged(Int)
        /// The GATT server did not send an indication the cuff asked for, so the client never
        /// got it and will not confirm it. `behind`: one of the cuff's latest actions, with
        /// `behind` more indications asked for after it (the client is not subscribed, the queue
        /// is full); nil: the oldest still waiting (the client unsubscribed while it was queued).
        case indicationDropped(Timestamp, behind: Int?)
        /// The GATT server took back this many of the indications a ``Action/withdrawQueued(_:)``
        /// named: they were queued, never sent, and will not be confirmed.
        case indicationsWithdrawn(Int, Timestamp)
        /// A confirmation never came (30 s): the link must be dropped.
        case indicationTimedOut(Timestamp)
        /// The cuff's start button (SIGUSR1).
        case buttonPressed(Timestamp)
        case tick(Timestamp)
        case disconnected(Timestamp)
    }

    public enum Action: Sendable, Hashable {
        case notify(CuffCharacteristic, [UInt8])
        case indicate(CuffCharacteristic, [UInt8])
        /// Answer to a write: nil accepts it, a code rejects it with that ATT error.
        case writeResult(CuffCharacteristic, error: UInt8?)
        /// A readable value changed (Current Time after a write, the clock ticking).
        case setValue(CuffCharacteristic, [UInt8])
        /// Take back the indications of these characteristics still queued behind the one in
        /// flight (a RACP procedure the client aborted), then answer with
        /// ``Event/indicationsWithdrawn(_:_:)``.
        case withdrawQueued(Set<CuffCharacteristic>)
        case disconnect(String)
        case log(String)
    }

    enum Phase: Sendable, Hashable {
        case idle
        case inflating(since: Timestamp, top: Double)
        case deflating(since: Timestamp, top: Double)
        case dumping(since: Timestamp, from: Double)
    }

    public let configuration: SimulatorConfiguration
    /// The device family's habits (``SimulatorConfiguration/quirk``); the standard cuff's without one.
    let habits: PersonaHabits
    var random: SeededRandom
    var phase: Phase = .idle
    var nextSample: Timestamp?
    var lingerUntil: Timestamp?
    /// The connected client's state (an empty one between connections).
    var connection = Connection()
    /// The live result's indication is not confirmed yet (the linger starts once it is).
    var resultPending = false
    var reading: Reading
    var lastPressure = 0.0
    var clockBase: Int64
    var clockSetAt: Timestamp = .zero
    var records: [StoredRecord] = []
    /// The cuff-clock second of the latest result.
    var lastResultLocal: Int64?
    /// When the next scheduled measurement (``SimulatorConfiguration/measureEvery``) is due.
    var nextScheduled: Timestamp?
    var nextSequence: UInt16 = 0
    /// Results the cuff produced (live or kept).
    public private(set) var measurementsDone = 0
    /// Readings a client confirmed (each counted once per client).
    public private(set) var confirmedReadings = 0
    /// The Blood Pressure Record rolling segment counter (segmented records only).
    var recordCounter: UInt8 = 0
    /// Sequence numbers of the readings each client confirmed (key "" for the anonymous client),
    /// for the `maxBondedClients` clients seen last (`deliveredOrder`, oldest first).
    var delivered: [String: Set<UInt16>] = [:]
    var deliveredOrder: [String] = []
    /// How many clients the cuff remembers (real cuffs keep a handful of bonds); a client beyond
    /// that makes it forget the one it saw longest ago, which then gets every reading again.
    static let maxBondedClients = 8

    /// Everything the cuff knows of one connection, as one value: a new connection starts from a
    /// fresh one, and a disconnection forgets it.
    struct Connection: Sendable {
        /// Who is connected: the identity the driver gave (a Bluetooth address), or nil for a
        /// client the simulator cannot tell from others (a Unix socket) — all such clients are one.
        var client: String?
        var subscribed: [CuffCharacteristic: (notify: Bool, indicate: Bool)] = [:]
        /// The indications not confirmed yet, in the order sent: confirmations come back in that order.
        var indications: [IndicationInFlight] = []
        /// The stored readings went out after the result subscription.
        var sentBurst = false
        /// Autostart waits for the stored readings to be confirmed.
        var autostartPending = false
        /// Autostart measures once per connection.
        var autostarted = false
        /// A RACP procedure is under way: its response (the last indication it asked for) is
        /// not confirmed or dropped yet. Another request meanwhile gets Procedure Already In
        /// Progress, except Abort Operation.
        var racpBusy: Bool { indications.contains { $0.endsProcedure } }
        /// A&D: the link is dropped at this time unless Date Time was written and the result
        /// subscribed by then.
        var clockDeadline: Timestamp?
        var dateTimeWritten = false
        /// Drop the link once every indication in flight is confirmed (the buffer was sent).
        var disconnectWhenConfirmed = false
        /// The ATT_MTU: 23 until the client exchanges another.
        var mtu = 23

        /// An Abort Operation waits for the GATT server to take back what was queued.
        var abortPending = false

        var outstandingIndications: Int { indications.count }

        /// The oldest indication waiting went out now (the one before it was confirmed or
        /// dropped): its wait for a confirmation starts here, not when it was queued.
        mutating func nextIndicationSent(at now: Timestamp) {
            if !indications.isEmpty { indications[0].sentAt = max(indications[0].sentAt, now) }
        }
    }

    /// One indication waiting for its confirmation.
    struct IndicationInFlight: Sendable {
        var sentAt: Timestamp
        /// The stored reading it carries, a result (spontaneous, or the live one, which the cuff
        /// stores too) by its sequence number; nil for RACP records and responses.
        var carries: UInt16?
        /// A RACP procedure's response: confirmed (or dropped), the procedure is over.
        var endsProcedure = false
        /// Part of a RACP procedure (a record it reports, or its response): what Abort Operation
        /// takes back while it is still queued.
        var racp = false
    }

    struct StoredRecord: Sendable, Hashable {
        var sequence: UInt16
        var reading: Reading
        var localSeconds: Int64
    }

    public init(configuration: SimulatorConfiguration) {
        self.configuration = configuration
        habits = configuration.habits
        random = SeededRandom(seed: configuration.seed)
        clockBase = configuration.clockStart
        reading = Reading(systolic: 120, diastolic: 80, pulse: 72, status: MeasurementStatus())
        reading = makeReading()
        if configuration.scenario == .storedRecords || configuration.scenario == .slowConfirm
            || configuration.scenario == .multiUser
        {
            let count = configuration.scenario == .slowConfirm ? 5 : configuration.scenario == .multiUser ? 1 : 3
            for i in 0..<count {
                var r = makeReading()
                r.userID = 1
                let when = configuration.clockStart - Int64(count - i) * 86_400 + Int64(i) * 613
                records.append(StoredRecord(sequence: nextSequence, reading: r, localSeconds: when))
                nextSequence &+= 1
            }
        }
        // A persona's memory: one reading a day or so, oldest first.
        let count = habits.stored.count
        for (i, slot) in habits.stored.enumerated() {
            var r = makeReading()
            r.userID = slot.user
            r.failed = slot.failed
            let when = configuration.clockStart - Int64(count - i) * 86_400 + Int64(i) * 613
            records.append(StoredRecord(sequence: nextSequence, reading: r, localSeconds: when))
            nextSequence &+= 1
        }
    }

    /// The values of readable characteristics at start-up.
    public var initialValues: [CuffCharacteristic: [UInt8]] {
        [
            .bloodPressureFeature: configuration.features.encode(),
            .deviceName: Array(configuration.name.utf8),
            .manufacturerName: Array(configuration.manufacturer.utf8),
            .modelNumber: Array(configuration.model.utf8),
            .serialNumber: Array(configuration.serial.utf8),
            .firmwareRevision: Array(configuration.firmware.utf8),
            .currentTime: CurrentTime(localSeconds: configuration.clockStart, adjustReason: 0).encode(),
            .dateTime: {
                var w = ByteWriter(capacity: DateTime.byteCount)
                DateTime(unixSeconds: configuration.clockStart).encode(into: &w)
                return w.bytes
            }(),
        ]
    }

    /// The earliest time the driver must send `.tick`.
    public var nextDeadline: Timestamp? {
        [nextSample, lingerUntil, nextScheduled, connection.clockDeadline].compactMap { $0 }.min()
    }

    /// Starts the measurement schedule (``SimulatorConfiguration/measureEvery``) at `now`.
    public mutating func powerOn(now: Timestamp) {
        guard let every = configuration.measureEvery, every > .zero, nextScheduled == nil else { return }
        let fraction = Double.random(in: 0..<1, using: &random)
        nextScheduled = now + .nanoseconds(Timestamp.saturating(Double(every.nanoseconds) * fraction))
    }

    public var isMeasuring: Bool { phase != .idle }

    mutating func makeReading() -> Reading {
        func jitter(_ v: Double, _ d: Double) -> Double { (v + Double.random(in: -d...d, using: &random)).rounded() }
        var r: Reading
        switch configuration.scenario {
        case .hypertensive:
            r = Reading(
                systolic: jitter(165, 4), diastolic: jitter(102, 3), pulse: jitter(104, 3),
                status: MeasurementStatus(pulseRateRange: .aboveUpperLimit))
        case .hypotensive:
            r = Reading(
                systolic: jitter(88, 3), diastolic: jitter(56, 2), pulse: jitter(46, 2),
                status: MeasurementStatus(pulseRateRange: .belowLowerLimit))
        case .irregularPulse:
            r = Reading(
                systolic: jitter(132, 4), diastolic: jitter(86, 3), pulse: jitter(94, 6),
                status: MeasurementStatus(irregularPulse: true))
        case .bodyMovement:
            r = Reading(
                systolic: jitter(126, 4), diastolic: jitter(82, 3), pulse: jitter(78, 3),
                status: MeasurementStatus(bodyMovement: true))
        case .cuffLoose:
            r = Reading(
                systolic: jitter(118, 4), diastolic: jitter(79, 3), pulse: jitter(70, 3),
                status: MeasurementStatus(cuffTooLoose: true))
        case .improperPosition:
            r = Reading(
                systolic: jitter(124, 4), diastolic: jitter(81, 3), pulse: jitter(73, 3),
                status: MeasurementStatus(improperPosition: true))
        case .rfuBits:
            r = Reading(
                systolic: jitter(121, 4), diastolic: jitter(79, 3), pulse: jitter(71, 3),
                status: MeasurementStatus(rfuBits: 0x8040))
        default:
            r = Reading(
                systolic: jitter(120, 5), diastolic: jitter(80, 4), pulse: jitter(72, 4), status: MeasurementStatus())
        }
        if configuration.scenario == .multiUser { r.userID = 2 }
        return r
    }

    // MARK: - Events

    /// Takes one event; appends what the cuff does to `out`, in order (``ActionMachine``).
    public mutating func handle(_ event: Event, into out: inout [Action]) {
        switch event {
        case let .connected(now):
            connect(client: nil, now: now, into: &out)

        case let .subscriptionChanged(c, notify, indicate, now):
            connection.subscribed[c] = (notify, indicate)
            out.append(
                .log(
                    "client \(indicate ? "subscribed to indications of" : notify ? "subscribed to notifications of" : "unsubscribed from") \(c.rawValue)"
                ))
            let isResult = c == .bloodPressureMeasurement || c == .enhancedBloodPressureMeasurement
            if isResult && indicate {
                if connection.dateTimeWritten { connection.clockDeadline = nil }
                sendMemory(now, &out)
                if configuration.autostart && habits.autostarts && phase == .idle && !connection.autostarted {
                    connection.autostarted = true
                    // Upload first, then measure: start once the stored readings are confirmed.
                    if connection.outstandingIndications > 0 {
                        connection.autostartPending = true
                    } else {
                        startMeasurement(now, why: "autostart: a client subscribed", &out)
                    }
                }
            }

        case let .written(c, value, now):
            written(c, value, now, &out)

        case let .indicationConfirmed(now):
            if !connection.indications.isEmpty {
                let confirmed = connection.indications.removeFirst()
                if let seq = confirmed.carries { markDelivered(seq) }
                connection.nextIndicationSent(at: now)
                let waited = (now - confirmed.sentAt).secondsDouble
                if waited > 1 {
                    out.append(.log(String(format1(waited)) + " s until the client confirmed an indication"))
                }
            }
            indicationsSettled(now, &out)

        case let .mtuChanged(mtu):
            connection.mtu = max(23, mtu)

        case let .indicationDropped(now, behind):
            let i = behind.map { connection.indications.count - 1 - $0 } ?? 0
            guard connection.indications.indices.contains(i) else { return }
            connection.indications.remove(at: i)
            if i == 0 { connection.nextIndicationSent(at: now) }
            indicationsSettled(now, &out)

        case let .indicationsWithdrawn(n, now):
            // The newest `n` of the procedure's (those queued: the one in flight is older).
            var left = n
            for i in connection.indications.indices.reversed() where left > 0 && connection.indications[i].racp {
                connection.indications.remove(at: i)
                left -= 1
            }
            guard connection.abortPending else { return }
            connection.abortPending = false
            out.append(.log("RACP: procedure aborted (\(n) indication(s) taken back)"))
            indicate(
                .recordAccessControlPoint,
                RecordAccessControlPoint.responseCode(requestOpCode: .abortOperation, response: .success).encode(), now,
                endsProcedure: true, racp: true, &out)

        case .indicationTimedOut:
            out.append(.log("no confirmation within 30 s: dropping the link (ATT transaction timeout)"))
            out.append(.disconnect("indication not confirmed"))

        case let .buttonPressed(now):
            if phase == .idle { return startMeasurement(now, why: "start button pressed", &out) }
            stopMeasurement(now, why: "button pressed during the measurement", &out)

        case let .tick(now):
            if let d = connection.clockDeadline, now >= d {
                connection.clockDeadline = nil
                let missing = connection.dateTimeWritten ? "result subscription" : "Date Time write"
                out.append(
                    .log(
                        "no \(missing) within \(format1(habits.clockWindow?.secondsDouble ?? 0)) s of the link coming up; the cuff disconnects"
                    ))
                out.append(.disconnect("no Date Time and result subscription in time"))
                return
            }
            if let l = lingerUntil, now >= l {
                lingerUntil = nil
                out.append(.log("measurement done; the cuff switches off"))
                out.append(.disconnect("cuff switched off after the measurement"))
                return
            }
            if let due = nextScheduled, now >= due, let every = configuration.measureEvery {
                // The next slot after now (a driver that woke very late skips the missed ones).
                var next = due + every
                if next <= now { next = now + every }
                nextScheduled = next
                if phase == .idle {
                    startMeasurement(now, why: "scheduled, every \(format1(every.secondsDouble)) s", &out)
                }
            }
            // Every sample due by now, each at its own time: a driver that woke late (a busy
            // machine, a fast --speed) catches up instead of skipping, so the sequence of values
            // depends only on the seed.
            while let n = nextSample, now >= n {
                sample(n, &out)
            }

        case .disconnected:
            connection = Connection()
            if phase != .idle {
                phase = .idle
                nextSample = nil
                out.append(.log("client disconnected during the measurement; the cuff deflates"))
                return
            }
            nextSample = nil
            lingerUntil = nil
        }
    }

    // MARK: - Writes

    mutating func written(_ c: CuffCharacteristic, _ value: [UInt8], _ now: Timestamp, _ out: inout [Action]) {
        switch c {
        case .cuffControl:
            if let v = habits.vendorStart {
                // The family's own control: its start command, nothing else known.
                guard value == v.value else {
                    return out.append(contentsOf: [
                        .writeResult(c, error: 0x80), .log("rejected control command \(Hex.encode(value))"),
                    ])
                }
                if phase != .idle { return out.append(.writeResult(c, error: 0xFE)) }
                out.append(.writeResult(c, error: nil))
                return startMeasurement(now, why: "vendor start command \(Hex.encode(value))", &out)
            }
            guard value.count == 1, let cmd = CuffControl.Command(rawValue: value[0]) else {
                return out.append(contentsOf: [
                    .writeResult(c, error: 0x80), .log("rejected control command \(Hex.encode(value))"),
                ])
            }
            switch cmd {
            case .start:
                if phase != .idle { return out.append(.writeResult(c, error: 0xFE)) }
                out.append(.writeResult(c, error: nil))
                startMeasurement(now, why: "start command", &out)
            case .stop:
                out.append(.writeResult(c, error: nil))
                stopMeasurement(now, why: "stop command", &out)
            }
        case .currentTime:
            // (Current Time is 10 bytes, Date Time 7: any other length is Invalid Attribute
            // Value Length, Core Vol 3 Part F §3.4.1.1; probe R: 11 to 512 bytes set the clock
            // from the first 10, and 0 to 9 got Out of Range.)
            guard value.count == CurrentTime.byteCount else {
                return out.append(contentsOf: [
                    .writeResult(c, error: 0x0D), .log("rejected Current Time of \(value.count) bytes"),
                ])
            }
            guard let ct = try? CurrentTime.decode(value[...]).value, let secs = ct.dateTime.unixSeconds,
                ct.dateTime.isValid
            else {
                return out.append(contentsOf: [
                    .writeResult(c, error: 0xFF), .log("rejected Current Time \(Hex.encode(value))"),
                ])
            }
            clockBase = secs
            clockSetAt = now
            out.append(contentsOf: [
                .writeResult(c, error: nil), .setValue(.currentTime, currentTime(now)),
                .log("clock set to \(ct.dateTime.description)"),
            ])
        case .recordAccessControlPoint:
            racp(value, now, &out)
        case .dateTime where habits.hasDateTime:
            guard value.count == DateTime.byteCount else {
                return out.append(contentsOf: [
                    .writeResult(c, error: 0x0D), .log("rejected Date Time of \(value.count) bytes"),
                ])
            }
            guard let dt = try? DateTime.decode(value[...]).value, let secs = dt.unixSeconds, dt.isValid else {
                return out.append(contentsOf: [
                    .writeResult(c, error: 0xFF), .log("rejected Date Time \(Hex.encode(value))"),
                ])
            }
            clockBase = secs
            clockSetAt = now
            connection.dateTimeWritten = true
            out.append(contentsOf: [
                .writeResult(c, error: nil), .setValue(.dateTime, value),
                .log("clock set to \(dt.description) (Date Time)"),
            ])
            if connection.subscribed[.bloodPressureMeasurement]?.indicate == true {
                connection.clockDeadline = nil
                sendMemory(now, &out)
            }
        default:
            out.append(.writeResult(c, error: 0x03))
        }
    }

    mutating func racp(_ value: [UInt8], _ now: Timestamp, _ out: inout [Action]) {
        guard connection.subscribed[.recordAccessControlPoint]?.indicate == true else {
            return out.append(.writeResult(.recordAccessControlPoint, error: 0xFD))  // CCCD improperly configured
        }
        // Report Stored Records sends its records on the Blood Pressure Record characteristic: with
        // that characteristic's indications off they would go nowhere, so the request is refused
        // the same way (as GLS and PLXS do for their record characteristics), before anything runs.
        if value.first == RecordAccessControlPoint.OpCode.reportStoredRecords.rawValue,
            connection.subscribed[.bloodPressureRecord]?.indicate != true
        {
            return out.append(.writeResult(.recordAccessControlPoint, error: 0xFD))
        }
        let abort = value.first == RecordAccessControlPoint.OpCode.abortOperation.rawValue
        if connection.racpBusy && !abort {
            return out.append(.writeResult(.recordAccessControlPoint, error: 0xFE))  // Procedure Already In Progress
        }
        out.append(.writeResult(.recordAccessControlPoint, error: nil))
        // Every path below ends with one response indication, which ends the procedure.
        func respond(
            _ op: RecordAccessControlPoint.OpCode, _ code: RecordAccessControlPoint.ResponseCode, _ out: inout [Action]
        ) {
            indicate(
                .recordAccessControlPoint,
                RecordAccessControlPoint.responseCode(requestOpCode: op, response: code).encode(), now,
                endsProcedure: true, racp: true, &out)
        }
        guard let req = try? RecordAccessControlPoint.decode(value[...], as: .request).value,
            case let .request(op, opr, filter) = req
        else {
            // A request op code with its operator missing, or its operand cut short; else an op
            // code the cuff does not know.
            let op = RecordAccessControlPoint.OpCode(rawValue: value.first ?? 0)
            let isRequest = [1, 2, 3, 4, 7].contains(op.rawValue)
            respond(op, !isRequest ? .opCodeNotSupported : value.count < 2 ? .invalidOperator : .invalidOperand, &out)
            return
        }
        // Bytes after what the operator takes (an operand to All Records, to Abort): Invalid Operand.
        if req.encode().count < value.count { return respond(op, .invalidOperand, &out) }
        // A selection the cuff cannot make: no operand where one is needed, or a filter it does
        // not support (the user facing time).
        let unselectable: RecordAccessControlPoint.ResponseCode =
            filter == nil ? .invalidOperator : .operandNotSupported
        func select() -> [StoredRecord]? {
            switch opr {
            case .allRecords: return records
            case .firstRecord: return records.first.map { [$0] } ?? []
            case .lastRecord: return records.last.map { [$0] } ?? []
            case .lessThanOrEqualTo, .greaterThanOrEqualTo, .withinRangeOf:
                switch filter {
                case let .sequenceNumber(n)?:
                    return records.filter { opr == .lessThanOrEqualTo ? $0.sequence <= n : $0.sequence >= n }
                case let .sequenceNumberRange(a, b)?: return records.filter { (a...b).contains($0.sequence) }
                default: return nil
                }
            default: return nil
            }
        }
        // A range from a higher sequence number to a lower one is no range.
        if case let .sequenceNumberRange(a, b)? = filter, a > b { return respond(op, .invalidOperand, &out) }
        switch op {
        case .reportStoredRecords:
            guard let sel = select() else { return respond(op, unselectable, &out) }
            if sel.isEmpty { return respond(op, .noRecordsFound, &out) }
            out.append(.log("RACP: reporting \(sel.count) stored record(s)"))
            for r in sel {
                let rec = BloodPressureRecord(
                    sequenceNumber: r.sequence, recordedUUID: 0x2B34,
                    recorded: enhanced(r.reading, localSeconds: r.localSeconds).encode())
                let withCRC = configuration.features.contains(.e2eCRC)
                let whole = [0x03] + rec.encodeBody(withCRC: withCRC)
                // In segments when the configuration says so, or when the record is longer than
                // an indication can carry at this ATT_MTU (it would arrive cut); a segment is never
                // longer than the ATT_MTU allows either.
                let room = connection.mtu - 3
                if let n = configuration.recordSegmentLength.map({ min($0, room) })
                    ?? (whole.count <= room ? nil : room)
                {
                    let segments = rec.segments(maxLength: max(6, n), startCounter: recordCounter, withCRC: withCRC)
                    for seg in segments { indicate(.bloodPressureRecord, seg.encode(), now, racp: true, &out) }
                    recordCounter = UInt8((Int(recordCounter) + segments.count) & 0x3F)
                } else {
                    indicate(.bloodPressureRecord, whole, now, racp: true, &out)
                }
            }
            respond(op, .success, &out)
        case .deleteStoredRecords:
            guard let sel = select() else { return respond(op, unselectable, &out) }
            let gone = Set(sel.map(\.sequence))
            records.removeAll { gone.contains($0.sequence) }
            respond(op, sel.isEmpty ? .noRecordsFound : .success, &out)
        case .abortOperation:
            // (Its operator is Null.) A procedure under way stops: what it queued is taken back,
            // and once that is done (``Event/indicationsWithdrawn(_:_:)``) the abort succeeds.
            // The aborted procedure gets no response of its own; what was sent stays sent.
            guard opr == .null else { return respond(op, .invalidOperator, &out) }
            guard connection.racpBusy, !connection.abortPending else { return respond(op, .success, &out) }
            connection.abortPending = true
            out.append(.withdrawQueued([.bloodPressureRecord, .recordAccessControlPoint]))
        case .reportNumberOfStoredRecords:
            guard let sel = select() else { return respond(op, unselectable, &out) }
            indicate(
                .recordAccessControlPoint,
                RecordAccessControlPoint.numberOfRecords(UInt32(sel.count), width: 2).encode(), now,
                endsProcedure: true, racp: true, &out)
        default:
            respond(op, .opCodeNotSupported, &out)
        }
    }

    // MARK: - Measurement

    mutating func startMeasurement(_ now: Timestamp, why: String, _ out: inout [Action]) {
        guard phase == .idle else { return }
        reading = makeReading()
        lingerUntil = nil
        let top = reading.systolic + 30 + Double.random(in: 0...10, using: &random).rounded()
        phase = .inflating(since: now, top: top)
        lastPressure = 0
        nextSample = now
        out.append(
            .log(
                "measurement started (\(why)); target \(Int(reading.systolic))/\(Int(reading.diastolic)) pulse \(Int(reading.pulse))"
            ))
    }

    mutating func stopMeasurement(_ now: Timestamp, why: String, _ out: inout [Action]) {
        switch phase {
        case .idle: out.append(.log("stop: nothing to stop"))
        case .dumping: return
        default:
            phase = .dumping(since: now, from: lastPressure)
            nextSample = now
            out.append(.log("measurement stopped (\(why)); deflating at once, no result"))
        }
    }

    var sampleInterval: Duration { .nanoseconds(Int64(1e9 / configuration.icpRate)) }

    /// Whether a client follows the cuff pressure; without one the cuff skips from one phase
    /// change to the next instead of sampling (nobody would see the samples).
    var pressureWanted: Bool {
        connection.subscribed[.intermediateCuffPressure]?.notify == true
            || connection.subscribed[.enhancedIntermediateCuffPressure]?.notify == true
    }

    mutating func sample(_ now: Timestamp, _ out: inout [Action]) {
        nextSample = now + sampleInterval
        if !pressureWanted {
            // Nobody sees the samples up to the next phase change: skip to it in one step, but
            // on the same sample times and with the same noise drawn, so the readings and their
            // times are the ones a client following the pressure gets (a cuff's values do not
            // depend on who listens).
            var at = now
            var skipped = 0
            while skipped < Self.quietSampleLimit, !phaseChanges(at: at) {
                switch phase {
                case .inflating: _ = Double.random(in: -0.4...0.4, using: &random)
                case .deflating: _ = Double.random(in: -0.2...0.2, using: &random)
                case .idle, .dumping: break
                }
                at = at + sampleInterval
                skipped += 1
            }
            if skipped > 0 {
                nextSample = at
                return
            }
        }
        switch phase {
        case .idle:
            nextSample = nil
        case let .inflating(since, top):
            let t = (now - since).secondsDouble
            var p = min(top, 15 * t) + Double.random(in: -0.4...0.4, using: &random)
            p = max(0, p)
            if 15 * t >= top {
                phase = .deflating(since: now, top: top)
            }
            cuffPressure(p, now, &out)
        case let .deflating(since, top):
            let t = (now - since).secondsDouble
            let base = top - 3 * t
            let r = reading
            if configuration.scenario == .disconnect && base <= (top + r.diastolic) / 2 {
                phase = .idle
                nextSample = nil
                out.append(.log("scenario disconnect: dropping the link mid-measurement"))
                return out.append(.disconnect("simulated link loss"))
            }
            if base <= r.diastolic - 10 {
                phase = .idle
                nextSample = nil
                measurementsDone += 1
                // Never two readings stamped with the same second: a client that sets the clock
                // back (every connection, while a fast --speed runs the cuff ahead) must not make a
                // new reading look like an old one.
                let local = max(cuffClock(now), (lastResultLocal ?? .min) &+ 1)
                lastResultLocal = local
                cuffPressure(max(0, base), now, &out)
                var stored: UInt16? = nil
                if configuration.scenario != .error {
                    stored = nextSequence
                    records.append(StoredRecord(sequence: nextSequence, reading: r, localSeconds: local))
                    if records.count > max(1, configuration.memoryCapacity) {
                        records.removeFirst(records.count - max(1, configuration.memoryCapacity))
                    }
                    nextSequence &+= 1
                }
                return indicateResult(r, localSeconds: local, sequence: stored, now: now, live: true, &out)
            }
            // Oscillations: largest near MAP, at the pulse rate; irregular pulse varies the beat.
            var rate = r.pulse / 60
            if configuration.scenario == .irregularPulse { rate *= 1 + 0.25 * PureMath.sin(t * 0.7) }
            let spread = max(8, (r.systolic - r.diastolic) * 0.45)
            let u = (base - r.map) / spread
            let amplitude = 0.4 + 2.6 / (1 + u * u + u * u * u * u / 2)
            var p =
                base + amplitude * PureMath.sin(2 * Double.pi * rate * t)
                + Double.random(in: -0.2...0.2, using: &random)
            if configuration.scenario == .bodyMovement, (9.0..<10.0).contains(t) { p += 9 }
            cuffPressure(max(0, p), now, &out)
        case let .dumping(since, from):
            let t = (now - since).secondsDouble
            let p = max(0, from - 60 * t)
            if p <= 0 {
                phase = .idle
                nextSample = nil
            }
            cuffPressure(p, now, &out)
        }
    }

    /// At most this many unseen samples are skipped in one step (a bound on the work of one tick).
    static let quietSampleLimit = 100_000

    /// Whether the sample at `at` changes the phase (the top reached, the result or the
    /// scenario's link loss due, the cuff empty): the same tests, on the same arithmetic, as
    /// ``sample(_:_:)``.
    func phaseChanges(at: Timestamp) -> Bool {
        switch phase {
        case .idle: return true
        case let .inflating(since, top): return 15 * (at - since).secondsDouble >= top
        case let .deflating(since, top):
            let base = top - 3 * (at - since).secondsDouble
            let r = reading
            if configuration.scenario == .disconnect && base <= (top + r.diastolic) / 2 { return true }
            return base <= r.diastolic - 10
        case let .dumping(since, from): return from - 60 * (at - since).secondsDouble <= 0
        }
    }

    mutating func cuffPressure(_ mmHg: Double, _ now: Timestamp, _ out: inout [Action]) {
        lastPressure = mmHg
        let unit = configuration.unit
        let v = SFloat(unit == .kPa ? (mmHg / PressureUnit.mmHgPerKPa * 10).rounded() / 10 : mmHg.rounded())
        if connection.subscribed[.intermediateCuffPressure]?.notify == true {
            var m = BloodPressureMeasurement.cuffPressure(v, unit: unit)
            if configuration.scenario == .rfuBits { m.rfuFlags = 0x80 }
            out.append(.notify(.intermediateCuffPressure, m.encode(quirks: configuration.quirks)))
        }
        if connection.subscribed[.enhancedIntermediateCuffPressure]?.notify == true {
            out.append(
                .notify(
                    .enhancedIntermediateCuffPressure,
                    EnhancedBloodPressureMeasurement(unit: unit, kind: .cuffPressure(v)).encode()))
        }
    }

    // MARK: - Results

    func measurement(_ r: Reading, localSeconds: Int64) -> BloodPressureMeasurement {
        let unit = configuration.unit
        func p(_ mmHg: Double) -> SFloat {
            if configuration.scenario == .error { return .nan }
            return SFloat(unit == .kPa ? (mmHg / PressureUnit.mmHgPerKPa * 10).rounded() / 10 : mmHg)
        }
        if configuration.scenario == .error {
            // What real cuffs send on "Err": every value NaN, status 0.
            return BloodPressureMeasurement(
                unit: unit, systolic: .nan, diastolic: .nan, meanArterialPressure: .nan, pulseRate: .nan,
                status: MeasurementStatus())
        }
        if r.failed {
            // A kept "Err" (boso): every value NaN, status 0, with its time and user.
            return BloodPressureMeasurement(
                unit: unit, systolic: .nan, diastolic: .nan, meanArterialPressure: .nan,
                timestamp: DateTime(unixSeconds: localSeconds),
                pulseRate: .nan, userID: r.userID, status: MeasurementStatus())
        }
        let h = habits
        // Beurer BM96: 127 mmHg as mantissa 1270, exponent −1 (0xF4F6).
        func v(_ x: Double) -> SFloat {
            h.exponentMinusOne ? SFloat(mantissa: Int(x.rounded()) * 10, exponent: -1) ?? SFloat(x) : SFloat(x)
        }
        return BloodPressureMeasurement(
            unit: unit, systolic: h.exponentMinusOne ? v(r.systolic) : p(r.systolic),
            diastolic: h.exponentMinusOne ? v(r.diastolic) : p(r.diastolic),
            meanArterialPressure: h.noMeanArterialPressure ? .nan : p(r.map),
            timestamp: DateTime(unixSeconds: localSeconds), pulseRate: v(r.pulse), userID: r.userID,
            status: MeasurementStatus(rawValue: r.status.rawValue | h.rfuStatus),
            rfuFlags: configuration.scenario == .rfuBits ? 0x60 : h.rfuFlags)
    }

    /// What the cuff sends from its memory when a client subscribed to the result, by family.
    mutating func sendMemory(_ now: Timestamp, _ out: inout [Action]) {
        switch habits.memory {
        case .standard:
            let pending = undeliveredRecords
            if configuration.persona == .bps10 && !connection.sentBurst && !pending.isEmpty {
                connection.sentBurst = true
                out.append(.log("sending \(pending.count) stored reading(s), oldest first"))
                for r in pending {
                    indicateResult(r.reading, localSeconds: r.localSeconds, sequence: r.sequence, now: now, &out)
                }
            }
        case let .markersThenBufferThenDisconnect(markers):
            // (A&D: only once its clock was set; until then it waits, and drops the link at the deadline.)
            guard !connection.sentBurst, connection.dateTimeWritten || !habits.hasDateTime else { return }
            connection.sentBurst = true
            let pending = undeliveredRecords
            out.append(
                .log("sending \(markers) NaN marker record(s), then \(pending.count) stored reading(s), oldest first"))
            let marker = BloodPressureMeasurement(systolic: .nan, diastolic: .nan, meanArterialPressure: .nan)
            for _ in 0..<markers {
                indicate(.bloodPressureMeasurement, marker.encode(quirks: configuration.quirks), now, &out)
            }
            for r in pending {
                indicateResult(r.reading, localSeconds: r.localSeconds, sequence: r.sequence, now: now, &out)
            }
            connection.disconnectWhenConfirmed = true
        case .dumpNewestFirstByUser:
            // Every subscription, the whole memory: user 0's readings newest first, then user 1's.
            let order =
                records.filter { $0.reading.userID == 0 }.reversed()
                + records.filter { $0.reading.userID != 0 }.reversed()
            out.append(.log("dumping the memory: \(order.count) reading(s), newest first, user 0 then user 1"))
            for r in order {
                indicateResult(r.reading, localSeconds: r.localSeconds, sequence: r.sequence, now: now, &out)
            }
        case .bufferThenDisconnect:
            guard !connection.sentBurst else { return }
            connection.sentBurst = true
            let pending = undeliveredRecords
            out.append(.log("sending \(pending.count) stored reading(s), oldest first"))
            for r in pending {
                indicateResult(r.reading, localSeconds: r.localSeconds, sequence: r.sequence, now: now, &out)
            }
            if connection.outstandingIndications > 0 {
                connection.disconnectWhenConfirmed = true
            } else {
                out.append(.disconnect("nothing stored"))
            }
        }
    }

    func enhanced(_ r: Reading, localSeconds: Int64) -> EnhancedBloodPressureMeasurement {
        let m = measurement(r, localSeconds: localSeconds)
        let since2000 = UInt32(clamping: localSeconds - Epoch.year2000.unixOffset)
        // (Probe P: the local time was sent as the UTC Time Stamp, off by the host's offset.)
        let utcSince2000 = UInt32(clamping: localSeconds - configuration.utcOffsetSeconds - Epoch.year2000.unixOffset)
        return EnhancedBloodPressureMeasurement(
            unit: m.unit,
            kind: .measurement(
                systolic: m.systolic, diastolic: m.diastolic, meanArterialPressure: m.meanArterialPressure),
            timestamp: m.timestamp == nil ? nil : utcSince2000, pulseRate: m.pulseRate, userID: m.userID,
            status: m.status,
            userFacingTime: m.timestamp == nil || !configuration.features.contains(.userFacingTime) ? nil : since2000,
            epoch: .year2000)
    }

    /// `sequence`: the stored reading this result is (it counts as delivered to the client once
    /// the client confirms it).
    mutating func indicateResult(
        _ r: Reading, localSeconds: Int64, sequence: UInt16?, now: Timestamp, live: Bool = false, _ out: inout [Action]
    ) {
        if connection.subscribed[.bloodPressureMeasurement]?.indicate == true {
            indicate(
                .bloodPressureMeasurement,
                measurement(r, localSeconds: localSeconds).encode(quirks: configuration.quirks), now,
                carrying: sequence, &out)
        } else if connection.subscribed[.enhancedBloodPressureMeasurement]?.indicate == true {
            indicate(
                .enhancedBloodPressureMeasurement, enhanced(r, localSeconds: localSeconds).encode(), now,
                carrying: sequence, &out)
        } else if live {
            out.append(.log("result ready but nobody subscribed to it; kept as a stored record"))
        }
        // (Every branch above appended one action, or none when it is not live.)
        if live {
            resultPending = true
            let m = measurement(r, localSeconds: localSeconds)
            out.append(
                .log(
                    "result: \(m.systolic)/\(m.diastolic) \(m.unit.rawValue), pulse \(m.pulseRate.map { "\($0)" } ?? "-")"
                ))
        }
    }

    /// An indication was confirmed or dropped: once none is in flight, what waited for that
    /// (the linger after a result, an autostart after the upload, switching off after the buffer).
    mutating func indicationsSettled(_ now: Timestamp, _ out: inout [Action]) {
        let allConfirmed = connection.outstandingIndications == 0
        // The last result delivered (re-sent from an earlier connection that never confirmed
        // it): the cuff would linger and switch off, unless it measures anew now (which
        // clears the linger: it switches off after that measurement instead).
        if allConfirmed && resultPending {
            resultPending = false
            lingerUntil = now + configuration.linger
        }
        if allConfirmed && connection.autostartPending {
            connection.autostartPending = false
            startMeasurement(now, why: "autostart: stored readings delivered", &out)
        }
        if connection.outstandingIndications == 0 && connection.disconnectWhenConfirmed {
            connection.disconnectWhenConfirmed = false
            out.append(.log("buffer sent; the cuff switches off"))
            out.append(.disconnect("cuff switched off after sending its buffer"))
        }

    }

    mutating func indicate(
        _ c: CuffCharacteristic, _ value: [UInt8], _ now: Timestamp, carrying sequence: UInt16? = nil,
        endsProcedure: Bool = false, racp: Bool = false, _ out: inout [Action]
    ) {
        connection.indications.append(
            IndicationInFlight(sentAt: now, carries: sequence, endsProcedure: endsProcedure, racp: racp))
        out.append(.indicate(c, value))
    }

    /// A client connected, known by `client` (a Bluetooth address) when the driver can tell
    /// clients apart; nil is the one anonymous client (every Unix-socket client).
    public mutating func connect(client: String?, now: Timestamp, into out: inout [Action]) {
        connection = Connection(client: client, clockDeadline: habits.clockWindow.map { now + $0 })
        lingerUntil = nil
        out.append(.setValue(.currentTime, currentTime(now)))
    }

    /// ``connect(client:now:into:)`` into a new array (tests).
    public mutating func connect(client: String?, now: Timestamp) -> [Action] {
        var out: [Action] = []
        connect(client: client, now: now, into: &out)
        return out
    }

    var clientKey: String { connection.client ?? "" }

    mutating func markDelivered(_ sequence: UInt16) {
        let key = clientKey
        if delivered[key] == nil {
            if deliveredOrder.count >= Self.maxBondedClients { delivered[deliveredOrder.removeFirst()] = nil }
            deliveredOrder.append(key)
        }
        if delivered[key, default: []].insert(sequence).inserted { confirmedReadings += 1 }
    }

    /// The stored readings the connected client has not confirmed yet, oldest first (all of them
    /// when the configuration resends confirmed readings). RACP reports ignore this: a cuff keeps
    /// its readings for RACP until a client deletes them.
    var undeliveredRecords: [StoredRecord] {
        if configuration.resendsConfirmedReadings { return records }
        guard let done = delivered[clientKey], !done.isEmpty else { return records }
        return records.filter { !done.contains($0.sequence) }
    }

    func cuffClock(_ now: Timestamp) -> Int64 {
        clockBase + Int64((now - clockSetAt).secondsDouble.rounded(.down))
    }

    func currentTime(_ now: Timestamp) -> [UInt8] {
        CurrentTime(localSeconds: cuffClock(now), adjustReason: 0).encode()
    }
}

func format1(_ x: Double) -> String { String((x * 10).rounded() / 10) }
