import Testing
import CuffCore
@testable import BloodPressure

/// What an unmapped handle's values look like (`cuff replay`'s hint), from the spec vectors: each
/// characteristic's own vectors are recognised as it, and none as another that would decode them
/// into nonsense.
@Suite struct ValueShapeTests {
    func shape(_ hex: String, indication: Bool) -> CuffCharacteristic? {
        ValueShape.characteristic(of: bytes(hex)[...], indication: indication)
    }

    @Test func classicResultsAndCuffPressures() {
        // V1, V2, V3, V9 (kPa flagged, mmHg sent), V10: results, indicated.
        for v in [
            "1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00", "15 BD F0 0B 00 9F F0 3C 00 12 00",
            "00 BD F0 0B 00 9F F0", "1F 79 00 51 00 6A 00 E4 07 05 15 0A 1E 2D 48 00 01 06 00",
            "08 48 00 51 00 40 00 01",
        ] {
            #expect(shape(v, indication: true) == .bloodPressureMeasurement, "\(v)")
        }
        // V6, V7, V8, V19: cuff pressures, notified.
        for v in [
            "1E 04 00 00 00 00 00 00 00 04 11 14 29 3B 3C 00 01 27 00", "15 6F F0 00 00 00 00 3C 00 12 00",
            "00 D7 F0 00 00 00 00", "00 64 00 FF 07 FF 07",
        ] {
            #expect(shape(v, indication: false) == .intermediateCuffPressure, "\(v)")
        }
    }

    @Test func enhancedResultsAndRecords() {
        // V33 and V34: Enhanced BPM.
        #expect(
            shape("7E 78 00 50 00 64 00 80 51 01 00 48 00 05 03 00 00 A3 02 00", indication: true)
                == .enhancedBloodPressureMeasurement)
        #expect(shape("02 01 00 02 00 03 00 04 05 06 07", indication: true) == .enhancedBloodPressureMeasurement)
        // V35: a single-segment record; its first of three segments (RecordSegmentTests).
        #expect(shape("03 01 00 34 2B 00 78 00 50 00 5D 00", indication: true) == .bloodPressureRecord)
        #expect(shape("01 01 00 34 2B 00 78 00", indication: true) == .bloodPressureRecord)
        // A later segment alone looks like nothing.
        #expect(shape("0A 5D 00", indication: true) == nil)
    }

    /// V29 and V30 (all but the 3-byte count): RACP responses, never results.
    @Test func controlPointResponses() {
        for v in [
            "06 00 01 01", "06 00 0C 02", "06 00 01 06", "06 00 01 0A", "05 00 01", "05 00 02 01", "05 00 04 03 02 01",
        ] {
            #expect(shape(v, indication: true) == .recordAccessControlPoint, "\(v)")
        }
        // V30's 3-byte count and V31's invalid ones.
        for v in ["05 00 03 02 01", "01 01", "01 03 01 02 00", "06 01 01"] {
            #expect(shape(v, indication: true) == nil, "\(v)")
        }
    }

    /// What the decoder would read with warnings or absurd numbers looks like nothing: V4 and V5
    /// (invalid), trailing bytes, a bad date, a negative or huge pressure.
    @Test func nonsenseLooksLikeNothing() {
        for v in [
            "01 02 03 04 05 06", "03 02 03 04 05 06 07", "00 78 00 50 00 5D 00 00",
            "02 78 00 50 00 5D 00 E2 07 0D 11 0F 33 00", "00 78 00 50 F8 5D 00", "00 78 00 50 00 FF 3F",
        ] {
            #expect(shape(v, indication: true) == nil, "\(v)")
            #expect(shape(v, indication: false) == nil, "\(v)")
        }
    }

    /// A record's first segment, read as a classic result (what following a `2a35` hint did): the
    /// shape says record.
    @Test func aRecordIsNotReadAsAClassicResult() {
        let record = BloodPressureRecord(
            sequenceNumber: 7,
            recorded: EnhancedBloodPressureMeasurement(
                kind: .measurement(systolic: SFloat(120), diastolic: SFloat(80), meanArterialPressure: SFloat(93)),
                timestamp: 86400, pulseRate: SFloat(70), userID: 1
            ).encode())
        #expect(shape(Hex.encode([0x03] + record.encodeBody()), indication: true) == .bloodPressureRecord)
    }
}
