import Testing
import BloodPressure
import CuffCore
@testable import CuffSession

/// Blood Pressure Records that arrive in several segments, through the session machine (the
/// same machine a capture replay drives).
@Suite("Session: segmented Blood Pressure Records")
struct RecordReassemblyTests {
    static let inner = EnhancedBloodPressureMeasurement(
        kind: .measurement(systolic: SFloat(131), diastolic: SFloat(84), meanArterialPressure: SFloat(99)),
        timestamp: 800_000_000, pulseRate: SFloat(66), userID: 1, status: MeasurementStatus(),
        userFacingTime: 800_003_600)
    static let record = BloodPressureRecord(sequenceNumber: 513, recorded: inner.encode())

    /// A session that asked for stored records (BPS 1.1), fed `messages` as 0x2B36 indications.
    static func run(_ messages: [[UInt8]]) -> Harness {
        var h = Harness()
        h.toReady(profile: bps11Profile)
        for (i, v) in messages.enumerated() { _ = h.send(.indication(.bloodPressureRecord, v, t(1 + Double(i) / 100))) }
        return h
    }

    static func logs(_ h: Harness) -> [String] { h.log.compactMap { if case let .log(s) = $0 { s } else { nil } } }

    /// The one measurement of a run, as NDJSON without `received_at` (which differs by arrival).
    static func line(_ h: Harness) -> String? {
        guard h.measurements.count == 1, case var .object(pairs) = h.measurements[0].json else { return nil }
        pairs.removeAll { $0.0 == "received_at" }
        return JSON.object(pairs).serialized()
    }

    @Test(arguments: [2, 3])
    func aRecordInSegmentsIsEmittedLikeASingleSegmentOne(count: Int) throws {
        let body = Self.record.encodeBody()
        let size = (body.count + count - 1) / count
        let segments = Self.record.segments(maxLength: size + 1, startCounter: 5)
        #expect(segments.count == count)
        #expect(segments[0].data.count == size)
        let split = Self.run(segments.map { $0.encode() })
        let single = Self.run([[0x03] + body])
        let line = try #require(Self.line(split))
        #expect(line == Self.line(single))
        #expect(split.measurements[0].sequenceNumber == 513)
        #expect(split.measurements[0].characteristic == .bloodPressureRecord)
        #expect(split.measurements[0].stored)
        #expect(split.measurements[0].raw == Self.inner.encode())
        #expect(!Self.logs(split).contains { $0.contains("warning") })
    }

    /// A cuff that sends stray continuation segments without end: the first 20 warnings are
    /// said, the rest counted, and the session's end sums them up (probe W: 213,572 lines, 36 MB
    /// of stderr in 10 s); a record after them is still taken.
    @Test func endlessStraySegmentsAreSaidABoundedNumberOfTimes() throws {
        let stray: [UInt8] = [0x04] + [UInt8](repeating: 0xAA, count: 19)  // a middle segment, counter 1
        var h = Self.run(Array(repeating: stray, count: 1000) + Self.record.segments(maxLength: 8).map { $0.encode() })
        #expect(h.measurements.count == 1)
        var warnings = Self.logs(h).filter { $0.contains("out of sequence") }
        #expect(warnings.count == 20)
        #expect(Self.logs(h).filter { $0.contains("counted, not said") }.count == 1)
        _ = h.send(.disconnected(nil, t(20)))
        warnings = Self.logs(h).filter { $0.contains("Blood Pressure Record warnings in all") }
        #expect(warnings == ["1000 Blood Pressure Record warnings in all, 980 not said"])
    }

    @Test func aGapDropsThePartialRecordWithAWarning() throws {
        let s = Self.record.segments(maxLength: 8)
        #expect(s.count >= 3)
        let h = Self.run([s[0].encode(), s[2].encode()] + s[3...].map { $0.encode() })
        #expect(h.measurements.isEmpty)
        #expect(
            Self.logs(h).contains {
                $0.hasPrefix("warning: Blood Pressure Record segments out of sequence") && $0.contains("expected 1")
            })
    }

    @Test func aNewFirstBeforeTheLastDropsTheOldOneAndKeepsTheNew() throws {
        let s = Self.record.segments(maxLength: 8)
        let h = Self.run([s[0].encode(), s[1].encode()] + s.map { $0.encode() })
        #expect(h.measurements.count == 1)
        #expect(h.measurements.first?.sequenceNumber == 513)
        #expect(Self.logs(h).contains { $0.contains("warning") && $0.contains("new first segment") })
    }

    @Test func aCounterOutOfOrderDropsTheRecord() throws {
        let s = Self.record.segments(maxLength: 8)
        let h = Self.run([s[0].encode(), s[1].encode(), s[1].encode()] + s[2...].map { $0.encode() })
        #expect(h.measurements.isEmpty)
        #expect(Self.logs(h).filter { $0.contains("out of sequence") }.count >= 1)
    }

    @Test func tooManyBytesAreDroppedNotBuffered() throws {
        var messages: [[UInt8]] = [[0x01, 0x01, 0x02, 0x34, 0x2B] + Array(repeating: 0, count: 240)]
        for i in 1...3 { messages.append([UInt8(i << 2)] + Array(repeating: 0, count: 240)) }
        let h = Self.run(messages)
        #expect(h.measurements.isEmpty)
        #expect(Self.logs(h).contains { $0.contains("exceeds 512 bytes") })
        #expect(!h.m.recordAssembler.isAssembling)
    }

    @Test func aDamagedRecordedValueIsReportedWithItsHeader() throws {
        // Sequence number 513 (01 02), UUID 0x2B34, Enhanced BPM cut inside Diastolic.
        let h = Self.run([hx("03 01 02 34 2B 00 78 00 50")])
        #expect(h.measurements.isEmpty)
        let warning = try #require(Self.logs(h).first { $0.hasPrefix("warning: stored record 513 (0x2B34)") })
        #expect(warning.contains("invalid_recorded_value"))
        #expect(warning.contains("Diastolic"))
        // The next record still arrives.
        var next = h
        _ = next.send(.indication(.bloodPressureRecord, [0x03] + Self.record.encodeBody(), t(2)))
        #expect(next.measurements.count == 1)
    }
}
