import Testing
import CuffCore
@testable import BloodPressure

/// Blood Pressure Record (0x2B36) segments, from spec vector V35 split in three: Sequence Number
/// and UUID in the first segment only (im97mori's reading), continuation bytes after it.
@Suite("Blood Pressure Record segments")
struct RecordSegmentTests {
    // V35's body: seq 1, UUID 0x2B34, Enhanced BPM 120/80/93 mmHg.
    static let body = "01 00 34 2B 00 78 00 50 00 5D 00"
    // Header 0x01: first, counter 0. Header 0x04: counter 1. Header 0x0A: last, counter 2.
    static let first = "01 01 00 34 2B 00 78 00"
    static let middle = "04 50 00"
    static let last = "0A 5D 00"

    @Test func firstSegmentCarriesTheHeaderFields() throws {
        let f = try RecordSegment.decodeFields(bytes(Self.first)[...])
        #expect(f.segment.isFirst && !f.segment.isLast && f.segment.counter == 0)
        #expect(f.sequenceNumber == 1)
        #expect(f.recordedUUID == 0x2B34)
        #expect(f.recordedData == [0x00, 0x78, 0x00])
    }

    @Test func laterSegmentsCarryOnlyContinuation() throws {
        let m = try RecordSegment.decodeFields(bytes(Self.middle)[...])
        #expect(!m.segment.isFirst && !m.segment.isLast && m.segment.counter == 1)
        #expect(m.sequenceNumber == nil && m.recordedUUID == nil)
        #expect(m.recordedData == [0x50, 0x00])
        let l = try RecordSegment.decodeFields(bytes(Self.last)[...])
        #expect(!l.segment.isFirst && l.segment.isLast && l.segment.counter == 2)
        #expect(l.recordedData == [0x5D, 0x00])
    }

    @Test func everyTruncatedPrefixOfAFirstSegment() throws {
        let full = bytes(Self.first)
        for n in 0..<full.count {
            let prefix = full[0..<n]
            switch n {
            case 0:
                #expect(
                    throws: BPSDecodingError(
                        .truncated, field: "Segmentation Header", offset: 0, detail: "needs 1 byte, 0 left")
                ) { try RecordSegment.decodeFields(prefix) }
            case 1, 2:
                #expect(
                    throws: BPSDecodingError(
                        .truncated, field: "Sequence Number", offset: 1, detail: "needs 2 bytes, \(n - 1) left")
                ) { try RecordSegment.decodeFields(prefix) }
            case 3, 4:
                #expect(
                    throws: BPSDecodingError(
                        .truncated, field: "UUID", offset: 3, detail: "needs 2 bytes, \(n - 3) left")
                ) { try RecordSegment.decodeFields(prefix) }
            default:
                // The header is whole: any part of the recorded value may follow.
                let f = try RecordSegment.decodeFields(prefix)
                #expect(f.sequenceNumber == 1 && f.recordedUUID == 0x2B34)
                #expect(f.recordedData == Array(full[5..<n]))
            }
        }
        // A continuation segment needs only its header byte.
        #expect(throws: BPSDecodingError.self) { try RecordSegment.decodeFields([][...]) }
        #expect(try RecordSegment.decodeFields([0x04][...]).recordedData.isEmpty)
    }

    @Test func threeSegmentsReassembleToV35() throws {
        var a = RecordAssembler()
        var body: [UInt8]? = nil
        for hex in [Self.first, Self.middle, Self.last] {
            let step = a.add(try RecordSegment.decode(bytes(hex)[...]))
            #expect(step.dropped == nil)
            body = step.body
        }
        #expect(body == bytes(Self.body))
        let rec = try BloodPressureRecord.decodeBody(try #require(body)[...], hasCRC: false).value
        #expect(rec.sequenceNumber == 1 && rec.recordedUUID == 0x2B34)
        let inner = try #require(try rec.enhancedMeasurement()).value
        guard case let .measurement(s, d, m) = inner.kind else { Issue.record("kind"); return }
        #expect([s.doubleValue, d.doubleValue, m.doubleValue] == [120, 80, 93])
    }

    @Test func brokenSequencesDropTheUnfinishedRecordAndSayWhy() throws {
        let first = try RecordSegment.decode(bytes(Self.first)[...])
        let middle = try RecordSegment.decode(bytes(Self.middle)[...])
        let last = try RecordSegment.decode(bytes(Self.last)[...])
        // A gap: first, then last (counter 2 where 1 was due).
        var a = RecordAssembler()
        _ = a.add(first)
        let gap = a.add(last)
        #expect(gap.body == nil)
        #expect(gap.dropped?.detail.contains("segment counter 2, expected 1") == true)
        #expect(!a.isAssembling)
        // Out of order: middle after middle.
        var b = RecordAssembler()
        _ = b.add(first)
        _ = b.add(middle)
        #expect(b.add(middle).dropped?.detail.contains("segment counter 1, expected 2") == true)
        // A continuation with nothing to continue.
        var c = RecordAssembler()
        #expect(c.add(middle).dropped?.detail.contains("without a first segment") == true)
        // A new first segment before the last: the old record goes, the new one is reassembled.
        var d = RecordAssembler()
        _ = d.add(first)
        let again = d.add(first)
        #expect(again.dropped?.detail.contains("new first segment") == true)
        #expect(again.body == nil)
        _ = d.add(middle)
        #expect(d.add(last).body == bytes(Self.body))
        // A single-segment record in the middle of another completes, and drops the other.
        var e = RecordAssembler()
        _ = e.add(first)
        let single = e.add(try RecordSegment.decode(bytes("03 " + Self.body)[...]))
        #expect(single.body == bytes(Self.body))
        #expect(single.dropped != nil)
    }

    @Test func theCounterWrapsFrom63To0() throws {
        var a = RecordAssembler()
        #expect(
            a.add(RecordSegment(isFirst: true, isLast: false, counter: 63, data: [1, 0, 0x34, 0x2B])).dropped == nil)
        let end = a.add(RecordSegment(isFirst: false, isLast: true, counter: 0, data: [9]))
        #expect(end.dropped == nil && end.body == [1, 0, 0x34, 0x2B, 9])
    }

    @Test func aHostilePeerCannotGrowTheBuffer() throws {
        var a = RecordAssembler()
        #expect(a.maxBodyLength == 512)
        _ = a.add(RecordSegment(isFirst: true, isLast: false, counter: 0, data: Array(repeating: 7, count: 500)))
        let over = a.add(RecordSegment(isFirst: false, isLast: false, counter: 1, data: Array(repeating: 7, count: 20)))
        #expect(over.dropped?.code == .invalidLength)
        #expect(!a.isAssembling)
        // Endless continuations after the drop are each dropped, never buffered.
        for i in 2..<100 {
            #expect(
                a.add(RecordSegment(isFirst: false, isLast: false, counter: UInt8(i & 63), data: [1])).dropped != nil)
        }
        #expect(a.body.isEmpty)
    }

    @Test func decodeJSONOfEachSegmentKind() throws {
        let f = try BPSCharacteristic.bloodPressureRecord.decodeJSON(bytes(Self.first)[...]).serialized()
        #expect(
            f
                == #"{"type":"record","characteristic":"2B36","first_segment":true,"last_segment":false,"segment_counter":0,"sequence_number":1,"recorded_characteristic":"2B34","segment":"0100342b007800","partial_record":"007800","warnings":[],"raw":"010100342b007800"}"#
        )
        let m = try BPSCharacteristic.bloodPressureRecord.decodeJSON(bytes(Self.middle)[...]).serialized()
        #expect(
            m
                == #"{"type":"record","characteristic":"2B36","first_segment":false,"last_segment":false,"segment_counter":1,"segment":"5000","continuation":"5000","warnings":[],"raw":"045000"}"#
        )
        let l = try BPSCharacteristic.bloodPressureRecord.decodeJSON(bytes(Self.last)[...]).serialized()
        #expect(l.contains(#""last_segment":true,"segment_counter":2,"segment":"5d00","continuation":"5d00""#))
    }

    @Test func aDamagedRecordedValueKeepsTheHeader() throws {
        // V35 with its recorded value cut inside Diastolic (record offset 8).
        let j = try BPSCharacteristic.bloodPressureRecord.decodeJSON(bytes("03 01 00 34 2B 00 78 00 50")[...])
        let text = j.serialized()
        #expect(
            text.contains(
                #""sequence_number":1,"recorded_characteristic":"2B34","record":null,"record_error":{"code":"truncated","field":"Recorded Characteristic: Diastolic""#
            ))
        #expect(text.contains(#""offset":8}"#))
        #expect(text.contains(#""warnings":[{"code":"invalid_recorded_value""#))
        // The header itself cut short is still an error.
        #expect(throws: BPSDecodingError.self) {
            try BPSCharacteristic.bloodPressureRecord.decodeJSON(bytes("03 01 00 34")[...])
        }
    }

    /// A record of a characteristic cuff does not decode inside one (a 0x2A35 where BPS 1.1 puts a
    /// 0x2B34): the header prints, `"record":null`, and a warning says why the value is not decoded.
    @Test func anUnknownRecordedCharacteristicIsNamedInAWarning() throws {
        let j = try BPSCharacteristic.bloodPressureRecord.decodeJSON(
            bytes("03 00 00 35 2A 1E 77 00 08 10 5D 00 EA 07 0B 16 08 0E 00 4A 00 01 00 00")[...]
        ).serialized()
        #expect(
            j.contains(
                #""sequence_number":0,"recorded_characteristic":"2A35","record":null,"warnings":[{"code":"unknown_recorded_characteristic","message":"recorded characteristic 2A35 is not one"#
            ), "\(j)")
        #expect(j.contains(#""offset":3}]"#), "\(j)")
    }

    @Test func aSingleSegmentRecordPrintsAsBefore() throws {
        let j = try BPSCharacteristic.bloodPressureRecord.decodeJSON(bytes("03 " + Self.body)[...]).serialized()
        #expect(
            j.hasPrefix(
                #"{"type":"record","characteristic":"2B36","first_segment":true,"last_segment":true,"segment_counter":0,"sequence_number":1,"recorded_characteristic":"2B34","record":{"type":"measurement","characteristic":"2B34""#
            ))
        #expect(!j.contains("segment\":\"") && !j.contains("record_error"))
    }
}
