import Testing
import CuffCore
@testable import BloodPressure

/// Microlife and Yonker against the public vectors of derdilla/blood-pressure-monitor-fl's tests
/// (`microlife_protocol_test.dart`, `microlife_measurement_data_test.dart`,
/// `yonker_measurement_data_test.dart`) and their expected values.
@Suite("Vendor protocols")
struct VendorProtocolTests {
    // MARK: Microlife frames

    @Test func checksumIsTheLowByteOfTheSum() {
        #expect(Microlife.checksum([77, 255, 0, 9, 0, 0, 0, 0, 0, 0, 0, 253] as [UInt8]) == 82)
        #expect(Microlife.checksum([UInt8]()) == 0)
    }

    @Test func commandsCarryTheirChecksums() {
        #expect(Microlife.getMeasurementsCommand == [77, 255, 0, 9, 0, 0, 0, 0, 0, 0, 0, 253, 82])
        #expect(Microlife.disconnectCommand == [77, 255, 0, 2, 4, 82])
        #expect(
            Microlife.setTimeCommand(DateTime(year: 2024, month: 6, day: 15, hours: 14, minutes: 30, seconds: 45))
                == [77, 255, 0, 8, 13, 24, 6, 15, 14, 30, 45, 231])
    }

    @Test func frameLengthOnceTheHeaderIsIn() {
        #expect(Microlife.frameLength([77, 58][...]) == nil)
        #expect(Microlife.frameLength([77, 58, 0, 2][...]) == 6)
        #expect(Microlife.frameLength([77, 58, 1, 0][...]) == 260)
    }

    @Test func responsePayload() throws {
        #expect(Array(try Microlife.payload(ofFrame: [77, 58, 0, 2, 129, 10][...])) == [129])
        #expect(throws: BPSDecodingError(.invalidValue, field: "Header", offset: 0)) {
            try Microlife.payload(ofFrame: [77, 255, 0, 2, 129, 207][...])
        }
        #expect(throws: BPSDecodingError(.invalidValue, field: "Checksum", offset: 5)) {
            try Microlife.payload(ofFrame: [77, 58, 0, 2, 129, 11][...])
        }
        #expect(throws: BPSDecodingError(.truncated, field: "Payload", offset: 4)) {
            try Microlife.payload(ofFrame: [77, 58, 0, 5, 129, 10][...])
        }
        #expect(throws: BPSDecodingError(.invalidLength, field: "Frame", offset: 6)) {
            try Microlife.payload(ofFrame: [77, 58, 0, 2, 129, 10, 0][...])
        }
        #expect(throws: BPSDecodingError(.invalidLength, field: "Length", offset: 2)) {
            try Microlife.payload(ofFrame: [77, 58, 0, 0][...])
        }
    }

    // MARK: Microlife records

    static func payload(_ records: [[UInt8]]) -> [UInt8] { [UInt8](repeating: 0, count: 38) + records.flatMap { $0 } }

    @Test func decodesMultipleMeasurements() {
        let r = Microlife.records(
            inPayload: Self.payload([[120, 80, 60, 24, 6, 15, 14, 30, 0, 0], [130, 85, 70, 25, 1, 2, 3, 4, 0, 0]])[...])
        #expect(r.records.count == 2)
        #expect(r.records[0].systolic == 120 && r.records[0].diastolic == 80 && r.records[0].pulse == 60)
        #expect(r.records[0].time.iso8601 == "2024-06-15T14:30:00")
        #expect(r.records[1].systolic == 130 && r.records[1].diastolic == 85 && r.records[1].pulse == 70)
        #expect(r.records[1].time.iso8601 == "2025-01-02T03:04:00")
        #expect(r.records.map(\.payloadOffset) == [38, 48])
        #expect(r.skipped.isEmpty)
    }

    @Test func skipsEmptySlotsAndImpossibleDates() {
        let r = Microlife.records(
            inPayload: Self.payload([[120, 80, 60, 24, 6, 15, 14, 30, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])[...])
        #expect(r.records.map(\.systolic) == [120])
        #expect(r.skipped == [Microlife.SkippedSlot(payloadOffset: 48, reason: .empty)])
        let bad = Microlife.records(inPayload: Self.payload([[110, 70, 65, 24, 0, 15, 14, 30, 0, 0]])[...])  // month 0
        #expect(bad.records.isEmpty)
        #expect(bad.skipped == [Microlife.SkippedSlot(payloadOffset: 38, reason: .impossibleDate)])
        #expect(
            // 30 February
            Microlife.records(inPayload: Self.payload([[110, 70, 65, 24, 2, 30, 14, 30, 0, 0]])[...]).records.isEmpty)
        #expect(
            // hour 24
            Microlife.records(inPayload: Self.payload([[110, 70, 65, 24, 2, 3, 24, 30, 0, 0]])[...]).records.isEmpty)
        #expect(Microlife.records(inPayload: Self.payload([])[...]).records.isEmpty)
        #expect(Microlife.records(inPayload: [][...]).records.isEmpty)
    }

    /// A whole response frame around the vectors' payload: the records out, and every truncated
    /// prefix refused with `truncated` (never a crash, never a partial record list).
    @Test func wholeFrameAndEveryTruncatedPrefix() throws {
        let payload = Self.payload([
            [120, 80, 60, 24, 6, 15, 14, 30, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            [130, 85, 70, 25, 1, 2, 3, 4, 0, 0],
        ])
        let frame = Microlife.frame(payload, header: Microlife.responseHeader)
        #expect(frame.count == 4 + payload.count + 1)
        #expect(Array(frame.prefix(4)) == [0x4D, 0x3A, 0x00, UInt8(payload.count + 1)])
        let records = Microlife.records(inPayload: try Microlife.payload(ofFrame: frame[...])).records
        #expect(records.map(\.systolic) == [120, 130])
        for n in 0..<frame.count {
            #expect(
                performing: { try Microlife.payload(ofFrame: frame.prefix(n)) },
                throws: { ($0 as? BPSDecodingError)?.code == .truncated })
        }
    }

    @Test func reassemblesAFrameSplitOverNotifications() {
        let frame = Microlife.frame(
            Self.payload([[120, 80, 60, 24, 6, 15, 14, 30, 0, 0]]), header: Microlife.responseHeader)
        var r = Microlife.Reassembler()
        var got: [[UInt8]] = []
        for start in stride(from: 0, to: frame.count, by: 20) {
            got += r.add(Array(frame[start..<min(frame.count, start + 20)])).frames
        }
        #expect(got == [frame])
        #expect(r.isEmpty)
        // Two frames in one notification, and a notification that is no frame.
        let ack = Microlife.frame([0x81], header: Microlife.responseHeader)
        #expect(r.add(ack + ack).frames == [ack, ack])
        #expect(r.add([0x01, 0x02]).junk == [0x01, 0x02])
        // Stray bytes before a frame, in its notification or alone before it: dropped, the frame kept.
        let stray = r.add([0x00, 0x4D] + ack)
        #expect(stray.frames == [ack] && stray.junk == [0x00, 0x4D])
        #expect(r.add([0xFF]).junk == [0xFF] && r.add(ack).frames == [ack])
        // A header split over two notifications is still a frame.
        #expect(r.add([0x07, 0x4D]).junk == [0x07] && r.add(Array(ack.dropFirst())).frames == [ack])
        #expect(r.isEmpty)
    }

    // MARK: Yonker

    @Test func yonkerSampleData() throws {
        let d = try Yonker.decode(bytes("81 83 67 51 00 00 19 0B 18 13 12 00 00 00 00")[...])
        guard case let .result(r) = d.value else { Issue.record("not a result"); return }
        #expect(r.systolic == 131 && r.diastolic == 103 && r.pulse == 81)
        #expect(r.time.iso8601 == "2024-11-25T19:18:00")
        #expect(d.warnings.isEmpty)
        #expect(r.bytes == bytes("81 83 67 51 00 00 19 0B 18 13 12 00 00 00 00"))
    }

    @Test func yonkerOtherFirstByteIsProgress() throws {
        #expect(try Yonker.decode(bytes("82 83 67 51 00 00 19 0B 18 13 12 00 00 00 00")[...]).value == .progress(0x82))
    }

    @Test func yonkerEveryTruncatedPrefixAndTooLong() {
        let full = bytes("81 83 67 51 00 00 19 0B 18 13 12 00 00 00 00")
        for n in 0..<full.count {
            #expect(throws: BPSDecodingError(.truncated, field: "Yonker notification", offset: n)) {
                try Yonker.decode(full.prefix(n))
            }
        }
        #expect(throws: BPSDecodingError(.invalidLength, field: "Yonker notification", offset: 15)) {
            try Yonker.decode((full + [0])[...])
        }
    }

    @Test func yonkerImpossibleDateIsNoTimestamp() throws {
        let d = try Yonker.decode(bytes("81 83 67 51 00 00 00 0D 18 13 12 00 00 00 00")[...])
        guard case let .result(r) = d.value else { Issue.record("not a result"); return }
        #expect(r.time.iso8601 == nil)
        #expect(d.warnings.contains { $0.code == .invalidDateTime })
    }
}
