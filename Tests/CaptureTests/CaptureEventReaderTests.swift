// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Testing

@Suite struct CaptureEventReaderTests {
    @Test func recoverableReaderErrorsBecomeWarningsAndFatalOnesThrowLast() throws {
        var b = BTSnoopBuilder(datalink: 1002)
        b.record(flags: 1, unixMicros: 0, [0x02] + hex("2a 20 05 00 01 00 04 00 1e"))
        b.record(flags: 1, unixMicros: 1, [])  // empty H4 record: recoverable malformed_packet
        b.record(flags: 0, unixMicros: 2, [0x02] + hex("2a 00 07 00 03 00 04 00 02 05 02"))
        let cutAt = b.bytes.count + 10
        b.record(flags: 0, unixMicros: 3, [0x02] + hex("2a 00 05 00 01 00 04 00 1e"))
        var reader = CaptureEventReader(records: CaptureReader(source: ArrayByteSource(Array(b.bytes[0..<cutAt]))))
        var events: [CaptureEvent] = []
        do {
            while let e = try reader.next() { events.append(e) }
            Issue.record("expected the truncation to throw")
        } catch {
            #expect(error.code == .truncatedHeader)
            #expect(error.offset == Int64(cutAt - 10))
        }
        #expect(events.count == 3)
        #expect(events[0].att?.pdu == [0x1e])
        #expect(events[1] == .warning(CaptureError(.malformedPacket)))
        #expect(events[2].att?.pdu == hex("02 05 02"))
        #expect(try reader.next() == nil)
    }

    @Test func strictExtractorThrowsReaderErrorsToo() {
        var b = BTSnoopBuilder(datalink: 1002)
        b.record(flags: 1, unixMicros: 1, [])
        var reader = CaptureEventReader(
            records: CaptureReader(source: ArrayByteSource(b.bytes)), extractor: ATTExtractor(strict: true))
        #expect(throws: CaptureError(.malformedPacket)) { try reader.next() }
    }

    @Test func recorderAnnouncesTheIndexOnceAndReusesIt() throws {
        var rec = SessionRecorder(datalink: .monitor, adapter: 2)
        let first = rec.connected(peer: .zero, role: .peripheral, at: .zero)
        #expect(first.map(\.kind) == [.monitorNewIndex, .monitorOpenIndex, .monitorIndexInfo, .event])
        #expect(first.allSatisfy { $0.adapterIndex == 2 })
        #expect(String(decoding: first[0].payload[8..<12], as: UTF8.self) == "hci2")
        #expect(rec.disconnected(at: .zero).map(\.kind) == [.event])
        rec.connectionHandle = 0x41
        let again = rec.connected(peer: .zero, role: .peripheral, at: .zero)
        #expect(again.map(\.kind) == [.event])
        // LE Enhanced Connection Complete, handle 0x0041, role peripheral.
        #expect(again[0].payload.prefix(7) == [0x3e, 31, 0x0a, 0x00, 0x41, 0x00, 0x01])
        #expect(throws: CaptureError(.oversizeRecord)) {
            try rec.att([UInt8](repeating: 0, count: 70_000), direction: .fromLocal, at: .zero)
        }
    }
}
