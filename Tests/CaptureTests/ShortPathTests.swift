// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import Capture
import CuffCore
import CuffSession
import Foundation
import Sinks
import Testing

/// The replay's short paths give what the general paths give, on real captures.
@Suite("Replay short paths")
struct ShortPathTests {
    /// Every committed capture, and the shared two-controller btmon file.
    static var files: [String] {
        committedCaptures().map { capturesDirectory.appendingPathComponent($0 + ".btsnoop").path } + [sharedSample]
    }

    static func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Reads with `next(into:)` into one record; returns copies of the records and the error.
    static func readInPlace(_ bytes: [UInt8], chunkSize: Int) -> (records: [HCIRecord], error: CaptureError?) {
        var reader = CaptureReader(source: ArrayByteSource(bytes), chunkSize: chunkSize)
        var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        var out: [HCIRecord] = []
        do {
            while try reader.next(into: &record) { out.append(record) }
            return (out, nil)
        } catch {
            return (out, error)
        }
    }

    @Test func inPlaceReadingEqualsNext() throws {
        for path in Self.files {
            let b = try Self.bytes(path)
            let expected = readAll(b)
            #expect(expected.error == nil)
            #expect(expected.records.count > 100, "\(path)")
            for chunk in [64 * 1024, 1000, 23] {  // whole records buffered, and refills mid-record
                let got = Self.readInPlace(b, chunkSize: chunk)
                #expect(got.records == expected.records, "\(path), chunk \(chunk)")
                #expect(got.error == nil)
            }
        }
    }

    @Test func inPlaceReadingOfEveryPrefixEqualsNext() throws {
        // The first 3,000 bytes of a capture (the header and ~60 records), cut at every length:
        // the same records before the cut and the same error (code and offset).
        let b = Array(try Self.bytes(capturesDirectory.appendingPathComponent("normal.btsnoop").path).prefix(3000))
        for n in 0...b.count {
            let prefix = Array(b.prefix(n))
            let expected = readAll(prefix)
            let got = Self.readInPlace(prefix, chunkSize: 64 * 1024)
            #expect(got.records == expected.records, "prefix \(n)")
            #expect(
                got.error?.code == expected.error?.code && got.error?.offset == expected.error?.offset, "prefix \(n)")
        }
    }

    @Test func inPlaceReadingOfH4AndEmptyRecords() {
        // Datalink 1002 with an empty record between two good ones: the same recoverable error.
        var w = ByteWriter()
        w.write(contentsOf: BTSnoop.magic)
        w.writeBigEndian(UInt32(1))
        w.writeBigEndian(UInt32(1002))
        for body: [UInt8] in [[0x04, 0x0E, 0x01, 0x00], [], [0x02, 0x40, 0x00, 0x00, 0x00]] {
            w.writeBigEndian(UInt32(body.count)); w.writeBigEndian(UInt32(body.count))
            w.writeBigEndian(UInt32(1)); w.writeBigEndian(UInt32(0));
            w.writeBigEndian(UInt64(BTSnoop.unixEpochMicroseconds))
            w.write(contentsOf: body)
        }
        for chunk in [64 * 1024, 5] {
            var a = CaptureReader(source: ArrayByteSource(w.bytes), chunkSize: chunk)
            var b = CaptureReader(source: ArrayByteSource(w.bytes), chunkSize: chunk)
            var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
            for _ in 0..<4 {
                let x: Result<HCIRecord?, CaptureError> = Result { () throws(CaptureError) in try a.next() }
                let y: Result<HCIRecord?, CaptureError> = Result { () throws(CaptureError) in
                    try b.next(into: &record) ? record : nil
                }
                #expect(x == y, "chunk \(chunk)")
            }
        }
    }

    @Test func singleFrameEqualsConsume() throws {
        var taken = 0
        for path in Self.files {
            var reader = try CaptureReader(path: path)
            var x = ATTExtractor()
            while let record = try reader.next() {
                if let f = x.singleFrame(record) {
                    taken += 1
                    var copy = x
                    let events = try copy.consume(record)
                    #expect(events.count == 1, "\(path) at \(record.fileOffset)")
                    if case let .att(p)? = events.first {
                        #expect(p.pdu[...] == record.payload[f.pdu])
                        #expect(p.adapter == f.adapter && p.connectionHandle == f.connectionHandle)
                        #expect(p.direction == f.direction && p.connectionKnown == f.connectionKnown)
                        #expect(p.timestamp == record.timestamp && p.fileOffset == record.fileOffset)
                    } else {
                        Issue.record("\(path) at \(record.fileOffset): expected one ATT event, got \(events)")
                    }
                    #expect(copy.trackedLinkCount == x.trackedLinkCount)
                }
                _ = try x.consume(record)
            }
        }
        #expect(taken > 3000)  // most of the traffic takes it (one ICP notification per record)
    }

    /// `CaptureReplay.replay(_:…)` takes whole ATT frames from the reader's buffer without copying
    /// them into a record: the outputs equal those of consuming every record, for every capture,
    /// with small read chunks (records cut by the buffer's end take the copying path), one
    /// controller only, and a capture cut short.
    @Test func lentRecordsReplayAsCopiedOnes() throws {
        var lent = 0
        for path in Self.files {
            let bytes = try Self.bytes(path)
            for (data, adapter) in [(bytes, nil), (bytes, 1), (Array(bytes.prefix(bytes.count * 3 / 5)), nil)]
                as [([UInt8], UInt16?)]
            {
                let (records, error) = Self.readInPlace(data, chunkSize: 4096)
                var one = CaptureReplay(adapter: adapter)
                var expected: [CaptureReplay.Output] = []
                for r in records { one.consume(r, into: &expected) }
                if let error { expected.append(.warning(error)) }  // (stands for the fault below)
                for chunk in [4096, 173, 1 << 20] {
                    var reader = CaptureReader(source: ArrayByteSource(data), chunkSize: chunk)
                    var replay = CaptureReplay(adapter: adapter)
                    var got: [CaptureReplay.Output] = []
                    var out: [CaptureReplay.Output] = []
                    let ending = replay.replay(&reader, into: &out) { o in
                        got += o
                        o.removeAll()
                        return true
                    }
                    if case let .fault(e) = ending { got.append(.warning(e)) } else { #expect(ending == .end) }
                    #expect(got == expected, "\(path) adapter \(adapter.map(String.init) ?? "all") chunk \(chunk)")
                    #expect(replay.sessions == one.sessions && replay.measurements == one.measurements)
                }
                lent += records.count
            }
        }
        #expect(lent > 10000)
    }

    /// The constants records write with `JSONWriter.constant` say what the raw values say.
    @Test func constantNamesAreTheRawValues() {
        for p in MeasurementPhase.allCases { #expect(p.name.description == p.rawValue) }
        for u in PressureUnit.allCases { #expect(u.name.description == u.rawValue) }
        for e in SessionRecord.Event.allCases { #expect(e.name.description == e.rawValue) }
        for c in BPSCharacteristic.allCases {
            let hex = String(c.rawValue, radix: 16, uppercase: true)
            #expect(c.uuidName.description == String(repeating: "0", count: 4 - hex.count) + hex)
        }
    }

    @Test func lineBufferEqualsSerialisedJSON() throws {
        var outputs: [SessionOutput] = []
        for path in Self.files { outputs += try replayFile(path).outputs }
        #expect(outputs.count > 3000)
        // Special values, control characters, non-ASCII text, a string longer than the buffer.
        let at = EventTime(monotonic: .seconds(1), wallMicros: -1_500)
        for p in [
            SFloat.nan, SFloat(rawValue: 0x0800), SFloat(rawValue: 0x07FE), SFloat(rawValue: 0x0802),
            SFloat(rawValue: 0x0801), SFloat(-12.5), SFloat(0.001),
        ] {
            outputs.append(
                .progress(ProgressRecord(phase: .deflating, cuffPressure: p, unit: .kPa, elapsed: -0.0005, at: at)))
        }
        outputs.append(
            .progress(ProgressRecord(phase: .inflating, cuffPressure: SFloat(3), unit: .mmHg, elapsed: 1e13, at: at)))
        // Elapsed times whose milliseconds end in zeros, or not; whole and negative pressures.
        for (i, e) in [0.0, 0.05, 0.005, 0.2, 1.25, 12.205, 7.1, 999.999, 0.0004, 0.0006, 41.8, -3.25].enumerated() {
            let p = [
                SFloat(0), SFloat(-7), SFloat(999), SFloat(1000), SFloat(2045), SFloat(12.5), SFloat(rawValue: 0x07FF),
            ][i % 7]
            outputs.append(
                .progress(
                    ProgressRecord(
                        phase: i % 2 == 0 ? .inflating : .deflating, cuffPressure: p,
                        unit: i % 3 == 0 ? .kPa : .mmHg, elapsed: e, at: at)))
        }
        // Received-at times: within one second, the next second, the next day, back a day, before
        // 1970, a five-digit year (the cached date and time-of-day text must follow each change).
        for micros: Int64 in [
            86_399_998_000, 86_399_999_999, 86_400_000_000, 86_400_000_001, 86_401_250_000, 86_399_000_000,
            -86_400_000_001, 0, 253_402_300_799_999_999, 253_402_300_800_000_000, 253_402_387_199_123_456, 59_000,
        ] {
            let t = EventTime(monotonic: .seconds(2), wallMicros: micros)
            outputs.append(
                .progress(ProgressRecord(phase: .inflating, cuffPressure: SFloat(42), unit: .mmHg, elapsed: 0.5, at: t))
            )
        }
        // Every SFLOAT mantissa with every exponent (the short path takes −3…5), both units.
        for e in -8...7 {
            for m in -2048...2047 {
                let raw = UInt16(UInt16(bitPattern: Int16(e)) << 12) | UInt16(UInt16(bitPattern: Int16(m)) & 0x0FFF)
                outputs.append(
                    .progress(
                        ProgressRecord(
                            phase: .deflating, cuffPressure: SFloat(rawValue: raw), unit: m & 1 == 0 ? .kPa : .mmHg,
                            elapsed: Double(m) / 7, at: at)))
            }
        }
        var device = DeviceInfo(address: "AA:BB:CC:DD:EE:FF")
        device.name = "ctl\u{1}\t\"q\"\\ é 漢 " + String(repeating: "x", count: 5000)
        outputs.append(.session(SessionRecord(event: .start, device: device, at: at)))
        // Session ends with and without outcome, message and features; measurement records whose
        // codec object has no `type`, two of them, none at all, or is not an object.
        device.features = BloodPressureFeature(rawValue: 0x003F)
        outputs.append(
            .session(
                SessionRecord(
                    event: .end, device: device, at: at, outcome: .protocolError, measurements: 12,
                    message: "broke \"here\"\n")))
        outputs.append(.session(SessionRecord(event: .end, device: DeviceInfo(address: "x"), at: at)))
        device.features = BloodPressureFeature(rawValue: 0)
        outputs.append(.session(SessionRecord(event: .start, device: device, at: at)))
        // A character to escape (or one next to those in value) at every place of a string up to
        // 24 bytes long: the line buffer checks 8-byte words, then the bytes left.
        for c in ["\"", "\\", "\u{0}", "\u{1F}", "\n", " ", "!", "#", "[", "]", "\u{7F}", "é"] {
            for n in 1...24 {
                for i in 0..<n {
                    var text = Array(repeating: "a", count: n)
                    text[i] = c
                    outputs.append(
                        .session(SessionRecord(event: .start, device: DeviceInfo(address: text.joined()), at: at)))
                }
            }
        }
        let measured = outputs.compactMap { o -> MeasurementRecord? in
            if case let .measurement(m) = o { m } else { nil }
        }
        #expect(measured.count > 20)
        if var m = measured.first {
            m.device = device
            m.sequenceNumber = 65535
            m.stored = true
            for d: JSON in [
                .object([]), .object([("a", .int(-3)), ("type", .string("x")), ("type", .string("y"))]),
                .object([("b", .array([.double(1.5), .null, .bool(false)]))]), .string("not an object"), .null,
            ] {
                m.decoded = d
                outputs.append(.measurement(m))
            }
            // A tree's first top-level `type` becomes "measurement" on the line (a later one, and
            // the record's own JSON, keep what they say); a value that is not an object stays as it is.
            m.decoded = .object([("a", .int(-3)), ("type", .string("x")), ("type", .string("y"))])
            let line = SessionOutput.measurement(m).json.serialized()
            #expect(line.hasPrefix(#"{"a":-3,"type":"measurement","type":"y","device":{"#), "\(line)")
            #expect(m.json.serialized().hasPrefix(#"{"a":-3,"type":"x","type":"y","device":"#))
            m.decoded = .string("not an object")
            #expect(SessionOutput.measurement(m).json == .string("not an object"))
        }
        let lines = NDJSONLineBuffer(capacity: 1024)
        var expected: [UInt8] = []
        for o in outputs {
            lines.append(o)
            expected += Array(o.json.serialized().utf8) + [0x0A]
        }
        let got = Array(lines.bytes)
        #expect(got.count == expected.count)
        if got != expected,
            let i = zip(got, expected).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset
        {
            Issue.record(
                "first difference at byte \(i): got \(String(decoding: got[max(0, i - 80)..<min(got.count, i + 40)], as: UTF8.self))"
            )
        }
        lines.removeAll()
        #expect(lines.byteCount == 0)
    }
}
