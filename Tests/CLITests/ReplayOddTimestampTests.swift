import Foundation
import Testing

/// `cuff replay` of captures with odd timestamps: no crash, every measurement before the damage,
/// and the same output from one thread and several.
@Suite("cuff replay: odd timestamps")
struct ReplayOddTimestampCLITests {
    /// Offsets of each record of a btsnoop file.
    static func recordOffsets(_ b: [UInt8]) -> [Int] {
        var out: [Int] = []
        var at = 16
        while at + 24 <= b.count {
            out.append(at)
            at += 24 + (Int(b[at + 4]) << 24 | Int(b[at + 5]) << 16 | Int(b[at + 6]) << 8 | Int(b[at + 7]))
        }
        return out
    }

    static func setTimestamp(_ b: inout [UInt8], record o: Int, _ v: UInt64) {
        for i in 0..<8 { b[o + 16 + i] = UInt8(truncatingIfNeeded: v >> (56 - 8 * i)) }
    }

    /// True for a monitor record holding HCI Disconnection Complete.
    static func isDisconnection(_ b: [UInt8], _ o: Int) -> Bool {
        b[o + 10] == 0 && b[o + 11] == 3 && b[o + 24] == 0x05
    }

    @Test func aZeroedTimestampIsNamedAndTheMeasurementBeforeItPrinted() throws {
        let src = [UInt8](try Data(contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.btsnoop")))
        let want = try String(contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        let offsets = Self.recordOffsets(src)
        for value: UInt64 in [0, UInt64.max] {
            var b = src
            Self.setTimestamp(&b, record: offsets.last!, value)  // the Disconnection Complete
            let file = ReplayCommandTests.tempFile("zeroed.btsnoop")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(b).write(to: file)
            for jobs in [[], ["--jobs", "1"], ["--segment-bytes", "1", "--jobs", "3"]] {
                let r = try CLI.run(["replay", file.path, "--quiet"] + jobs)
                #expect(r.status == 1, "\(jobs): \(r.stderr)")
                #expect(r.stderr.contains("cuff replay: \(file.path): bad_timestamp at offset \(offsets.last! + 16): expected a record timestamp between 1677-09-21 and 2262-04-11, found \(value) µs since 0000-01-01"))
                #expect(r.stdoutLines.dropLast() == want.dropLast(), "\(jobs)")
                #expect(r.stdoutLines.contains { $0.hasPrefix("{\"type\":\"measurement\"") })
            }
        }
    }

    /// Every committed capture joined into one file, with a zeroed timestamp on an early
    /// Disconnection Complete (that connection stays open until its handle comes again) and one
    /// near the end of the range on a later one: one thread and several print the same, with
    /// every measurement before the damage.
    @Test func severalThreadsAgreeOnADamagedCapture() throws {
        var b = try ReplayCommandTests.joinedCaptures()
        let offsets = Self.recordOffsets(b)
        let disconnections = offsets.filter { Self.isDisconnection(b, $0) }
        #expect(disconnections.count > 10)
        // (The third committed capture's, whose connection a central made: the shared btmon
        // sample, when present, comes half-way.)
        let damaged = disconnections[2]
        Self.setTimestamp(&b, record: damaged, 0)
        Self.setTimestamp(&b, record: disconnections[disconnections.count - 2], UInt64(9_223_369_200) * 1_000_000 + 0x00DC_DDB3_0F2F_8000)
        let file = ReplayCommandTests.tempFile("damaged.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(b).write(to: file)
        // What the undamaged part before the damage gives: every measurement of it comes out.
        let head = ReplayCommandTests.tempFile("head.btsnoop")
        defer { try? FileManager.default.removeItem(at: head) }
        try Data(b.prefix(damaged)).write(to: head)
        let before = try CLI.run(["replay", head.path, "--quiet", "--jobs", "1"]).stdoutLines.filter { $0.hasPrefix("{\"type\":\"measurement\"") }
        #expect(before.count >= 2)
        for quiet in [["--quiet"], []] {
            let one = try CLI.run(["replay", file.path, "--jobs", "1"] + quiet)
            #expect(one.status == 1, "\(one.stderr.suffix(400))")
            #expect(one.stderr.contains("bad_timestamp at offset \(damaged + 16)"))
            let measurements = one.stdoutLines.filter { $0.hasPrefix("{\"type\":\"measurement\"") }
            #expect(Array(measurements.prefix(before.count)) == before)
            for args in [["--segment-bytes", "1"], ["--segment-bytes", "1", "--jobs", "4"], ["--segment-bytes", "30000", "--jobs", "3"], []] {
                let many = try CLI.run(["replay", file.path] + args + quiet)
                #expect(many.status == one.status, "\(args)")
                #expect(many.stdout == one.stdout, "\(args): stdout differs")
                #expect(many.stderr == one.stderr, "\(args): stderr differs")
            }
        }
    }
}
