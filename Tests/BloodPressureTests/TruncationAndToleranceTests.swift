import Testing
import CuffCore
@testable import BloodPressure

@Suite("Truncation and tolerance")
struct TruncationAndToleranceTests {
    static let validVectors: [(BPSCharacteristic, String)] = [
        (.bloodPressureMeasurement, "1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00"),
        (.bloodPressureMeasurement, "15 BD F0 0B 00 9F F0 3C 00 12 00"),
        (.bloodPressureMeasurement, "00 BD F0 0B 00 9F F0"),
        (.bloodPressureMeasurement, "1F 79 00 51 00 6A 00 E4 07 05 15 0A 1E 2D 48 00 01 06 00"),
        (.bloodPressureMeasurement, "08 48 00 51 00 40 00 01"),
        (.intermediateCuffPressure, "1E 04 00 00 00 00 00 00 00 04 11 14 29 3B 3C 00 01 27 00"),
        (.intermediateCuffPressure, "15 6F F0 00 00 00 00 3C 00 12 00"),
        (.intermediateCuffPressure, "00 D7 F0 00 00 00 00"),
        (.intermediateCuffPressure, "00 64 00 FF 07 FF 07"),
        (.bloodPressureFeature, "FF 01"),
        (.dateTime, "E2 07 04 11 0F 33 00"),
        (.currentTime, "E8 07 06 17 0E 23 0A 07 80 01"),
        (.enhancedBloodPressureMeasurement, "7E 78 00 50 00 64 00 80 51 01 00 48 00 05 03 00 00 A3 02 00"),
        (.enhancedBloodPressureMeasurement, "02 01 00 02 00 03 00 04 05 06 07"),
        (.enhancedIntermediateCuffPressure, "7E 78 00 80 51 01 00 48 00 05 03 00 00 A3 02 00"),
        (.bloodPressureRecord, "03 01 00 34 2B 00 78 00 50 00 5D 00"),
        (.recordAccessControlPoint, "06 00 01 01"),
        (.recordAccessControlPoint, "05 00 04 03 02 01"),
        (.recordAccessControlPoint, "01 04 01 02 00 09 00"),
    ]

    /// Every strict prefix of every valid vector fails with a named error at an offset inside it.
    @Test(arguments: validVectors)
    func everyTruncatedPrefixFailsWithANamedError(characteristic: BPSCharacteristic, hex: String) throws {
        let full = bytes(hex)
        _ = try characteristic.decodeJSON(full[...])
        for n in 0..<full.count {
            let prefix = full[0..<n]
            do {
                let json = try characteristic.decodeJSON(prefix)
                // A prefix may only decode when the layout genuinely allows it: RACP counts
                // of 1 or 2 bytes, and a record whose recorded value is a shorter valid value.
                let allowed = characteristic == .recordAccessControlPoint || characteristic == .bloodPressureRecord
                #expect(allowed, "prefix of \(n) bytes decoded: \(json.serialized())")
            } catch {
                #expect(!error.field.isEmpty)
                #expect(error.offset <= n, "\(error) for prefix \(n)")
                #expect([.truncated, .invalidLength, .unsupported].contains(error.code))
            }
        }
    }

    @Test func rfuFlagsAndStatusAreWarningsNotErrors() throws {
        // Flags 0xF0: status present plus RFU bits 5–7; status has RFU bits 6 and 15.
        let d = try BloodPressureMeasurement.decode(bytes("F0 78 00 50 00 5D 00 41 80")[...])
        #expect(d.value.systolic.doubleValue == 120)
        #expect(d.value.rfuFlags == 0xE0)
        #expect(d.value.status?.bodyMovement == true)
        #expect(d.warnings.map(\.code) == [.rfuFlags, .rfuStatus])
        // and the encoder sends them back
        #expect(d.value.encode() == bytes("F0 78 00 50 00 5D 00 41 80"))
    }

    @Test func trailingBytesAreAWarning() throws {
        let d = try BloodPressureMeasurement.decode(bytes("00 78 00 50 00 5D 00 AA BB")[...])
        #expect(d.warnings.map(\.code) == [.trailingBytes])
        #expect(d.warnings.first?.offset == 7)
    }

    @Test func reservedPulseRangeIsReported() throws {
        let d = try BloodPressureMeasurement.decode(bytes("10 78 00 50 00 5D 00 18 00")[...])
        #expect(d.value.status?.pulseRateRange == .reserved)
        #expect(d.warnings.map(\.code) == [.reservedPulseRateRange])
    }

    @Test func featureRFUBits() throws {
        let d = try BloodPressureFeature.decode(bytes("FF 03")[...])
        #expect(d.warnings.map(\.code) == [.rfuFeatures])
    }

    @Test func beurerQuirk() throws {
        // Flags 0x14 (pulse + status, NO user-ID flag), pulse 72 big-endian (00 48), user 2, status 0x0004 big-endian.
        let wire = bytes("14 80 00 55 00 65 00 00 48 02 00 04")
        // Without the quirk: pulse is read little-endian (0x4800 → 0 × 10^4), status 0x0200 and a trailing byte.
        let plain = try BloodPressureMeasurement.decode(wire[...])
        #expect(plain.value.pulseRate?.doubleValue != 72)
        #expect(plain.warnings.contains { $0.code == .trailingBytes })
        let q = try BloodPressureMeasurement.decode(wire[...], quirks: QuirkProfile.beurerBM85.options)
        #expect(q.value.pulseRate?.doubleValue == 72)
        #expect(q.value.userID == 2)
        #expect(q.value.status?.irregularPulse == true)
        #expect(q.warnings.map(\.code) == [.quirkApplied])
        // The simulator's encoder produces the same bytes.
        #expect(q.value.encode(quirks: QuirkProfile.beurerBM85.options) == wire)
        #expect(QuirkProfile.matching(name: "BM85", model: nil)?.name == "beurer-bm85")
        #expect(QuirkProfile.matching(name: "Omron", model: "HEM-7155T") == nil)
    }

    @Test func multiSegmentRecordReassembly() throws {
        let record = BloodPressureRecord(
            sequenceNumber: 513, recordedUUID: 0x2B34,
            recorded: EnhancedBloodPressureMeasurement(
                kind: .measurement(systolic: SFloat(131), diastolic: SFloat(84), meanArterialPressure: SFloat(99)),
                timestamp: 800_000_000, pulseRate: SFloat(66), userID: 1, status: MeasurementStatus(),
                userFacingTime: 800_003_600
            ).encode())
        let segments = record.segments(maxLength: 8, startCounter: 62, withCRC: true)
        #expect(segments.count > 2)
        #expect(segments.first!.isFirst && segments.last!.isLast)
        var a = RecordAssembler()
        var body: [UInt8]? = nil
        for s in segments {
            let wire = s.encode()
            body = try a.feed(RecordSegment.decode(wire[...]))
        }
        let back = try BloodPressureRecord.decodeBody(try #require(body)[...], hasCRC: true)
        #expect(back.warnings.isEmpty)
        #expect(back.value.sequenceNumber == 513)
        #expect(back.value.recorded == record.recorded)
        // A gap in the counter is an error, not a silent merge.
        var b = RecordAssembler()
        _ = try b.feed(segments[0])
        #expect(throws: BPSDecodingError.self) { try b.feed(segments[2]) }
        // A continuation without a start is an error.
        var c = RecordAssembler()
        #expect(throws: BPSDecodingError.self) { try c.feed(segments[1]) }
    }

    @Test func recordAssemblerIsBounded() throws {
        var a = RecordAssembler(maxBodyLength: 16)
        _ = try a.feed(RecordSegment(isFirst: true, isLast: false, counter: 0, data: Array(repeating: 1, count: 10)))
        #expect(throws: BPSDecodingError.self) {
            try a.feed(RecordSegment(isFirst: false, isLast: false, counter: 1, data: Array(repeating: 1, count: 10)))
        }
    }
}
