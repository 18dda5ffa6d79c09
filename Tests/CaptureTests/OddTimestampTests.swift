// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Foundation
import Testing

/// Byte offsets of each record in a btsnoop file (after its 16-byte header).
func btsnoopRecordOffsets(_ bytes: [UInt8]) -> [Int] {
    var offsets: [Int] = []
    var at = 16
    while at + 24 <= bytes.count {
        offsets.append(at)
        let included =
            Int(bytes[at + 4]) << 24 | Int(bytes[at + 5]) << 16 | Int(bytes[at + 6]) << 8 | Int(bytes[at + 7])
        at += 24 + included
    }
    return offsets
}

/// `bytes` with the 64-bit timestamp of the record at `recordOffset` set to `value`.
func settingBTSnoopTimestamp(_ bytes: [UInt8], recordOffset: Int, to value: UInt64) -> [UInt8] {
    var b = bytes
    for i in 0..<8 { b[recordOffset + 16 + i] = UInt8(truncatingIfNeeded: value >> (56 - 8 * i)) }
    return b
}

/// The btsnoop timestamp (µs since year 0) of the record at `recordOffset`.
func btsnoopTimestamp(_ bytes: [UInt8], recordOffset: Int) -> UInt64 {
    (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[recordOffset + 16 + $1]) }
}

/// Replays a capture in memory as `cuff replay` does: NDJSON lines, warnings, and how it ended.
func replayBytes(_ bytes: [UInt8]) -> (lines: [String], warnings: [CaptureError], ending: CaptureReplay.Ending) {
    var reader = CaptureReader(source: ArrayByteSource(bytes))
    var replay = CaptureReplay()
    var out: [CaptureReplay.Output] = []
    let ending = replay.replay(&reader, into: &out, deliver: { _ in true })
    if case let .fault(f) = ending { replay.finish(after: f, into: &out) } else { replay.finish(into: &out) }
    var lines: [String] = []
    var warnings: [CaptureError] = []
    for o in out {
        switch o {
        case let .emit(e): lines.append(e.json.serialized())
        case let .warning(w): warnings.append(w)
        default: break
        }
    }
    return (lines, warnings, ending)
}

/// Timestamps a capture can hold that `cuff` cannot (before 1677 or after 2262), and ones it can
/// but that jump or run backwards: none may trap. An unusable one is a `bad_timestamp` warning
/// naming the record's timestamp field, the record is skipped, and the replay goes on; a usable
/// one is taken as it is. Every measurement before the damage is replayed.
@Suite("Odd timestamps")
struct OddTimestampTests {
    static let normal: [UInt8] =
        (try? [UInt8](Data(contentsOf: capturesDirectory.appendingPathComponent("normal.btsnoop")))) ?? []
    static let normalLines: [String] =
        ((try? String(contentsOf: capturesDirectory.appendingPathComponent("normal.ndjson"), encoding: .utf8)) ?? "")
        .split(separator: "\n").map(String.init)
    static var measurement: String { normalLines.first { $0.hasPrefix("{\"type\":\"measurement\"") }! }

    /// µs since year 0 for 2262-04-11T23:00:00Z: inside what a Timestamp holds, 47 minutes from its end.
    static let nearTheEnd: UInt64 = UInt64(9_223_369_200) * 1_000_000 + 0x00DC_DDB3_0F2F_8000

    @Test func btsnoopTimestampsOutsideTheRangeAreSkippedWithAnErrorNamingTheOffset() throws {
        let offsets = btsnoopRecordOffsets(Self.normal)
        #expect(offsets.count > 100)
        let last = offsets.last!
        for value: UInt64 in [0, 1, 0x00DC_DDB3_0F2F_8000 - 9_300_000_000_000_000, UInt64(Int64.max), UInt64.max] {
            let damaged = settingBTSnoopTimestamp(Self.normal, recordOffset: last, to: value)
            let r = replayBytes(damaged)
            #expect(r.ending == .end)
            #expect(r.warnings.count == 1, "\(value)")
            let w = try #require(r.warnings.first)
            #expect(w.code == .badTimestamp)
            #expect(w.offset == Int64(last + 16))
            #expect(w.message.contains("\(value) µs since 0000-01-01"))
            // Everything up to the skipped Disconnection Complete is the undamaged replay's.
            #expect(r.lines.dropLast() == Self.normalLines.dropLast())
            #expect(r.lines.contains(Self.measurement))
            #expect(r.lines.last!.contains("\"message\":\"the capture ends\""))
        }
        // A zeroed timestamp in the middle of the cuff-pressure notifications: that record is
        // skipped, the measurement still comes.
        let middle = settingBTSnoopTimestamp(Self.normal, recordOffset: offsets[offsets.count / 2], to: 0)
        let r = replayBytes(middle)
        #expect(r.warnings.map(\.code) == [.badTimestamp])
        #expect(r.lines.contains(Self.measurement))
    }

    @Test func btsnoopTimestampsThatJumpOrRunBackwardsAreTakenAsTheyAre() throws {
        let offsets = btsnoopRecordOffsets(Self.normal)
        let last = offsets.last!
        let before = btsnoopTimestamp(Self.normal, recordOffset: offsets[offsets.count - 2])
        // Backwards by a day, back to 1970, to the first instant a Timestamp holds, and on to 2262.
        let firstInstant = 0x00DC_DDB3_0F2F_8000 - UInt64(9_223_372_036_854_775)
        for value in [before - 86_400_000_000, 0x00DC_DDB3_0F2F_8000, firstInstant, Self.nearTheEnd] {
            let r = replayBytes(settingBTSnoopTimestamp(Self.normal, recordOffset: last, to: value))
            #expect(r.warnings.isEmpty)
            #expect(r.ending == .end)
            #expect(r.lines.dropLast() == Self.normalLines.dropLast(), "\(value)")
            #expect(r.lines.last!.hasPrefix("{\"type\":\"session\",\"event\":\"end\""))
        }
        // The whole session moved to the end of the range, the measurement's record within a second
        // of it (and the records after it at the same time): the session's time limit and the
        // settle deadline (2 s after the result) lie past the end; they saturate instead of trapping.
        var late = Self.normal
        // (The measurement's indication: the last ACL RX record, monitor opcode 5, with ATT opcode 0x1D.)
        let measurementRecord = try #require(
            offsets.indices.last { i in
                let o = offsets[i]
                return Self.normal[o + 11] == 5 && Self.normal[o + 10] == 0 && Self.normal[o + 24 + 8] == 0x1D
            })
        let lastSecond = UInt64(9_223_372_036) * 1_000_000 + 0x00DC_DDB3_0F2F_8000
        let shift = lastSecond - btsnoopTimestamp(Self.normal, recordOffset: offsets[measurementRecord])
        for (i, o) in offsets.enumerated() {
            late = settingBTSnoopTimestamp(
                late, recordOffset: o,
                to: i < measurementRecord ? btsnoopTimestamp(Self.normal, recordOffset: o) + shift : lastSecond)
        }
        let r = replayBytes(late)
        #expect(r.warnings.isEmpty)
        let m = try #require(r.lines.first { $0.hasPrefix("{\"type\":\"measurement\"") })
        #expect(m.contains("\"received_at\":\"2262-04-11T23:47:16.000Z\""))
        #expect(m.contains("\"systolic\":119.0"))
        #expect(r.lines.last!.contains("\"at\":\"2262-04-11T23:47:16.000Z\""))
    }

    /// The same session as pcap (LINKTYPE 254) and pcapng: pcap's unsigned 32-bit seconds always
    /// fit (1970–2106), pcapng's 64-bit ticks need not.
    @Test func pcapAndPcapngTimestampsAtTheEndsOfTheirRanges() throws {
        var reader = CaptureReader(source: ArrayByteSource(Self.normal))
        let records = try reader.readAll()
        func monitor(_ r: HCIRecord) -> [UInt8] {
            let op = r.kind.monitorOpcode(direction: r.direction)!
            return [UInt8(r.adapterIndex >> 8), UInt8(r.adapterIndex & 0xFF), UInt8(op >> 8), UInt8(op & 0xFF)]
                + r.payload
        }
        let n = records.count
        // pcap: seconds 0 (1970), 0xFFFFFFFF (2106), and backwards, on the last record.
        for seconds: UInt32 in [0, 0xFFFF_FFFF, UInt32(records[n - 2].timestamp.nanoseconds / 1_000_000_000) - 3600] {
            var p = PcapBuilder(linkType: 254, bigEndian: false)
            for (i, r) in records.enumerated() {
                let ns = r.timestamp.nanoseconds
                p.record(
                    seconds: i == n - 1 ? seconds : UInt32(ns / 1_000_000_000),
                    fraction: i == n - 1 ? 999_999 : UInt32(ns % 1_000_000_000 / 1000), monitor(r))
            }
            let got = replayBytes(p.bytes)
            #expect(got.warnings.isEmpty)
            #expect(got.lines.dropLast() == Self.normalLines.dropLast(), "pcap seconds \(seconds)")
        }
        // pcapng: ticks of 10^-6 s past what 64-bit nanoseconds hold → bad_timestamp at the
        // packet's timestamp field; 0 (1970) and the end of the range → taken as they are.
        for ticks: UInt64 in [UInt64.max, UInt64(Int64.max), 9_223_372_036_854_776, 0, 9_223_369_200_000_000] {
            var g = PcapngBuilder(bigEndian: false)
            g.interface(linkType: 254)
            var lastBlock = 0
            for (i, r) in records.enumerated() {
                if i == n - 1 { lastBlock = g.bytes.count }
                g.enhancedPacket(
                    interface: 0, ticks: i == n - 1 ? ticks : UInt64(r.timestamp.nanoseconds / 1000), monitor(r))
            }
            let got = replayBytes(g.bytes)
            #expect(got.lines.dropLast() == Self.normalLines.dropLast(), "pcapng ticks \(ticks)")
            if ticks > 9_223_372_036_854_775 {
                #expect(got.warnings.map(\.code) == [.badTimestamp], "pcapng ticks \(ticks)")
                #expect(got.warnings.first?.offset == Int64(lastBlock + 12))
                #expect(got.lines.last!.contains("\"message\":\"the capture ends\""))
            } else {
                #expect(got.warnings.isEmpty, "pcapng ticks \(ticks)")
            }
        }
    }

    /// The splitter agrees with the reader: a record it skips for its timestamp opens or closes nothing.
    @Test func quietPointsSkipARecordTheReaderSkips() {
        let offsets = btsnoopRecordOffsets(Self.normal)
        let last = offsets.last!  // the Disconnection Complete
        func quietAfterLast(_ bytes: [UInt8]) -> Bool {
            var q = QuietPoints(datalink: .monitor)
            var quiet = false
            bytes.withUnsafeBytes { raw in
                var at = 16
                while case let .record(length, isQuiet) = q.step(UnsafeRawBufferPointer(rebasing: raw[at...])) {
                    at += length
                    quiet = isQuiet
                }
            }
            return quiet
        }
        #expect(quietAfterLast(Self.normal))
        #expect(!quietAfterLast(settingBTSnoopTimestamp(Self.normal, recordOffset: last, to: 0)))
    }
}
