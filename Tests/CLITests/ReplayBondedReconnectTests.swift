import Foundation
import Testing

/// A bonded central reconnecting with its GATT cache: no discovery on the second connection.
@Suite("cuff replay: bonded reconnects")
struct ReplayBondedReconnectCLITests {
    static let discovery: Set<UInt8> = [0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x10, 0x11]

    /// captures/normal.btsnoop's records (after the file header) an hour later, without the ACL
    /// fragments of discovery PDUs; and the value handle of the measurement's indication.
    static func reconnect(_ src: [UInt8]) -> (records: [UInt8], bpmHandle: UInt16) {
        var out: [UInt8] = []
        var dropping: [UInt8: Bool] = [:]
        var bpm: UInt16 = 0
        for o in ReplayOddTimestampCLITests.recordOffsets(src) {
            let included = Int(src[o + 4]) << 24 | Int(src[o + 5]) << 16 | Int(src[o + 6]) << 8 | Int(src[o + 7])
            var r = Array(src[o..<(o + 24 + included)])
            let op = src[o + 11]
            if src[o + 10] == 0, op == 4 || op == 5, included >= 2 {
                let pb = (r[25] >> 4) & 3
                if pb != 1, included >= 9 {
                    let att = r[24 + 8]
                    dropping[op] =
                        discovery.contains(att) || (att == 0x01 && included >= 10 && discovery.contains(r[24 + 9]))
                    if att == 0x1D, included >= 11 { bpm = UInt16(r[24 + 9]) | UInt16(r[24 + 10]) << 8 }
                }
                if dropping[op] == true { continue }
            }
            var t = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(r[16 + $1]) }
            t += 3_600_000_000
            for i in 0..<8 { r[16 + i] = UInt8(truncatingIfNeeded: t >> (56 - 8 * i)) }
            out += r
        }
        return (out, bpm)
    }

    /// `file`'s records (after the file header), `hours` later.
    static func shifted(_ file: [UInt8], hours: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        for o in ReplayOddTimestampCLITests.recordOffsets(file) {
            let included = Int(file[o + 4]) << 24 | Int(file[o + 5]) << 16 | Int(file[o + 6]) << 8 | Int(file[o + 7])
            var r = Array(file[o..<(o + 24 + included)])
            let t = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(r[16 + $1]) } + hours * 3_600_000_000
            for i in 0..<8 { r[16 + i] = UInt8(truncatingIfNeeded: t >> (56 - 8 * i)) }
            out += r
        }
        return out
    }

    static func values(_ lines: [String]) -> [String] {
        lines.filter { $0.hasPrefix("{\"type\":\"measurement\"") }
            .map { $0.replacingOccurrences(of: #""received_at":"[^"]*""#, with: "", options: .regularExpression) }
    }

    @Test func theHandlesOfAnEarlierDiscoveryAreUsedAndSaidSo() throws {
        let src = [UInt8](try Data(contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.btsnoop")))
        let (second, bpm) = Self.reconnect(src)
        #expect(bpm != 0)
        #expect(second.count < src.count - 16 - 200)  // discovery was taken out
        let both = ReplayCommandTests.tempFile("bonded.btsnoop")
        let alone = ReplayCommandTests.tempFile("bonded-alone.btsnoop")
        defer {
            try? FileManager.default.removeItem(at: both)
            try? FileManager.default.removeItem(at: alone)
        }
        try Data(src + second).write(to: both)
        try Data(Array(src.prefix(16)) + second).write(to: alone)

        let one = try CLI.run(["replay", both.path, "--jobs", "1"])
        #expect(one.status == 0, "\(one.stderr.suffix(600))")
        let notices = one.stderr.split(separator: "\n").filter {
            $0.contains("no service discovery on this connection")
        }
        let connectedAt = try #require(
            ReplayOddTimestampCLITests.recordOffsets(src).first {
                src[$0 + 10] == 0 && src[$0 + 11] == 3 && src[$0 + 24] == 0x3E
            })
        #expect(
            notices == [
                "cuff replay: hci0 connection 0x0040 to 00:AA:01:00:00:00: no service discovery on this connection; using the handles discovered on connection 0x0040 (connected at offset \(connectedAt))"
            ])
        let measured = Self.values(one.stdoutLines)
        #expect(measured.count == 2)
        #expect(measured.first == measured.last)

        // The reconnect alone needs --handle; with it, the same values (the device information
        // its reads carried is unmapped there).
        let bare = try CLI.run(["replay", alone.path, "--quiet"])
        #expect(bare.status == 7)
        let handled = try CLI.run(["replay", alone.path, "--quiet", "--handle", String(format: "0x%04X=2a35", bpm)])
        #expect(handled.status == 0)
        let h = try CLI.json(try #require(handled.stdoutLines.first { $0.hasPrefix("{\"type\":\"measurement\"") }))
        let m = try CLI.json(try #require(one.stdoutLines.last { $0.hasPrefix("{\"type\":\"measurement\"") }))
        for key in ["systolic", "diastolic", "mean_arterial_pressure", "pulse_rate", "raw", "timestamp", "received_at"]
        {
            #expect("\(h[key] ?? "nil")" == "\(m[key] ?? "nil")", "\(key)")
        }

        // Cut after the first session, the second stretch is replayed again with the handles the
        // first learned: the same bytes as one thread, quiet or not.
        for quiet in [["--quiet"], []] {
            let base = try CLI.run(["replay", both.path, "--jobs", "1"] + quiet)
            for args in [["--segment-bytes", "1"], ["--segment-bytes", "1", "--jobs", "4"], []] {
                let many = try CLI.run(["replay", both.path] + args + quiet)
                #expect(many.status == base.status, "\(args)")
                #expect(many.stdout == base.stdout, "\(args): stdout differs")
                #expect(many.stderr == base.stderr, "\(args): stderr differs")
            }
        }
    }

    /// Many short sessions (a gateway's log): a discovery, 24 reconnects that use it, a second
    /// discovery (of another connection: the reconnects after it name that one), 24 more. Cut into
    /// stretches, each replay thread starts from the maps learned when its stretch was handed out,
    /// and a stretch whose maps were not those of the one-thread replay there is replayed again:
    /// stdout and stderr stay the one-thread replay's.
    @Test func manyReconnectsAcrossStretchesAndARediscoveryGiveTheOneThreadReplay() throws {
        let src = [UInt8](try Data(contentsOf: ReplayCommandTests.captures.appendingPathComponent("normal.btsnoop")))
        var file = src
        var previous = src
        for round in 0..<2 {
            if round == 1 {
                let again = Self.shifted(src, hours: 100)
                file += again
                previous = Array(src.prefix(16)) + again
            }
            for _ in 0..<24 {
                let (next, _) = Self.reconnect(previous)
                file += next
                previous = Array(src.prefix(16)) + next
            }
        }
        let path = ReplayCommandTests.tempFile("reconnects.btsnoop")
        defer { try? FileManager.default.removeItem(at: path) }
        try Data(file).write(to: path)
        let one = try CLI.run(["replay", path.path, "--jobs", "1"])
        #expect(one.status == 0, "\(one.stderr.suffix(600))")
        let notices = one.stderr.split(separator: "\n").filter {
            $0.contains("no service discovery on this connection")
        }
        #expect(notices.count == 48)
        #expect(Set(notices.map { $0.suffix(30) }).count == 2)  // the two discoveries' offsets
        #expect(Self.values(one.stdoutLines).count == 50)
        for args in [
            ["--segment-bytes", "1", "--jobs", "2"], ["--segment-bytes", "1", "--jobs", "4"],
            ["--segment-bytes", "3000", "--jobs", "3"], [],
        ] {
            let many = try CLI.run(["replay", path.path] + args)
            #expect(many.status == one.status, "\(args)")
            #expect(many.stdout == one.stdout, "\(args): stdout differs")
            #expect(many.stderr == one.stderr, "\(args): stderr differs")
        }
    }
}
