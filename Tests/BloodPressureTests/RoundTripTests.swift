import Testing
import CuffCore
@testable import BloodPressure

/// decode(encode(x)) == x for generated values of every type (seeded, thousands of cases).
@Suite("Round trips")
struct RoundTripTests {
    static let cases = 5_000

    static func sfloat(_ g: inout SeededGenerator) -> SFloat {
        switch Int.random(in: 0..<20, using: &g) {
        case 0: return .nan
        case 1: return .nres
        case 2: return .positiveInfinity
        case 3: return .negativeInfinity
        case 4: return .reserved
        default:
            return SFloat(
                mantissa: Int.random(in: -2045...2045, using: &g), exponent: Int.random(in: -8...7, using: &g))!
        }
    }

    /// A valid Date Time: each field in range, the day one its month has (drawn as before, then
    /// clamped, so the generator's sequence is unchanged).
    static func dateTime(_ g: inout SeededGenerator) -> DateTime {
        var d = DateTime(
            year: Bool.random(using: &g) ? 0 : UInt16.random(in: 1582...9999, using: &g),
            month: UInt8.random(in: 0...12, using: &g),
            day: UInt8.random(in: 0...31, using: &g), hours: UInt8.random(in: 0...23, using: &g),
            minutes: UInt8.random(in: 0...59, using: &g), seconds: UInt8.random(in: 0...59, using: &g))
        d.day = min(d.day, DateTime.lastDay(ofMonth: d.month, year: d.year))
        return d
    }

    static func optional<T>(_ g: inout SeededGenerator, _ make: (inout SeededGenerator) -> T) -> T? {
        Bool.random(using: &g) ? make(&g) : nil
    }

    static func status(_ g: inout SeededGenerator) -> MeasurementStatus {
        MeasurementStatus(
            rawValue: UInt16.random(in: 0...0x3F, using: &g) & ~0x18 | UInt16.random(in: 0...2, using: &g) << 3)
    }

    @Test func bloodPressureMeasurement() throws {
        var g = SeededGenerator(seed: 1)
        for _ in 0..<Self.cases {
            let m = BloodPressureMeasurement(
                unit: Bool.random(using: &g) ? .mmHg : .kPa, systolic: Self.sfloat(&g), diastolic: Self.sfloat(&g),
                meanArterialPressure: Self.sfloat(&g), timestamp: Self.optional(&g, Self.dateTime),
                pulseRate: Self.optional(&g, Self.sfloat),
                userID: Self.optional(&g) { UInt8.random(in: 0...255, using: &$0) },
                status: Self.optional(&g, Self.status))
            let d = try BloodPressureMeasurement.decode(m.encode()[...])
            #expect(d.value == m)
            // Random values: the only warnings are for those no cuff measures, one each.
            let highest = m.unit == .kPa ? 40.0 : 300.0
            let outside =
                [m.systolic, m.diastolic, m.meanArterialPressure].filter { Self.outside($0, highest) }.count
                + (m.pulseRate.map { Self.outside($0, 300) } == true ? 1 : 0)
            #expect(d.warnings.map(\.code) == Array(repeating: .implausibleValue, count: outside), "\(d.warnings)")
            #expect((7...19).contains(m.encode().count))
        }
    }

    /// Probe V's edited measurement: systolic 0x0FFF (−1), diastolic 0x7001 (10,000,000), MAP 0,
    /// pulse 0x8999 (−0.0000164): decoded as sent, each value no cuff measures flagged by field
    /// and offset, without the value; MAP 0 (some cuffs' "absent") is not.
    @Test func valuesNoCuffMeasuresAreFlagged() throws {
        let d = try BloodPressureMeasurement.decode([0x04, 0xFF, 0x0F, 0x01, 0x70, 0x00, 0x00, 0x99, 0x89][...])
        #expect(d.value.systolic.doubleValue == -1)
        #expect(d.warnings.map(\.code) == [.implausibleValue, .implausibleValue, .implausibleValue])
        #expect(d.warnings.map(\.offset) == [1, 3, 7])
        #expect(
            d.warnings.map(\.message) == [
                "Systolic is outside 0…300 mmHg", "Diastolic is outside 0…300 mmHg",
                "Pulse Rate is outside 0…300 beats per minute",
            ])
        // In range (and kPa's own range): no warning.
        #expect(
            try BloodPressureMeasurement.decode([0x04, 0x2C, 0x01, 0x50, 0x00, 0x5D, 0x00, 0x48, 0x00][...]).warnings
                .isEmpty)
        #expect(
            try BloodPressureMeasurement.decode([0x05, 0x28, 0x00, 0x0A, 0x00, 0x0C, 0x00, 0x48, 0x00][...]).warnings
                .isEmpty)
        #expect(
            try BloodPressureMeasurement.decode([0x01, 0x29, 0x00, 0x0A, 0x00, 0x0C, 0x00][...]).warnings.map(\.message)
                == ["Systolic is outside 0…40 kPa"])
    }

    static func outside(_ v: SFloat, _ highest: Double) -> Bool {
        guard let d = v.doubleValue, d.isFinite else { return false }
        return d < 0 || d > highest
    }

    @Test func enhanced() throws {
        var g = SeededGenerator(seed: 2)
        for _ in 0..<Self.cases {
            let icp = Bool.random(using: &g)
            let kind: EnhancedBloodPressureMeasurement.Kind =
                icp
                ? .cuffPressure(Self.sfloat(&g))
                : .measurement(
                    systolic: Self.sfloat(&g), diastolic: Self.sfloat(&g), meanArterialPressure: Self.sfloat(&g))
            let m = EnhancedBloodPressureMeasurement(
                unit: Bool.random(using: &g) ? .mmHg : .kPa, kind: kind,
                timestamp: Self.optional(&g) { UInt32.random(in: 0...UInt32.max, using: &$0) },
                pulseRate: Self.optional(&g, Self.sfloat),
                userID: Self.optional(&g) { UInt8.random(in: 0...255, using: &$0) },
                status: Self.optional(&g, Self.status),
                userFacingTime: Self.optional(&g) { UInt32.random(in: 0...UInt32.max, using: &$0) },
                epoch: Bool.random(using: &g) ? .year1900 : .year2000)
            #expect(try EnhancedBloodPressureMeasurement.decode(m.encode()[...], cuffPressure: icp).value == m)
        }
    }

    @Test func dateTimeCurrentTimeFeature() throws {
        var g = SeededGenerator(seed: 3)
        for _ in 0..<Self.cases {
            let dt = Self.dateTime(&g)
            var w = ByteWriter()
            dt.encode(into: &w)
            #expect(try DateTime.decode(w.bytes[...]).value == dt)
            let ct = CurrentTime(
                dateTime: dt, dayOfWeek: UInt8.random(in: 0...7, using: &g),
                fractions256: UInt8.random(in: 0...255, using: &g), adjustReason: UInt8.random(in: 0...15, using: &g))
            #expect(try CurrentTime.decode(ct.encode()[...]).value == ct)
            let f = BloodPressureFeature(rawValue: UInt16.random(in: 0...0x1FF, using: &g))
            #expect(try BloodPressureFeature.decode(f.encode()[...]).value == f)
        }
    }

    @Test func unixSecondsCalendarRoundTrip() {
        var g = SeededGenerator(seed: 4)
        for _ in 0..<Self.cases {
            let s = Int64.random(in: -2_208_988_800...253_402_300_799, using: &g)
            #expect(DateTime(unixSeconds: s).unixSeconds == s)
        }
        #expect(DateTime(unixSeconds: 0).iso8601 == "1970-01-01T00:00:00")
        #expect(Epoch.year1900.dateTime(0).iso8601 == "1900-01-01T00:00:00")
        #expect(CurrentTime(localSeconds: 0).dayOfWeek == 4)  // Thursday
    }

    @Test func racpAndRecords() throws {
        var g = SeededGenerator(seed: 5)
        for _ in 0..<Self.cases {
            let v: RecordAccessControlPoint
            switch Int.random(in: 0..<6, using: &g) {
            case 0: v = .request(opCode: .reportStoredRecords, operator: .allRecords, filter: nil)
            case 1:
                v = .request(
                    opCode: .deleteStoredRecords, operator: .greaterThanOrEqualTo,
                    filter: .sequenceNumber(UInt16.random(in: 0...UInt16.max, using: &g)))
            case 2:
                v = .request(
                    opCode: .reportStoredRecords, operator: .withinRangeOf,
                    filter: .userFacingTimeRange(
                        UInt32.random(in: 0...1000, using: &g), UInt32.random(in: 1000...UInt32.max, using: &g)))
            case 3: v = .numberOfRecords(UInt32.random(in: 0...255, using: &g), width: 1)
            case 4: v = .numberOfRecords(UInt32.random(in: 0...UInt32.max, using: &g), width: 4)
            default:
                v = .responseCode(
                    requestOpCode: .init(rawValue: UInt8.random(in: 1...8, using: &g)),
                    response: .init(rawValue: UInt8.random(in: 1...10, using: &g)))
            }
            #expect(try RecordAccessControlPoint.decode(v.encode()[...]).value == v)
            let r = BloodPressureRecord(
                sequenceNumber: UInt16.random(in: 0...UInt16.max, using: &g),
                recorded: (0..<Int.random(in: 0...16, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
            let wire = [UInt8(3)] + r.encodeBody()
            #expect(try BloodPressureRecord.decode(wire[...]).value == r)
        }
    }
}
