import Testing
import CuffCore
@testable import BloodPressure

/// The public vectors of shared/spec/vectors.md, compared by decoded value.
@Suite("Public vectors")
struct VectorTests {
    @Test func v1FullMeasurement() throws {
        let d = try BloodPressureMeasurement.decode(
            bytes("1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00")[...])
        let m = d.value
        #expect(m.unit == .mmHg)
        #expect(m.systolic.doubleValue == 138)
        #expect(m.diastolic.doubleValue == 88)
        #expect(m.meanArterialPressure.doubleValue == 120)
        #expect(m.timestamp == DateTime(year: 0, month: 4, day: 17, hours: 20, minutes: 41, seconds: 59))
        #expect(m.timestamp?.iso8601 == nil)  // year unknown
        #expect(m.pulseRate?.doubleValue == 60)
        #expect(m.userID == 1)
        let s = try #require(m.status)
        #expect(s.bodyMovement && s.cuffTooLoose && s.irregularPulse && s.improperPosition)
        #expect(s.pulseRateRange == .inRange)
        #expect(d.warnings.isEmpty)
    }

    @Test func v2KPaSome() throws {
        let m = try BloodPressureMeasurement.decode(bytes("15 BD F0 0B 00 9F F0 3C 00 12 00")[...]).value
        #expect(m.unit == .kPa)
        #expect(m.systolic.doubleValue == 18.9)
        #expect(m.diastolic.doubleValue == 11.0)
        #expect(m.meanArterialPressure.doubleValue == 15.9)
        #expect(m.timestamp == nil)
        #expect(m.pulseRate?.doubleValue == 60)
        #expect(m.userID == nil)
        #expect(m.status?.cuffTooLoose == true)
        #expect(m.status?.pulseRateRange == .belowLowerLimit)
        #expect(m.status?.bodyMovement == false)
    }

    @Test func v3Minimal() throws {
        let m = try BloodPressureMeasurement.decode(bytes("00 BD F0 0B 00 9F F0")[...]).value
        #expect(m.unit == .mmHg)
        #expect(
            [m.systolic.doubleValue, m.diastolic.doubleValue, m.meanArterialPressure.doubleValue] == [18.9, 11.0, 15.9])
        #expect(m.timestamp == nil && m.pulseRate == nil && m.userID == nil && m.status == nil)
    }

    @Test func v4TooShort() {
        #expect(throws: BPSDecodingError(.truncated, field: "Mean Arterial Pressure", offset: 5)) {
            try BloodPressureMeasurement.decode(bytes("01 02 03 04 05 06")[...])
        }
    }

    @Test func v5FlagsClaimTimestamp() {
        #expect(throws: BPSDecodingError(.truncated, field: "Time Stamp", offset: 7)) {
            try BloodPressureMeasurement.decode(bytes("03 02 03 04 05 06 07")[...])
        }
    }

    @Test func v6ICPWithZeroUnusedSlots() throws {
        let m = try BloodPressureMeasurement.decode(
            bytes("1E 04 00 00 00 00 00 00 00 04 11 14 29 3B 3C 00 01 27 00")[...])
        #expect(m.value.cuffPressure.doubleValue == 4.0)
        #expect(m.value.diastolic.doubleValue == 0)  // accepted although not NaN
        #expect(m.value.pulseRate?.doubleValue == 60)
        #expect(m.value.userID == 1)
        #expect(m.value.status?.rawValue == 0x27)
    }

    @Test func v7ICPKPa() throws {
        let m = try BloodPressureMeasurement.decode(bytes("15 6F F0 00 00 00 00 3C 00 12 00")[...]).value
        #expect(m.unit == .kPa)
        #expect(m.cuffPressure.doubleValue == 11.1)
        #expect(m.pulseRate?.doubleValue == 60)
        #expect(m.status?.rawValue == 0x12)
    }

    @Test func v8ICPMinimal() throws {
        #expect(
            try BloodPressureMeasurement.decode(bytes("00 D7 F0 00 00 00 00")[...]).value.cuffPressure.doubleValue
                == 21.5)
    }

    @Test func v9NRFToolbox() throws {
        let m = try BloodPressureMeasurement.decode(
            bytes("1F 79 00 51 00 6A 00 E4 07 05 15 0A 1E 2D 48 00 01 06 00")[...]
        ).value
        #expect(m.unit == .kPa)
        #expect(
            [m.systolic.doubleValue, m.diastolic.doubleValue, m.meanArterialPressure.doubleValue] == [121, 81, 106])
        #expect(m.timestamp?.iso8601 == "2020-05-21T10:30:45")
        #expect(m.pulseRate?.doubleValue == 72)
        #expect(m.userID == 1)
        #expect(m.status?.cuffTooLoose == true && m.status?.irregularPulse == true && m.status?.bodyMovement == false)
    }

    @Test func v10UserOnly() throws {
        let m = try BloodPressureMeasurement.decode(bytes("08 48 00 51 00 40 00 01")[...]).value
        #expect([m.systolic.doubleValue, m.diastolic.doubleValue, m.meanArterialPressure.doubleValue] == [72, 81, 64])
        #expect(m.userID == 1 && m.pulseRate == nil && m.timestamp == nil)
    }

    @Test func v19SpecICP() throws {
        let m = try BloodPressureMeasurement.decode(bytes("00 64 00 FF 07 FF 07")[...]).value
        #expect(m.cuffPressure.doubleValue == 100)
        #expect(m.diastolic == .nan && m.meanArterialPressure == .nan)
    }

    @Test(arguments: [("03 00", 0x0003 as UInt16), ("3F 00", 0x003F), ("FF 01", 0x01FF), ("00 00", 0)])
    func v24Feature(hex: String, raw: UInt16) throws {
        let f = try BloodPressureFeature.decode(bytes(hex)[...])
        #expect(f.value.rawValue == raw)
        #expect(f.warnings.isEmpty)
    }

    @Test func v24FeatureNames() throws {
        #expect(
            try BloodPressureFeature.decode(bytes("03 00")[...]).value.featureNames == [
                "body_movement_detection", "cuff_fit_detection",
            ])
        #expect(try BloodPressureFeature.decode(bytes("FF 01")[...]).value == .allVersion11)
        #expect(try BloodPressureFeature.decode(bytes("3F 00")[...]).value == .allVersion10)
    }

    /// The names written without building the array (`writeNames`) are `featureNames`, in the
    /// same order, for every 16-bit word (reserved bits named by neither).
    @Test func writtenFeatureNamesAreTheNamedOnesForEveryWord() {
        var wrong = 0
        for raw in 0...0xFFFF {
            let f = BloodPressureFeature(rawValue: UInt16(raw))
            let written = JSON.build { f.writeNames(to: &$0) }
            if written != .array(f.featureNames.map(JSON.string)) { wrong += 1 }
        }
        #expect(wrong == 0)
        #expect(BloodPressureFeature(rawValue: 0x0101).featureNames == ["body_movement_detection", "user_facing_time"])
        // The names themselves, bit 0 to 8 (BPS 1.1's Blood Pressure Feature field).
        #expect(
            BloodPressureFeature(rawValue: 0xFFFF).featureNames == [
                "body_movement_detection", "cuff_fit_detection", "irregular_pulse_detection",
                "pulse_rate_range_detection", "measurement_position_detection", "multiple_bonds", "e2e_crc",
                "user_data_service", "user_facing_time",
            ])
    }

    @Test func v25to28DateTime() throws {
        #expect(try DateTime.decode(bytes("E2 07 04 11 0F 33 00")[...]).value.iso8601 == "2018-04-17T15:51:00")
        let u = try DateTime.decode(bytes("00 00 00 00 12 1A 20")[...]).value
        #expect(u.year == 0 && u.month == 0 && u.day == 0 && u.hours == 18 && u.minutes == 26 && u.seconds == 32)
        #expect(u.iso8601 == nil)
        #expect(throws: BPSDecodingError(.invalidLength, field: "Date Time", offset: 0)) {
            try DateTime.decode(bytes("E2 07 04 11 0F 33")[...])
        }
        #expect(try DateTime.decode(bytes("E3 07 0C 19 0A 1E 2D")[...]).value.iso8601 == "2019-12-25T10:30:45")
    }

    @Test(arguments: [
        ("06 00 01 01", 1 as UInt8, 1 as UInt8), ("06 00 0C 02", 12, 2), ("06 00 01 03", 1, 3), ("06 00 02 04", 2, 4),
        ("06 00 01 05", 1, 5), ("06 00 01 06", 1, 6), ("06 00 03 07", 3, 7), ("06 00 02 08", 2, 8),
        ("06 00 02 09", 2, 9),
        ("06 00 01 0A", 1, 10),
    ])
    func v29RACPResponseCodes(hex: String, op: UInt8, code: UInt8) throws {
        let v = try RecordAccessControlPoint.decode(bytes(hex)[...], as: .response).value
        #expect(v == .responseCode(requestOpCode: .init(rawValue: op), response: .init(rawValue: code)))
    }

    @Test func v30RACPCounts() throws {
        #expect(
            try RecordAccessControlPoint.decode(bytes("05 00 01")[...], as: .response).value
                == .numberOfRecords(1, width: 1))
        #expect(
            try RecordAccessControlPoint.decode(bytes("05 00 02 01")[...], as: .response).value
                == .numberOfRecords(258, width: 2))
        #expect(
            try RecordAccessControlPoint.decode(bytes("05 00 04 03 02 01")[...], as: .response).value
                == .numberOfRecords(16_909_060, width: 4))
        #expect(throws: BPSDecodingError(.invalidLength, field: "Number of Records", offset: 2)) {
            try RecordAccessControlPoint.decode(bytes("05 00 03 02 01")[...], as: .response)
        }
    }

    @Test func v31RACPInvalidResponses() {
        #expect(throws: BPSDecodingError(.unsupported, field: "Op Code", offset: 0)) {
            try RecordAccessControlPoint.decode(bytes("01 01")[...], as: .response)
        }
        #expect(throws: BPSDecodingError(.unsupported, field: "Op Code", offset: 0)) {
            try RecordAccessControlPoint.decode(bytes("01 03 01 02 00")[...], as: .response)
        }
        #expect(throws: BPSDecodingError(.invalidValue, field: "Operator", offset: 1)) {
            try RecordAccessControlPoint.decode(bytes("06 01 01")[...], as: .response)
        }
    }

    @Test func v32RACPRequests() throws {
        #expect(
            try RecordAccessControlPoint.decode(bytes("01 01")[...], as: .request).value
                == .request(opCode: .reportStoredRecords, operator: .allRecords, filter: nil))
        #expect(
            try RecordAccessControlPoint.decode(bytes("03 00")[...], as: .request).value
                == .request(opCode: .abortOperation, operator: .null, filter: nil))
        #expect(
            try RecordAccessControlPoint.decode(bytes("01 06")[...], as: .request).value
                == .request(opCode: .reportStoredRecords, operator: .lastRecord, filter: nil))
        #expect(
            try RecordAccessControlPoint.decode(bytes("01 03 01 02 00")[...]).value
                == .request(opCode: .reportStoredRecords, operator: .greaterThanOrEqualTo, filter: .sequenceNumber(2)))
        #expect(
            try RecordAccessControlPoint.decode(bytes("04 01")[...]).value
                == .request(opCode: .reportNumberOfStoredRecords, operator: .allRecords, filter: nil))
    }

    @Test func v33EnhancedFull() throws {
        let d = try EnhancedBloodPressureMeasurement.decode(
            bytes("7E 78 00 50 00 64 00 80 51 01 00 48 00 05 03 00 00 A3 02 00")[...], cuffPressure: false)
        let m = d.value
        #expect(pressures(m.kind) == [120, 80, 100])
        #expect(m.timestamp == 86400)
        #expect(m.pulseRate?.doubleValue == 72)
        #expect(m.userID == 5)
        #expect(m.status?.rawValue == 3)
        #expect(m.userFacingTime == 172_800)
        #expect(m.epoch == .year2000)
        #expect(m.timestampISO8601 == "2000-01-02T00:00:00Z")
        #expect(m.userFacingTimeISO8601 == "2000-01-03T00:00:00")
        #expect(d.warnings.isEmpty)
    }

    @Test func v34EnhancedIm97mori() throws {
        let m = try EnhancedBloodPressureMeasurement.decode(
            bytes("02 01 00 02 00 03 00 04 05 06 07")[...], cuffPressure: false
        ).value
        guard case let .measurement(s, d, map) = m.kind else { Issue.record("kind"); return }
        #expect([s.doubleValue, d.doubleValue, map.doubleValue] == [1, 2, 3])
        #expect(m.timestamp == 0x0706_0504)
        #expect(m.epoch == .year1900)
    }

    @Test func v35RecordSingleSegment() throws {
        let r = try BloodPressureRecord.decode(bytes("03 01 00 34 2B 00 78 00 50 00 5D 00")[...]).value
        #expect(r.sequenceNumber == 1)
        #expect(r.recordedUUID == 0x2B34)
        let inner = try #require(try r.enhancedMeasurement()).value
        #expect(pressures(inner.kind) == [120, 80, 93])
    }

    @Test(arguments: [(0xFA as UInt8, false, true, 62 as UInt8), (0xFC, false, false, 63), (0x05, true, false, 1)])
    func v36RecordHeaders(header: UInt8, first: Bool, last: Bool, counter: UInt8) throws {
        let s = try RecordSegment.decode([header, 0xAA][...])
        #expect(s.isFirst == first && s.isLast == last && s.counter == counter)
        #expect(s.header == header)
    }

    @Test func ourWorkedExample() throws {
        // shared/spec/output-formats.md C.0.
        let m = try BloodPressureMeasurement.decode(
            bytes("1E 78 00 50 00 5D 00 E8 07 06 17 0E 23 0A 48 00 01 00 00")[...]
        ).value
        #expect(
            [m.systolic.doubleValue, m.diastolic.doubleValue, m.meanArterialPressure.doubleValue] == [120, 80, 93])
        #expect(m.timestamp?.iso8601 == "2024-06-23T14:35:10")
        #expect(m.pulseRate?.doubleValue == 72 && m.userID == 1 && m.status?.rawValue == 0)
    }

    @Test func errorFrameAllNaN() throws {
        // What cuffs send on "Err": every value NaN, status 0.
        let m = try BloodPressureMeasurement.decode(bytes("14 FF 07 FF 07 FF 07 FF 07 00 00")[...]).value
        #expect(m.systolic == .nan && m.diastolic == .nan && m.meanArterialPressure == .nan && m.pulseRate == .nan)
        let json = BPSCharacteristic.bloodPressureMeasurement.decodeJSONOrFail(
            bytes("14 FF 07 FF 07 FF 07 FF 07 00 00"))
        #expect(json["systolic"] == .string("NaN"))
        #expect(json["pulse_rate"] == .string("NaN"))
    }
}

extension BPSCharacteristic {
    func decodeJSONOrFail(_ b: [UInt8]) -> JSON {
        do { return try decodeJSON(b[...]) } catch {
            Issue.record("decode failed: \(error)")
            return .null
        }
    }
}

func pressures(_ k: EnhancedBloodPressureMeasurement.Kind) -> [Double?] {
    switch k {
    case let .measurement(s, d, m): [s.doubleValue, d.doubleValue, m.doubleValue]
    case let .cuffPressure(p): [p.doubleValue]
    }
}
