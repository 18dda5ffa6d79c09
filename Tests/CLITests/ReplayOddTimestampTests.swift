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
        let want = try String(
            contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8
        )
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
                #expect(
                    r.stderr.contains(
                        "cuff replay: \(file.path): bad_timestamp at offset \(offsets.last! + 16): expected a record timestamp between 1677-09-21 and 2262-04-11, found \(value) µs since 0000-01-01"
                    ))
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
        Self.setTimestamp(
            &b, record: disconnections[disconnections.count - 2],
            UInt64(9_223_369_200) * 1_000_000 + 0x00DC_DDB3_0F2F_8000)
        let file = ReplayCommandTests.tempFile("damaged.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(b).write(to: file)
        // What the undamaged part before the damage gives: every measurement of it comes out.
        let head = ReplayCommandTests.tempFile("head.btsnoop")
        defer { try? FileManager.default.removeItem(at: head) }
        try Data(b.prefix(damaged)).write(to: head)
        let before = try CLI.run(["replay", head.path, "--quiet", "--jobs", "1"]).stdoutLines.filter {
            $0.hasPrefix("{\"type\":\"measurement\"")
        }
        #expect(before.count >= 2)
        for quiet in [["--quiet"], []] {
            let one = try CLI.run(["replay", file.path, "--jobs", "1"] + quiet)
            #expect(one.status == 1, "\(one.stderr.suffix(400))")
            #expect(one.stderr.contains("bad_timestamp at offset \(damaged + 16)"))
            let measurements = one.stdoutLines.filter { $0.hasPrefix("{\"type\":\"measurement\"") }
            #expect(Array(measurements.prefix(before.count)) == before)
            for args in [
                ["--segment-bytes", "1"], ["--segment-bytes", "1", "--jobs", "4"],
                ["--segment-bytes", "30000", "--jobs", "3"], [],
            ] {
                let many = try CLI.run(["replay", file.path] + args + quiet)
                #expect(many.status == one.status, "\(args)")
                #expect(many.stdout == one.stdout, "\(args): stdout differs")
                #expect(many.stderr == one.stderr, "\(args): stderr differs")
            }
        }
    }
}

/// The same session as pcap and pcapng (LINKTYPE 254, written here from the btsnoop records).
@Suite("cuff replay: odd timestamps in pcap and pcapng")
struct ReplayOddTimestampPcapCLITests {
    /// (µs since 1970, monitor pseudo-header + payload) of each record of a btsnoop 2001 file.
    static func packets(_ b: [UInt8]) -> [(micros: UInt64, data: [UInt8])] {
        ReplayOddTimestampCLITests.recordOffsets(b).map { o in
            let included = Int(b[o + 4]) << 24 | Int(b[o + 5]) << 16 | Int(b[o + 6]) << 8 | Int(b[o + 7])
            let ts = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(b[o + 16 + $1]) } - 0x00DC_DDB3_0F2F_8000
            return (ts, Array(b[(o + 8)..<(o + 12)]) + Array(b[(o + 24)..<(o + 24 + included)]))
        }
    }

    static func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }

    static func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
        let padded = body + [UInt8](repeating: 0, count: (4 - body.count % 4) % 4)
        let length = UInt32(12 + padded.count)
        return le32(type) + le32(length) + padded + le32(length)
    }

    @Test func pcapAndPcapngFromTheSameSession() throws {
        let src = [UInt8](try Data(contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.btsnoop")))
        let want = try String(
            contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8
        )
        .split(separator: "\n").map(String.init)
        let packets = Self.packets(src)
        let file = ReplayCommandTests.tempFile("odd")
        defer { try? FileManager.default.removeItem(at: file) }

        // pcapng, ticks of µs: the last packet's past what 64-bit ns hold → bad_timestamp at its
        // timestamp field, the packet skipped; everything before it replayed.
        var g = Self.block(
            0x0A0D_0D0A,
            Self.le32(0x1A2B_3C4D) + Self.le16(1) + Self.le16(0) + Self.le32(0xFFFF_FFFF) + Self.le32(0xFFFF_FFFF))
        g += Self.block(1, Self.le16(254) + Self.le16(0) + Self.le32(0))
        var lastBlock = 0
        for (i, p) in packets.enumerated() {
            let ticks = i == packets.count - 1 ? UInt64.max : p.micros
            if i == packets.count - 1 { lastBlock = g.count }
            g += Self.block(
                6,
                Self.le32(0) + Self.le32(UInt32(ticks >> 32)) + Self.le32(UInt32(truncatingIfNeeded: ticks))
                    + Self.le32(UInt32(p.data.count)) + Self.le32(UInt32(p.data.count)) + p.data)
        }
        try Data(g).write(to: file)
        for jobs in [[], ["--jobs", "1"]] {
            let r = try CLI.run(["replay", file.path, "--quiet"] + jobs)
            #expect(r.status == 1, "\(r.stderr)")
            #expect(
                r.stderr.contains(
                    "bad_timestamp at offset \(lastBlock + 12): expected a packet timestamp between 1677-09-21 and 2262-04-11, found \(UInt64.max) ticks of 10^-6 s"
                ))
            #expect(r.stdoutLines.dropLast() == want.dropLast())
        }

        // pcap: 32-bit unsigned seconds always fit (1970–2106): 0 and 0xFFFFFFFF on the last
        // record are taken as they are.
        for seconds: UInt32 in [0, 0xFFFF_FFFF] {
            var p =
                Self.le32(0xA1B2_C3D4) + Self.le16(2) + Self.le16(4) + Self.le32(0) + Self.le32(0) + Self.le32(65535)
                + Self.le32(254)
            for (i, k) in packets.enumerated() {
                let s = i == packets.count - 1 ? seconds : UInt32(k.micros / 1_000_000)
                let us = i == packets.count - 1 ? 999_999 : UInt32(k.micros % 1_000_000)
                p +=
                    Self.le32(s) + Self.le32(us) + Self.le32(UInt32(k.data.count)) + Self.le32(UInt32(k.data.count))
                    + k.data
            }
            try Data(p).write(to: file)
            let r = try CLI.run(["replay", file.path, "--quiet"])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdoutLines.dropLast() == want.dropLast())
            #expect(r.stdoutLines.last?.hasPrefix("{\"type\":\"session\",\"event\":\"end\"") == true)
        }
    }
}

/// A capture made on a Bluetooth interface and an Ethernet one at once (Wireshark's multi-interface
/// capture): the Ethernet packets are skipped, with a notice on stderr even with `--quiet`, and the
/// replay is the Bluetooth interface's alone, exit 0: a whole capture is not a damaged one.
@Suite("cuff replay: pcapng with a second, non-Bluetooth interface")
struct ReplayForeignInterfaceCLITests {
    typealias P = ReplayOddTimestampPcapCLITests

    @Test func itsPacketsAreSkippedWithANoticeAndTheReplaySucceeds() throws {
        let src = [UInt8](try Data(contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.btsnoop")))
        let want = try String(
            contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8
        )
        .split(separator: "\n").map(String.init)
        let file = ReplayCommandTests.tempFile("eth")
        defer { try? FileManager.default.removeItem(at: file) }
        func epb(_ interface: UInt32, _ micros: UInt64, _ data: [UInt8]) -> [UInt8] {
            P.block(
                6,
                P.le32(interface) + P.le32(UInt32(micros >> 32)) + P.le32(UInt32(truncatingIfNeeded: micros))
                    + P.le32(UInt32(data.count)) + P.le32(UInt32(data.count)) + data)
        }
        var g = P.block(
            0x0A0D_0D0A, P.le32(0x1A2B_3C4D) + P.le16(1) + P.le16(0) + P.le32(0xFFFF_FFFF) + P.le32(0xFFFF_FFFF))
        let ethernetBlock = g.count
        g += P.block(1, P.le16(1) + P.le16(0) + P.le32(0))  // interface 0: Ethernet
        g += P.block(1, P.le16(254) + P.le16(0) + P.le32(0))  // interface 1: Bluetooth monitor
        for (i, p) in P.packets(src).enumerated() {
            g += epb(1, p.micros, p.data)
            // An ARP-sized Ethernet frame now and then, between the Bluetooth packets.
            if i % 10 == 0 {
                g += epb(0, p.micros, [UInt8](repeating: 0xFF, count: 6) + [UInt8](repeating: 0, count: 36))
            }
        }
        try Data(g).write(to: file)
        for quiet in [["--quiet"], []] {
            let r = try CLI.run(["replay", file.path] + quiet)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdoutLines == want)
            let notices = r.stderr.split(separator: "\n").filter { $0.contains("unknown_datalink") }
            #expect(notices.count == 1, "\(r.stderr)")
            #expect(
                notices.first?.contains(
                    "unknown_datalink at offset \(ethernetBlock): interface 0 has link type 1, expected 201, 254 or 256; its packets are skipped"
                ) == true, "\(r.stderr)")
        }
    }
}

/// `--realtime` paces by the capture's clock; one that runs backwards across the whole range and
/// forward again must neither trap nor wait for centuries (the jump back to 2026 is one pause of
/// 5 s at most): the output is the unpaced replay's.
@Suite("cuff replay --realtime: odd timestamps")
struct ReplayRealtimeOddTimestampCLITests {
    @Test func aClockThatRunsBackwardsAcrossTheRange() throws {
        var b = [UInt8](try Data(contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.btsnoop")))
        let offsets = ReplayOddTimestampCLITests.recordOffsets(b)
        let epoch: UInt64 = 0x00DC_DDB3_0F2F_8000
        // The first record at the end of the range, the second at its start, then the session
        // 20 µs a record from 2026 on (so the paced replay takes a few tens of milliseconds).
        ReplayOddTimestampCLITests.setTimestamp(&b, record: offsets[0], epoch + 9_223_372_036_000_000)
        ReplayOddTimestampCLITests.setTimestamp(&b, record: offsets[1], epoch - 9_223_372_036_000_000)
        for (i, o) in offsets.enumerated().dropFirst(2) {
            ReplayOddTimestampCLITests.setTimestamp(&b, record: o, epoch + 1_795_330_917_000_000 + UInt64(i) * 20)
        }
        let file = ReplayCommandTests.tempFile("realtime.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(b).write(to: file)
        let plain = try CLI.run(["replay", file.path, "--quiet", "--jobs", "1"])
        #expect(plain.status < 128)
        #expect(plain.stdoutLines.count > 100)
        let started = Date()
        let paced = try CLI.run(["replay", file.path, "--quiet", "--realtime"], timeout: 60)
        #expect(Date().timeIntervalSince(started) < 30)
        #expect(paced.status == plain.status, "\(paced.stderr)")
        #expect(paced.stdout == plain.stdout)
    }
}
