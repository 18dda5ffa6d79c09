import Testing
import BloodPressure
import CuffCore
@testable import CuffSession

/// `CuffSessionMachine.progress(notified:_:at:)` (the replay's short path for cuff-pressure
/// notifications) must change the machine exactly as `handle(.notification)` does, and give the
/// same progress record; where it returns nil, `handle` decides.
@Suite("Cuff-pressure short path")
struct ProgressShortPathTests {
    static func eicp(_ p: SFloat, unit: PressureUnit = .mmHg) -> [UInt8] {
        EnhancedBloodPressureMeasurement(unit: unit, kind: .cuffPressure(p)).encode()
    }

    /// Values a session meets: a rise, the wiggle on the way down, kPa, special values, a
    /// malformed value, an enhanced cuff pressure, and a value of the wrong kind.
    static let values: [(CuffCharacteristic, [UInt8])] = {
        var v: [(CuffCharacteristic, [UInt8])] = []
        for p in stride(from: 0, through: 160, by: 15) { v.append((.intermediateCuffPressure, icp(p))) }
        for p in [158, 159, 155, 156, 150, 151, 140, 120, 100, 80, 40] { v.append((.intermediateCuffPressure, icp(p))) }
        v.append((.intermediateCuffPressure, BloodPressureMeasurement.cuffPressure(SFloat(12.5), unit: .kPa).encode()))
        v.append((.intermediateCuffPressure, BloodPressureMeasurement.cuffPressure(.nan).encode()))
        // NRes
        v.append((.intermediateCuffPressure, BloodPressureMeasurement.cuffPressure(SFloat(rawValue: 0x0800)).encode()))
        v.append((.intermediateCuffPressure, [0x00, 0x50]))  // cut short
        v.append((.intermediateCuffPressure, icp(60) + [0xAA]))  // trailing byte: a warning, still a value
        v.append((.intermediateCuffPressure, [0x80] + Array(icp(61).dropFirst())))  // RFU flag bit
        v.append((.enhancedIntermediateCuffPressure, eicp(SFloat(70))))
        v.append((.enhancedIntermediateCuffPressure, eicp(SFloat(9.1), unit: .kPa)))
        v.append(
            (
                .enhancedIntermediateCuffPressure,
                EnhancedBloodPressureMeasurement(
                    kind: .measurement(systolic: SFloat(120), diastolic: SFloat(80), meanArterialPressure: SFloat(93))
                ).encode()
            ))
        v.append((.enhancedIntermediateCuffPressure, [0x00]))
        v.append((.bloodPressureMeasurement, hx(bpmHex)))  // not a cuff pressure: nil, `handle` decides
        for p in [190, 170, 120] { v.append((.intermediateCuffPressure, icp(p))) }  // a new measurement
        return v
    }()

    @Test func sameStateAndRecordsAsHandle() {
        var a = Harness()
        a.toReady()
        var b = a
        var shortPathTaken = 0
        for (i, (c, v)) in Self.values.enumerated() {
            let at = t(1 + Double(i) * 0.2)
            let expected = a.m.handle(.notification(c, v, at))
            let got: [CuffSessionMachine.Action]
            if let p = v.withUnsafeBytes({ b.m.progress(notified: c, $0, at: at) }) {
                shortPathTaken += 1
                got = [.emit(.progress(p))]
            } else {
                got = b.m.handle(.notification(c, v, at))
            }
            #expect(got == expected, "value \(i): \(Hex.encode(v)) on \(c)")
            #expect(a.m.state == b.m.state, "value \(i)")
            #expect(a.m.nextDeadline == b.m.nextDeadline, "value \(i)")
        }
        #expect(shortPathTaken >= Self.values.count - 6)
        // What follows depends on the state the values left: a live result, then the settle tick.
        let result = t(20)
        #expect(
            a.m.handle(.indication(.bloodPressureMeasurement, hx(bpmHex), result))
                == b.m.handle(.indication(.bloodPressureMeasurement, hx(bpmHex), result)))
        #expect(a.m.handle(.tick(t(40))) == b.m.handle(.tick(t(40))))
        #expect(a.m.state == b.m.state)
    }

    @Test func finalStateGivesNil() {
        var h = Harness()
        h.toReady()
        _ = h.send(.disconnected(nil, t(1)))
        #expect(h.m.state.isFinal)
        #expect(icp(40).withUnsafeBytes { h.m.progress(notified: .intermediateCuffPressure, $0, at: t(2)) } == nil)
        #expect(h.m.handle(.notification(.intermediateCuffPressure, icp(40), t(2))).isEmpty)
    }
}

/// The deduplication key is stored (SQLite `dedup_key`), so its text changes only on purpose, and
/// a store's older keys are still known (``MeasurementRecord/legacyDedupKey``).
@Suite("Dedup key text")
struct DedupKeyTextTests {
    /// The key as specified: a live reading's as first specified; a stored record's (sequence
    /// number) with its time, when it has one, and its values since probe W.
    static func reference(_ r: MeasurementRecord) -> String {
        let words = [
            r.systolic.rawValue, r.diastolic.rawValue, r.meanArterialPressure.rawValue, r.pulseRate?.rawValue ?? 0,
        ]
        let values = Hex.encode(words.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        let head = "\(r.device.identity)|user:\(r.userID.map(String.init) ?? "-")"
        if let seq = r.sequenceNumber {
            return head + "|seq:\(seq)" + ((r.deviceTime ?? r.timestamp).map { "|ts:" + $0 } ?? "") + "|" + values
        }
        return head + "|ts:\(r.deviceTime ?? r.timestamp ?? "received " + r.receivedAt.iso8601)|" + values
    }

    /// The stored record's key as first specified, which stores kept before probe W hold.
    static func firstReference(_ r: MeasurementRecord) -> String? {
        r.sequenceNumber.map { "\(r.device.identity)|user:\(r.userID.map(String.init) ?? "-")|seq:\($0)" }
    }

    /// A cuff that numbers its records again from 0 (reset, new batteries, a wrap past 65535)
    /// sends new readings under numbers a store knows: their time and values tell them apart
    /// (probe W: all three were skipped as "already received", for good); the same record sent
    /// again is still the same key.
    @Test func aRecordNumberedAgainIsANewReading() throws {
        func stored(_ seq: UInt16, _ day: UInt8, _ sys: Double) -> MeasurementRecord {
            let m = BloodPressureMeasurement(
                unit: .mmHg, systolic: SFloat(sys), diastolic: SFloat(80), meanArterialPressure: SFloat(93),
                timestamp: DateTime(year: 2026, month: 1, day: day, hours: 8, minutes: 0, seconds: 0), pulseRate: nil,
                userID: 1, status: nil)
            var device = DeviceInfo(address: "AA:BB:CC:DD:EE:FF")
            device.serial = "SN-1"
            var r = MeasurementRecord.from(
                bpm: m, warnings: [], raw: m.encode(), device: device, at: t(1), stored: true)
            r.sequenceNumber = seq
            return r
        }
        let before = stored(0, 1, 120), again = stored(0, 1, 120), renumbered = stored(0, 28, 141)
        #expect(before.dedupKey == again.dedupKey)
        #expect(renumbered.dedupKey != before.dedupKey)
        #expect(!renumbered.wasKeptLive { $0 == before.dedupKey })
        // A store kept before the change holds `serial:SN-1|user:1|seq:0`: a record read again is known by it.
        #expect(again.wasKeptLive { $0 == "serial:SN-1|user:1|seq:0" })
    }

    @Test func keysMatchTheirSpecifiedText() throws {
        var g = SeededRandom(seed: 99)
        var checked = 0
        for i in 0..<500 {
            let ts: DateTime? =
                i % 3 == 0
                ? nil
                : DateTime(
                    year: UInt16.random(in: 0...2030, using: &g), month: 11, day: 22, hours: 8, minutes: 14,
                    seconds: UInt8(i % 60))
            let m = BloodPressureMeasurement(
                unit: .mmHg, systolic: SFloat(rawValue: UInt16.random(in: 0...UInt16.max, using: &g)),
                diastolic: SFloat(rawValue: UInt16.random(in: 0...UInt16.max, using: &g)), meanArterialPressure: .nan,
                timestamp: ts,
                pulseRate: i % 2 == 0 ? nil : SFloat(rawValue: UInt16.random(in: 0...UInt16.max, using: &g)),
                userID: i % 4 == 0 ? nil : UInt8(i % 256), status: nil)
            var device = DeviceInfo(address: "AA:BB:CC:DD:EE:FF")
            if i % 5 == 0 { device.serial = "SN-\(i)" }
            var r = MeasurementRecord.from(
                bpm: m, warnings: [], raw: m.encode(), device: device, at: t(Double(i)), stored: i % 2 == 0)
            #expect(r.dedupKey == Self.reference(r))
            r.sequenceNumber = i % 7 == 0 ? UInt16(i) : nil
            #expect(r.dedupKey == Self.reference(r))
            #expect(r.legacyDedupKey == Self.firstReference(r))
            // A store that holds the first key knows the record by it.
            if let legacy = Self.firstReference(r) { #expect(r.wasKeptLive { $0 == legacy }) }
            checked += 1
        }
        #expect(checked == 500)
    }
}
