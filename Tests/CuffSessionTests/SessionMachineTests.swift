import Testing
import BloodPressure
import CuffCore
@testable import CuffSession

func t(_ s: Double) -> EventTime {
    EventTime(monotonic: .seconds(s), wallMicros: 1_790_000_000_000_000 + Int64(s * 1e6))
}

let fullProfile = CuffProfile(
    hasBloodPressureService: true,
    characteristics: [
        .bloodPressureMeasurement: .indicate, .intermediateCuffPressure: .notify, .bloodPressureFeature: .read,
        .manufacturerName: .read, .modelNumber: .read, .currentTime: [.read, .write], .cuffControl: .write,
    ])

let bps11Profile = CuffProfile(
    hasBloodPressureService: true,
    characteristics: [
        .bloodPressureMeasurement: .indicate, .intermediateCuffPressure: .notify, .bloodPressureFeature: .read,
        .bloodPressureRecord: .indicate, .recordAccessControlPoint: [.write, .indicate],
    ])

let bpmHex = "1E 78 00 50 00 5D 00 E8 07 06 17 0E 23 0A 48 00 01 00 00"
func hx(_ s: String) -> [UInt8] { Hex.decode(s)! }
func icp(_ mmHg: Int) -> [UInt8] { BloodPressureMeasurement.cuffPressure(SFloat(Double(mmHg))).encode() }

/// Drives a machine and answers its requests the way a well-behaved cuff would.
struct Harness {
    var m: CuffSessionMachine
    var log: [CuffSessionMachine.Action] = []
    var clock = 0.0

    init(_ config: CuffSessionConfiguration = CuffSessionConfiguration(address: "test")) {
        m = CuffSessionMachine(configuration: config)
    }

    mutating func send(_ e: CuffSessionMachine.Event) -> [CuffSessionMachine.Action] {
        let a = m.handle(e)
        log += a
        return a
    }

    /// Answers reads/writes/subscribes immediately until the machine waits for the cuff.
    mutating func autoAnswer(_ actions: [CuffSessionMachine.Action], profile: CuffProfile = fullProfile) {
        var queue = actions
        while !queue.isEmpty {
            let a = queue.removeFirst()
            clock += 0.01
            switch a {
            case .connect: queue += send(.connected(t(clock)))
            case .raiseSecurity(let l): queue += send(.securityRaised(l, t(clock)))
            case .discover: queue += send(.discovered(profile, t(clock)))
            case .read(let c):
                let v: [UInt8] =
                    c == .bloodPressureFeature
                    ? [0x3F, 0] : c == .modelNumber ? Array("HEM-7600T".utf8) : Array("Cuffco".utf8)
                queue += send(.readCompleted(c, v, t(clock)))
            case .write(let c, let v):
                if c == .recordAccessControlPoint {
                    queue += send(.writeCompleted(c, t(clock))); _ = v
                } else {
                    queue += send(.writeCompleted(c, t(clock)))
                }
            case .subscribe(let c, _): queue += send(.subscribed(c, t(clock)))
            default: break
            }
        }
    }

    mutating func toReady(profile: CuffProfile = fullProfile) {
        autoAnswer(send(.start(t(0))), profile: profile)
    }

    var emitted: [SessionOutput] { log.compactMap { if case let .emit(o) = $0 { return o } else { return nil } } }
    var measurements: [MeasurementRecord] {
        emitted.compactMap { if case let .measurement(r) = $0 { return r } else { return nil } }
    }
    var outcome: SessionOutcome? { if case let .done(o) = m.state { return o } else { return nil } }
}

@Suite("Cuff session state machine")
struct SessionMachineTests {
    @Test func happyPathOrderOfRequests() throws {
        var h = Harness()
        var c = CuffSessionConfiguration(address: "test")
        c.sendStart = true
        h = Harness(c)
        h.toReady()
        #expect(h.m.state == .ready)
        let requests = h.log.compactMap { a -> String? in
            switch a {
            case .connect: "connect"
            case .discover: "discover"
            case .read(let c): "read \(c.rawValue)"
            case .write(let c, _): "write \(c.rawValue)"
            case .subscribe(let c, let ind): "subscribe \(c.rawValue) \(ind ? "indicate" : "notify")"
            default: nil
            }
        }
        #expect(
            requests == [
                "connect", "discover", "read bloodPressureFeature", "read manufacturerName", "read modelNumber",
                "write currentTime", "subscribe intermediateCuffPressure notify",
                "subscribe bloodPressureMeasurement indicate",
                "write cuffControl",
            ])
        #expect(h.m.device.manufacturer == "Cuffco")
        #expect(h.m.device.features == .allVersion10)
        // The Current Time written is the event's wall clock (UTC offset 0 here), a valid 10-byte value.
        let cts = h.log.compactMap { if case let .write(.currentTime, v) = $0 { return v } else { return nil } }.first!
        #expect(
            try CurrentTime.decode(cts[...]).value.dateTime.iso8601
                == DateTime(unixSeconds: t(0.0).wallMicros / 1_000_000).iso8601)
    }

    @Test func measurementProgressResultThenSettle() {
        var h = Harness()
        h.toReady()
        for (i, p) in [20, 60, 120, 160, 158, 140, 100].enumerated() {
            _ = h.send(.notification(.intermediateCuffPressure, icp(p), t(1 + Double(i) * 0.25)))
        }
        #expect(h.m.state == .measuring(.deflating))
        let progress = h.emitted.compactMap { if case let .progress(p) = $0 { return p } else { return nil } }
        #expect(
            progress.map(\.phase) == [
                .inflating, .inflating, .inflating, .inflating, .inflating, .deflating, .deflating,
            ])
        #expect(progress.map { $0.cuffPressure.doubleValue } == [20, 60, 120, 160, 158, 140, 100])
        #expect(progress.last!.elapsed == 1.5)
        let a = h.send(.indication(.bloodPressureMeasurement, hx(bpmHex), t(5)))
        // The result reaches the sinks before the cuff gets its confirmation.
        let emitIndex = a.firstIndex { if case .emit(.measurement) = $0 { return true } else { return false } }!
        let confirmIndex = a.firstIndex(of: .confirmIndication)!
        #expect(emitIndex < confirmIndex)
        #expect(h.m.state == .result)
        #expect(h.measurements.count == 1)
        #expect(h.measurements[0].stored == false)
        #expect(h.measurements[0].systolic.doubleValue == 120)
        #expect(h.m.nextDeadline == Timestamp.seconds(7))
        _ = h.send(.tick(t(6.9)))
        #expect(h.m.state == .result)
        _ = h.send(.tick(t(7)))
        #expect(h.outcome == .completed)
        #expect(h.m.exitCode == 0)
        guard case let .session(end) = h.emitted.last else { Issue.record("no session end"); return }
        #expect(end.event == .end && end.outcome == .completed && end.measurements == 1)
    }

    @Test func storedBurstBeforeMeasurementIsMarkedStoredAndDeduplicated() {
        var c = CuffSessionConfiguration(address: "test")
        let older = "1E 78 00 50 00 5D 00 E8 07 06 16 08 00 00 48 00 01 00 00"
        let seenKey = MeasurementRecord.from(
            bpm: try! BloodPressureMeasurement.decode(hx(older)[...]).value, warnings: [], raw: hx(older),
            device: DeviceInfo(address: "test"), at: t(0), stored: true
        ).dedupKey
        c.knownRecordKeys = [seenKey]
        var h = Harness(c)
        h.toReady()
        _ = h.send(.indication(.bloodPressureMeasurement, hx(older), t(1)))  // known → skipped, still confirmed
        _ = h.send(.indication(.bloodPressureMeasurement, hx(bpmHex), t(1.1)))
        _ = h.send(.indication(.bloodPressureMeasurement, hx(bpmHex), t(1.2)))  // repeated in the burst → skipped
        #expect(h.log.filter { $0 == .confirmIndication }.count == 3)
        #expect(h.measurements.count == 1)
        #expect(h.measurements[0].stored)
        #expect(h.m.state == .receivingStoredRecords)
        _ = h.send(.tick(t(2.7)))
        #expect(h.m.state == .ready)
    }

    /// A memory sent at radio pace (one record every 100 ms, 30 records: 3 s, twice the burst
    /// window) is stored to its last record, the burst ending a window after it (probe O: the
    /// window ran from the first record, so a Veroval's dump was cut after 1.5 s and a cuff
    /// without cuff pressure had the rest of its buffer printed as live results).
    @Test func aMemoryDumpAtRadioPaceIsStoredToItsLastRecord() {
        let profile = CuffProfile(
            hasBloodPressureService: true, characteristics: [.bloodPressureMeasurement: .indicate])
        var h = Harness()
        h.toReady(profile: profile)
        func record(_ i: Int) -> [UInt8] {
            // 120/80/93 mmHg with a time stamp of 2024-06-(1 + i / 24) (i % 24):00.
            hx("1E 78 00 50 00 5D 00 E8 07 06") + [UInt8(1 + i / 24), UInt8(i % 24), 0, 0] + hx("48 00 01 00 00")
        }
        for i in 0..<30 {
            let at = 1.0 + Double(i) * 0.1
            _ = h.send(.tick(t(at)))
            _ = h.send(.indication(.bloodPressureMeasurement, record(i), t(at)))
        }
        #expect(h.measurements.count == 30)
        #expect(h.measurements.filter { !$0.stored }.isEmpty, "\(h.measurements.map(\.stored))")
        #expect(h.m.state == .receivingStoredRecords)
        _ = h.send(.tick(t(1.0 + 2.9 + 1.4)))
        #expect(h.m.state == .receivingStoredRecords, "the window runs from the last record")
        _ = h.send(.tick(t(1.0 + 2.9 + 1.6)))
        #expect(h.m.state == .ready)
    }

    /// Without known keys, the first result's key is made only when a second one comes: a
    /// repeat of the first is still skipped, right after it, after others, and after the short
    /// list of a session's keys overflows into the set.
    @Test func repeatsOfTheFirstResultAreSkipped() {
        func rec(_ second: Int) -> [UInt8] {
            hx("1E 78 00 50 00 5D 00 E8 07 06 16 08 00 \(Hex.digits(UInt8(second), 2)) 48 00 01 00 00")
        }
        var h = Harness()
        h.toReady()
        var time = 1.0
        func send(_ second: Int) {
            _ = h.send(.indication(.bloodPressureMeasurement, rec(second), t(time)))
            time += 0.1
        }
        for second in [0, 0, 1, 0, 1] { send(second) }
        #expect(h.measurements.count == 2)
        for second in 2..<12 { send(second) }
        for second in [0, 1, 5, 11] { send(second) }
        #expect(h.measurements.count == 12)
        #expect(h.measurements.map { Int($0.raw[13]) } == Array(0..<12))
        #expect(h.log.filter { $0 == .confirmIndication }.count == 19)
    }

    @Test func bps11AsksRACPForRecordsAfterLastKnownSequence() throws {
        var c = CuffSessionConfiguration(address: "test")
        c.lastSequenceNumber = 4
        var h = Harness(c)
        h.toReady(profile: bps11Profile)
        let racp = h.log.compactMap {
            if case let .write(.recordAccessControlPoint, v) = $0 { return v } else { return nil }
        }
        #expect(racp == [hx("01 03 01 05 00")])
        #expect(h.m.state == .receivingStoredRecords)
        let inner = EnhancedBloodPressureMeasurement(
            kind: .measurement(systolic: SFloat(118), diastolic: SFloat(76), meanArterialPressure: SFloat(90)),
            timestamp: 800_000_000, userID: 1)
        let rec = BloodPressureRecord(sequenceNumber: 5, recorded: inner.encode())
        _ = h.send(.indication(.bloodPressureRecord, [3] + rec.encodeBody(), t(1)))
        _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 01"), t(1.1)))
        #expect(h.m.state == .ready)
        #expect(h.measurements.count == 1)
        #expect(h.measurements[0].sequenceNumber == 5)
        #expect(h.measurements[0].characteristic == .bloodPressureRecord)
        #expect(h.measurements[0].systolic.doubleValue == 118)
    }

    /// A BPS 1.1 session whose mark is 40, ready: it has asked for the records from 41 on.
    static func afterMark40() -> Harness {
        var c = CuffSessionConfiguration(address: "test")
        c.lastSequenceNumber = 40
        var h = Harness(c)
        h.toReady(profile: bps11Profile)
        return h
    }

    /// The RACP requests the session wrote, in order.
    static func racpWrites(_ h: Harness) -> [[UInt8]] {
        h.log.compactMap { if case let .write(.recordAccessControlPoint, v) = $0 { v } else { nil } }
    }

    /// Stored record `n` (a Blood Pressure Record indication holding an enhanced measurement).
    static func storedRecord(_ n: UInt16, systolic: Double) -> [UInt8] {
        let inner = EnhancedBloodPressureMeasurement(
            kind: .measurement(systolic: SFloat(systolic), diastolic: SFloat(76), meanArterialPressure: SFloat(90)),
            timestamp: 800_000_000 + UInt32(n), userID: 1)
        return [3] + BloodPressureRecord(sequenceNumber: n, recorded: inner.encode()).encodeBody()
    }

    /// Probe S #2: a cuff whose sequence numbers started again (a reset, new batteries, past
    /// 65535) holds its new readings below the mark; asked only for those after it, it found none
    /// every time, and they stayed on the cuff for good. Its last record tells: when that lies
    /// below the mark, all records are asked for.
    @Test func aCuffWhoseNumberingStartedAgainIsAskedForAllItsRecords() throws {
        var h = Self.afterMark40()
        #expect(Self.racpWrites(h) == [hx("01 03 01 29 00")])  // 41 and after (its write answered by toReady)
        let answered = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 06"), t(1.1)))  // no records found
        #expect(Self.racpWrites(h).last == hx("01 06"))  // the last record
        // Asked once the response is confirmed: until then the cuff's procedure is in progress.
        let confirmed = answered.firstIndex(of: .confirmIndication)
        let asked = answered.firstIndex(of: .write(.recordAccessControlPoint, hx("01 06")))
        #expect(confirmed != nil && asked != nil && confirmed! < asked!, "\(answered)")
        _ = h.send(.writeCompleted(.recordAccessControlPoint, t(1.2)))
        _ = h.send(.indication(.bloodPressureRecord, Self.storedRecord(3, systolic: 113), t(1.3)))
        #expect(h.measurements.isEmpty)  // asked only for its number
        _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 01"), t(1.4)))
        #expect(Self.racpWrites(h).last == hx("01 01"))  // all records
        #expect(
            h.log.contains(
                .log(
                    "the cuff's last stored record is number 3, below 40, the last one kept: its numbering started again; asking for all its records"
                )))
        _ = h.send(.writeCompleted(.recordAccessControlPoint, t(1.5)))
        for n: UInt16 in 1...3 {
            _ = h.send(.indication(.bloodPressureRecord, Self.storedRecord(n, systolic: 110 + Double(n)), t(1.6)))
        }
        _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 01"), t(1.7)))
        #expect(Self.racpWrites(h).count == 3)
        #expect(h.measurements.map(\.sequenceNumber) == [1, 2, 3])
        #expect(h.measurements.map(\.systolic.doubleValue) == [111, 112, 113])
        #expect(h.m.state == .ready)
    }

    /// Stored record `n` in segments of `maxLength` bytes (a continuation or more).
    static func storedSegments(_ n: UInt16, systolic: Double) -> [[UInt8]] {
        let inner = EnhancedBloodPressureMeasurement(
            kind: .measurement(systolic: SFloat(systolic), diastolic: SFloat(76), meanArterialPressure: SFloat(90)),
            timestamp: 800_000_000 + UInt32(n), userID: 1)
        return BloodPressureRecord(sequenceNumber: n, recorded: inner.encode()).segments(maxLength: 8).map {
            $0.encode()
        }
    }

    /// Probe W #2: a stored record whose segments came out of sequence was dropped, the records
    /// after it were kept, and the next session asked only for records after the highest kept:
    /// the dropped one stayed on the cuff for good. The report is asked for once more; what came
    /// whole the first time is not emitted twice.
    @Test func aReportWithADroppedRecordIsAskedForOnceMore() throws {
        var h = Self.afterMark40()
        let first = Self.storedSegments(41, systolic: 121)
        #expect(first.count >= 3)
        // 41 with a gap (its second segment lost), then 42 whole.
        for v in [first[0]] + first[2...] + [Self.storedRecord(42, systolic: 122)] {
            _ = h.send(.indication(.bloodPressureRecord, v, t(1.1)))
        }
        #expect(h.measurements.map(\.sequenceNumber) == [42])
        _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 01"), t(1.2)))
        #expect(Self.racpWrites(h) == [hx("01 03 01 29 00"), hx("01 03 01 29 00")])
        #expect(
            h.log.contains(
                .log(
                    "stored records did not arrive whole (segments out of sequence, or malformed); asking for the stored records again"
                )))
        _ = h.send(.writeCompleted(.recordAccessControlPoint, t(1.3)))
        for v in first + [Self.storedRecord(42, systolic: 122)] {
            _ = h.send(.indication(.bloodPressureRecord, v, t(1.4)))
        }
        _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 01"), t(1.5)))
        #expect(h.measurements.map(\.sequenceNumber) == [42, 41])
        #expect(h.measurements.map(\.systolic.doubleValue) == [122, 121])
        #expect(Self.racpWrites(h).count == 2)
        #expect(h.m.state == .ready)
    }

    /// Asked once more only: a cuff whose record never comes whole is reported, not asked for without end.
    @Test func aRecordThatNeverComesWholeIsAskedForOnceMoreThenReported() throws {
        var h = Self.afterMark40()
        let broken = Array(Self.storedSegments(41, systolic: 121).dropFirst())  // no first segment
        for round in 0..<2 {
            for v in broken { _ = h.send(.indication(.bloodPressureRecord, v, t(1.1 + Double(round)))) }
            _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 01"), t(1.2 + Double(round))))
            _ = h.send(.writeCompleted(.recordAccessControlPoint, t(1.3 + Double(round))))
        }
        #expect(Self.racpWrites(h).count == 2)
        #expect(
            h.log.contains(
                .log(
                    "warning: stored records did not arrive whole after asking again; they are not asked for again in this session"
                )))
        #expect(h.measurements.isEmpty)
        #expect(h.m.state == .ready)
    }

    /// The usual case: nothing after the mark, and the cuff's last record is the mark itself. One
    /// more request, and nothing is emitted again (the session still has no result).
    @Test func aCuffWithNothingNewIsAskedOnlyForItsLastRecord() throws {
        var h = Self.afterMark40()
        _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 06"), t(1.1)))
        _ = h.send(.writeCompleted(.recordAccessControlPoint, t(1.2)))
        _ = h.send(.indication(.bloodPressureRecord, Self.storedRecord(40, systolic: 118), t(1.3)))
        _ = h.send(.indication(.recordAccessControlPoint, hx("06 00 01 01"), t(1.4)))
        #expect(Self.racpWrites(h) == [hx("01 03 01 29 00"), hx("01 06")])
        #expect(h.measurements.isEmpty)
        #expect(h.m.state == .ready)
        #expect(h.m.exitCode == SessionOutcome.noResult.exitCode)
    }

    @Test func serviceMissing() {
        var h = Harness()
        h.toReady(profile: CuffProfile(hasBloodPressureService: false, characteristics: [:]))
        #expect(h.outcome == .serviceMissing)
        #expect(h.m.exitCode == SessionOutcome.serviceMissing.exitCode)
    }

    @Test func securityIsRaisedBeforeDiscoveryWhenAsked() {
        var c = CuffSessionConfiguration(address: "test")
        c.security = .medium
        var h = Harness(c)
        _ = h.send(.start(t(0)))
        #expect(h.send(.connected(t(0.1))).contains(.raiseSecurity(.medium)))
        #expect(h.m.state == .securing)
        _ = h.send(.securityRefused("pairing rejected", t(0.2)))
        #expect(h.outcome == .securityRefused)
    }

    @Test func errorFrameIsAResultWithoutValues() {
        var h = Harness()
        h.toReady()
        _ = h.send(.notification(.intermediateCuffPressure, icp(30), t(1)))
        _ = h.send(.indication(.bloodPressureMeasurement, hx("14 FF 07 FF 07 FF 07 FF 07 00 00"), t(2)))
        #expect(h.measurements.count == 1)
        #expect(!h.measurements[0].hasValues)
        #expect(h.log.contains(.log("the cuff reported an error (no values) — measure again")))
    }

    /// A result with one pressure special (diastolic NRes) and the others numbers is no "no
    /// values" error: the log says which kind it is (probe L: 16.0/NRes kPa said "no values").
    @Test func aResultLackingOnePressureIsNotSaidToHaveNoValues() {
        var h = Harness()
        h.toReady()
        _ = h.send(.notification(.intermediateCuffPressure, icp(30), t(1)))
        // Flags 0x01 (kPa): systolic 16.0 (0x00A0 = 160 × 10⁻¹ as F0A0), diastolic NRes, MAP 12.0.
        _ = h.send(.indication(.bloodPressureMeasurement, hx("01 A0 F0 00 08 78 F0"), t(2)))
        #expect(h.measurements.count == 1)
        #expect(!h.measurements[0].hasValues)
        #expect(!h.log.contains(.log("the cuff reported an error (no values) — measure again")), "\(h.log)")
        #expect(
            h.log.contains(
                .log("the cuff's result lacks a systolic or diastolic pressure (a special value) — measure again")),
            "\(h.log)")
    }

    @Test func timeoutWithoutResult() {
        var c = CuffSessionConfiguration(address: "test")
        c.timeout = .seconds(10)
        var h = Harness(c)
        h.toReady()
        _ = h.send(.tick(t(9.99)))
        #expect(h.outcome == nil)
        _ = h.send(.tick(t(10)))
        #expect(h.outcome == .timedOut)
        #expect(h.m.exitCode == SessionOutcome.timedOut.exitCode)
    }

    @Test func followKeepsGoingUntilDisconnect() {
        var c = CuffSessionConfiguration(address: "test")
        c.follow = true
        var h = Harness(c)
        h.toReady()
        _ = h.send(.notification(.intermediateCuffPressure, icp(30), t(1)))
        _ = h.send(.indication(.bloodPressureMeasurement, hx(bpmHex), t(2)))
        _ = h.send(.tick(t(30)))
        #expect(h.outcome == nil)
        _ = h.send(.disconnected(nil, t(31)))
        #expect(h.outcome == .completed)
    }

    @Test func malformedValuesAreLoggedNotFatal() {
        var h = Harness()
        h.toReady()
        _ = h.send(.indication(.bloodPressureMeasurement, [0x03, 0x01], t(1)))
        #expect(h.outcome == nil)
        #expect(h.log.last == .confirmIndication)
        #expect(h.measurements.isEmpty)
    }

    // MARK: Table: stop and disconnect from every state

    /// Drives a fresh machine into `state`.
    static func machine(in state: String) -> Harness {
        var c = CuffSessionConfiguration(address: "test")
        c.security = state == "securing" ? .medium : .low
        var h = Harness(c)
        switch state {
        case "idle": break
        case "connecting": _ = h.send(.start(t(0)))
        case "securing": _ = h.send(.start(t(0))); _ = h.send(.connected(t(0.1)))
        case "discovering": _ = h.send(.start(t(0))); _ = h.send(.connected(t(0.1)))
        case "configuring":
            _ = h.send(.start(t(0))); _ = h.send(.connected(t(0.1))); _ = h.send(.discovered(fullProfile, t(0.2)))
        case "receiving_stored_records":
            h.toReady(); _ = h.send(.indication(.bloodPressureMeasurement, hx(bpmHex), t(1)))
        case "ready": h.toReady()
        case "measuring":
            h.toReady(); _ = h.send(.notification(.intermediateCuffPressure, icp(40), t(1)))
        case "result":
            h.toReady(); _ = h.send(.notification(.intermediateCuffPressure, icp(40), t(1)))
            _ = h.send(.indication(.bloodPressureMeasurement, hx(bpmHex), t(2)))
        case "stopping":
            h.toReady(); _ = h.send(.notification(.intermediateCuffPressure, icp(40), t(1)));
            _ = h.send(.stopRequested(t(1.5)))
        default: Issue.record("unknown state \(state)")
        }
        #expect(h.m.state.name.hasPrefix(state), "reached \(h.m.state.name), wanted \(state)")
        return h
    }

    static let states = [
        "idle", "connecting", "securing", "discovering", "configuring", "receiving_stored_records", "ready",
        "measuring", "result", "stopping",
    ]

    @Test(arguments: states)
    func stopFromEveryState(state: String) {
        var h = Self.machine(in: state)
        let a = h.send(.stopRequested(t(3)))
        if state == "measuring" || state == "ready" {
            // A cuff with a control point is told to stop (deflate) first.
            #expect(a.contains(.write(.cuffControl, [0x02])))
            #expect(h.m.state == .stopping)
            _ = h.send(.writeCompleted(.cuffControl, t(3.1)))
        } else if state == "stopping" {
            #expect(a.isEmpty)
            _ = h.send(.tick(t(3.6)))  // the cuff never acknowledged: give up after 2 s
        }
        #expect(h.outcome == .stopped, "from \(state): \(h.m.state)")
        if state == "result" || state == "receiving_stored_records" {
            #expect(h.m.exitCode == 0)  // results received before the stop are kept
        } else {
            #expect(h.m.exitCode == SessionOutcome.stopped.exitCode)
        }
    }

    @Test(arguments: states)
    func disconnectFromEveryState(state: String) {
        var h = Self.machine(in: state)
        _ = h.send(.disconnected("link lost", t(3)))
        let expected: SessionOutcome =
            switch state {
            case "idle": .disconnected
            case "stopping": .stopped
            case "result", "receiving_stored_records": .completed
            default: .disconnected
            }
        #expect(h.outcome == expected, "from \(state)")
        #expect(h.emitted.last.map { if case .session = $0 { true } else { false } } == true)
    }

    @Test(arguments: states)
    func protocolErrorFromEveryState(state: String) {
        var h = Self.machine(in: state)
        _ = h.send(.protocolError("peer sent garbage", t(3)))
        #expect(h.outcome == .protocolError)
        _ = h.send(.tick(t(100)))  // nothing happens after the end
        #expect(h.outcome == .protocolError)
    }

    @Test(arguments: states)
    func transactionTimeoutFromEveryState(state: String) {
        var h = Self.machine(in: state)
        _ = h.send(.transactionTimedOut(t(40)))
        #expect(h.outcome == .timedOut)
    }
}

/// Actions handed out into a caller's array, and the measurement's data kept in its state.
@Suite struct ActionBufferTests {
    @Test func handleIntoAppendsTheSameActionsAsHandle() {
        // Two machines fed the same events: one returns arrays, one appends to a reused buffer.
        var a = Harness()
        var b = CuffSessionMachine(configuration: CuffSessionConfiguration(address: "test"))
        var buffer: [CuffSessionMachine.Action] = [.log("left by the caller")]
        let events: [CuffSessionMachine.Event] = [
            .start(t(0)), .connected(t(0.1)), .discovered(fullProfile, t(0.2)),
            .readCompleted(.bloodPressureFeature, [0x3F, 0], t(0.3)),
            .readCompleted(.manufacturerName, Array("Cuffco".utf8), t(0.4)),
            .readCompleted(.modelNumber, Array("M".utf8), t(0.5)), .writeCompleted(.currentTime, t(0.6)),
            .subscribed(.intermediateCuffPressure, t(0.7)), .subscribed(.bloodPressureMeasurement, t(0.8)),
            .notification(.intermediateCuffPressure, icp(40), t(1)),
            .indication(.bloodPressureMeasurement, hx(bpmHex), t(2)),
            .tick(t(10)),
        ]
        var all: [CuffSessionMachine.Action] = []
        for e in events {
            let expected = a.send(e)
            all += expected
            let before = buffer.count
            b.handle(e, into: &buffer)
            // Appended after what the buffer held, never replacing it.
            #expect(Array(buffer[before...]) == expected, "\(e)")
        }
        #expect(buffer.first == .log("left by the caller"))
        #expect(all.contains { if case .emit(.measurement) = $0 { true } else { false } })
        #expect(all.last == .finished(.completed))
    }

    @Test func stoppingMidMeasurementKeepsItsPhaseAndStart() {
        var h = Harness()
        h.toReady()
        for (i, p) in [40, 120, 160, 150, 140].enumerated() {
            _ = h.send(.notification(.intermediateCuffPressure, icp(p), t(1 + Double(i))))
        }
        #expect(h.m.state == .measuring(.deflating))
        // This cuff has a control point: the stop command goes out and the session waits in stopping.
        _ = h.send(.stopRequested(t(6)))
        #expect(h.m.state == .stopping)
        // Cuff pressure after the stop still belongs to the same measurement: its elapsed time
        // counts from the first value (t = 1), and the phase stays deflating.
        let p = h.m.progress(
            notified: .intermediateCuffPressure, UnsafeRawBufferPointer(start: nil, count: 0), at: t(7))
        #expect(p == nil)  // an empty value does not decode: nothing changes
        let value = icp(130)
        let q = value.withUnsafeBytes { h.m.progress(notified: .intermediateCuffPressure, $0, at: t(7)) }
        #expect(q?.phase == .deflating)
        #expect(q?.elapsed == 6)
        #expect(h.m.state == .stopping)
    }
}
