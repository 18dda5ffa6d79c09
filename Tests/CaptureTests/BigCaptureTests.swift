// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Foundation
import Testing

@Suite struct BigCaptureTests {
    @Test(arguments: [BTSnoopDatalink.monitor, .uart])
    func repeatedSessionsReadBackExactly(datalink: BTSnoopDatalink) throws {
        var writer = BTSnoopWriter(sink: ArrayByteSink(), datalink: datalink)
        let summary = try BigCapture.write(to: &writer, minimumBytes: 1 << 20)
        let bytes = try writer.finish().bytes
        #expect(Int64(bytes.count) == summary.bytes)
        #expect(summary.bytes >= 1 << 20)

        var reader = CaptureEventReader(
            records: CaptureReader(source: ArrayByteSource(bytes)), extractor: ATTExtractor(strict: true))
        var att = 0, connected = 0, disconnected = 0
        var handles = Set<UInt16>()
        var last = Timestamp(nanoseconds: .min)
        var pdus: [[UInt8]] = []
        while let e = try reader.next() {
            switch e {
            case .att(let p):
                att += 1
                #expect(p.connectionKnown)
                #expect(p.timestamp >= last)
                last = p.timestamp
                if p.adapter == 0 && pdus.count < BigCapture.bloodPressureSession.count { pdus.append(p.pdu) }
            case .connected(let c): connected += 1; handles.insert(c.connectionHandle)
            case .disconnected: disconnected += 1
            case .warning(let w): Issue.record("unexpected warning \(w)")
            }
        }
        let perSession = datalink == .monitor ? 2 : 1
        #expect(att == summary.attPDUs)
        #expect(att == summary.sessions * BigCapture.bloodPressureSession.count * perSession)
        #expect(connected == summary.sessions * perSession)
        #expect(disconnected == connected)
        #expect(handles.count == min(summary.sessions, 0x0EFF))
        #expect(pdus == BigCapture.bloodPressureSession.map(\.pdu))
    }

    @Test(.enabled(if: RealCaptureTests.available)) func sessionsFromTheRealSampleAsTemplates() throws {
        var events: [CaptureEvent] = []
        var reader = try CaptureEventReader(path: sharedSample)
        while let e = try reader.next() { events.append(e) }
        let templates = BigCapture.sessions(in: events, adapter: 1)
        #expect(templates.count == 6)  // the two "noagent" sessions carry no ATT
        #expect(
            templates[0].map(\.pdu) == [
                hex("02 05 02"), hex("03 f7 00"), hex("1d 03 00 00 78 00 50 00 5d 00"), hex("1e"),
            ])
        var writer = BTSnoopWriter(sink: ArrayByteSink(), datalink: .monitor)
        let summary = try BigCapture.write(to: &writer, minimumBytes: 64 * 1024, sessions: templates)
        let back = try extract(readAll(try writer.finish().bytes).records, strict: true)
        #expect(back.compactMap(\.att).count == summary.attPDUs)
    }

    /// `tools/capture/make-big-capture.sh` runs this with CUFF_BIG_CAPTURE=<output path>
    /// (and optionally CUFF_BIG_CAPTURE_MB, CUFF_BIG_CAPTURE_FROM=<capture whose sessions to repeat>).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CUFF_BIG_CAPTURE"] != nil))
    func makeBigCapture() throws {
        let env = ProcessInfo.processInfo.environment
        let path = env["CUFF_BIG_CAPTURE"]!
        let megabytes = Int64(env["CUFF_BIG_CAPTURE_MB"] ?? "") ?? 200
        var sessions = [BigCapture.bloodPressureSession]
        if let from = env["CUFF_BIG_CAPTURE_FROM"] {
            var reader = try CaptureEventReader(path: from)
            var events: [CaptureEvent] = []
            while let e = try reader.next() { events.append(e) }
            let adapters = Set(events.compactMap(\.att).map(\.adapter)).sorted()
            sessions = BigCapture.sessions(in: events, adapter: adapters.last ?? 0)
            try #require(!sessions.isEmpty, "no ATT sessions in \(from)")
        }
        let summary = try BigCapture.write(path: path, minimumBytes: megabytes << 20, sessions: sessions)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64
        #expect(size == summary.bytes)
        print(
            "make-big-capture: \(path) bytes=\(summary.bytes) sessions=\(summary.sessions) records=\(summary.records) att_pdus=\(summary.attPDUs)"
        )
    }
}
