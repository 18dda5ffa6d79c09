import CuffTestSupport
import Foundation
import Testing

/// `cuff measure --simulated … --capture F` then `cuff replay F`: the same records.
@Suite("cuff replay")
struct ReplayCommandTests {
    static let scenarios: [String] = {
        guard let r = try? CLI.run(["simulate", "--list"]) else { return [] }
        return r.stdoutLines.map { String($0.split(separator: "\t")[0]) }
    }()

    static let cases: [(String, String)] = scenarios.flatMap { s in ["bps-1.0", "bps-1.1"].map { (s, $0) } }

    static var captures: URL { CLI.packageRoot.appendingPathComponent("captures") }

    static func tempFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("cuff-replay-\(UUID().uuidString)-\(name)")
    }

    /// The record with `device.address` taken out: live says `simulated:SCENARIO`, the capture only
    /// holds the cuff's Bluetooth address.
    static func comparable(_ line: String) throws -> NSDictionary {
        var o = try CLI.json(line)
        if var d = o["device"] as? [String: Any] { d["address"] = nil; o["device"] = d }
        return o as NSDictionary
    }

    /// Probe C3: one overlong L2CAP frame was followed by a warning for every continuation
    /// fragment after it (2,400 lines). Ten of a code are shown, the rest counted once at the
    /// end; the exit status still says the capture is damaged. With and without `--quiet`.
    @Test(arguments: [true, false])
    func aRunOfOneWarningIsShownTenTimesThenCounted(quiet: Bool) throws {
        // btsnoop (H4, 1002): 30 ACL continuation fragments with no start fragment before them.
        var bytes = Array("btsnoop".utf8) + [0, 0, 0, 0, 1, 0, 0, 0x03, 0xEA]
        for i in 0..<30 {
            let acl: [UInt8] = [0x02, 0x40, 0x10, 4, 0, 1, 2, 3, 4]  // handle 0x040, PB 01
            let n = UInt32(acl.count)
            for v in [n, n, 1, 0] { bytes += withUnsafeBytes(of: v.bigEndian) { Array($0) } }
            bytes += withUnsafeBytes(of: (0x00E0_3AB4_4A67_8000 + UInt64(i) * 1000).bigEndian) { Array($0) }
            bytes += acl
        }
        let file = Self.tempFile("continuations.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(bytes).write(to: file)
        let r = try CLI.run(["replay", file.path] + (quiet ? ["--quiet"] : []))
        #expect(r.status == 1, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.filter { $0.contains(": acl_out_of_order at offset ") }.count == 10, "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "continuations.btsnoop: 20 more acl_out_of_order warnings not shown (the first 10 are above)"),
            "\(r.stderr)")
    }

    @Test func everyScenarioIsListed() {
        #expect(Self.scenarios.count >= 15)
    }

    @Test(arguments: cases)
    func replayGivesTheLiveSessionsRecords(_ scenario: String, _ persona: String) throws {
        let file = Self.tempFile("\(scenario)-\(persona).btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        let live = try CLI.run([
            "measure", "--simulated", scenario, "--persona", persona, "--seed", "3", "--speed", "0", "--quiet",
            "--capture", file.path,
        ])
        #expect(live.status == 0 || (scenario == "disconnect" && live.status == 4), "\(live.stderr)")
        let replayed = try CLI.run(["replay", file.path, "--quiet"])
        #expect(replayed.status == 0 || (scenario == "disconnect" && replayed.status == 2), "\(replayed.stderr)")
        func records(_ r: CLIResult, _ type: String) throws -> [NSDictionary] {
            try r.stdoutLines.filter { $0.contains("\"type\":\"\(type)\"") }.map(Self.comparable)
        }
        let liveM = try records(live, "measurement"), replayM = try records(replayed, "measurement")
        #expect(liveM == replayM)
        #expect(!liveM.isEmpty || scenario == "disconnect")
        let liveP = try records(live, "progress"), replayP = try records(replayed, "progress")
        #expect(liveP == replayP)
        #expect(liveP.count > 20)
        // Session records: the same outcome and counts (the address and the disconnect message differ).
        let liveS = try records(live, "session"), replayS = try records(replayed, "session")
        #expect(liveS.count == 2 && replayS.count == 2)
        #expect(liveS.last?["outcome"] as? String == replayS.last?["outcome"] as? String)
        #expect(liveS.last?["measurements"] as? Int == replayS.last?["measurements"] as? Int)
        #expect(liveS.first?["at"] as? String == replayS.first?["at"] as? String)
        #expect(liveS.last?["at"] as? String == replayS.last?["at"] as? String)
    }

    @Test func committedCapturesReplayToTheirNDJSON() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.captures.path).filter {
            $0.hasSuffix(".btsnoop")
        }.sorted()
        #expect(names.count >= 16)
        for n in names {
            let base = String(n.dropLast(".btsnoop".count))
            let r = try CLI.run(["replay", Self.captures.appendingPathComponent(n).path, "--quiet"])
            #expect(r.status == 0 || (base == "disconnect" && r.status == 2), "\(base): \(r.stderr)")
            let want = try String(contentsOf: Self.captures.appendingPathComponent(base + ".ndjson"), encoding: .utf8)
            #expect(r.stdout == want, "\(base)")
        }
    }

    @Test func otherFormatsOfTheSameSession() throws {
        let f = Self.captures.appendingPathComponent("normal.btsnoop").path
        let fhir = try CLI.run(["replay", f, "--format", "fhir", "--quiet"])
        #expect(fhir.status == 0)
        #expect(fhir.stdout.contains("\"resourceType\""))
        let omh = try CLI.run(["replay", f, "--format", "omh", "--quiet"])
        #expect(omh.status == 0)
        #expect(!omh.stdout.isEmpty)
    }

    @Test func formatForcesTheCaptureFormatAndPicksTheOutput() throws {
        let f = Self.captures.appendingPathComponent("normal.btsnoop").path
        let plain = try CLI.run(["replay", f, "--quiet"])
        let forced = try CLI.run(["replay", f, "--format", "btsnoop", "--quiet"])
        #expect(forced.status == 0 && forced.stdout == plain.stdout)
        // Forced to the wrong container: the magic does not match, and the error says what was expected.
        let wrong = try CLI.run(["replay", f, "--format", "pcapng", "--quiet"])
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("pcapng"))
        // Both at once: the capture's format and the output's, in either order.
        for args in [["--format", "btsnoop", "--format", "fhir"], ["--format", "fhir", "--format", "btsnoop"]] {
            let both = try CLI.run(["replay", f] + args + ["--quiet"])
            #expect(both.status == 0)
            #expect(both.stdout.contains("\"resourceType\""))
        }
        let bogus = try CLI.run(["replay", f, "--format", "xml"])
        #expect(bogus.status == 64)
        // argument-parser refuses it, listing every format --format takes.
        #expect(bogus.stderr.contains("The value 'xml' is invalid for '--format <format>'"))
        for name in ["ndjson", "fhir", "omh", "auto", "btsnoop", "pcap", "pcapng"] {
            #expect(bogus.stderr.contains("  - \(name)\n"))
        }
        // cuff measure writes no capture format.
        let measure = try CLI.run(["measure", "--simulated", "normal", "--speed", "0", "--format", "pcap"])
        #expect(measure.status == 64)
        #expect(measure.stderr.contains("capture format"))
    }

    @Test func inputFormatNamesTheCaptureFormatOnItsOwn() throws {
        let f = Self.captures.appendingPathComponent("normal.btsnoop").path
        let plain = try CLI.run(["replay", f, "--quiet"])
        for option in ["--input-format", "--capture-format"] {
            let forced = try CLI.run(["replay", f, option, "btsnoop", "--format", "ndjson", "--quiet"])
            #expect(forced.status == 0 && forced.stdout == plain.stdout)
            let wrong = try CLI.run(["replay", f, option, "pcap", "--quiet"])
            #expect(wrong.status == 1)
            #expect(wrong.stderr.contains("pcap"))
        }
        // --input-format wins over a capture format given to --format.
        let both = try CLI.run(["replay", f, "--input-format", "btsnoop", "--format", "pcap", "--quiet"])
        #expect(both.status == 0 && both.stdout == plain.stdout)
        let bogus = try CLI.run(["replay", f, "--input-format", "xml"])
        #expect(bogus.status == 64)
        #expect(bogus.stderr.contains("pcapng"))
    }

    @Test func truncatedCapturePrintsWhatCameBeforeThenNamesTheOffset() throws {
        let src = try Data(contentsOf: Self.captures.appendingPathComponent("normal.btsnoop"))
        let file = Self.tempFile("cut.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        try src.prefix(src.count * 2 / 3 + 5).write(to: file)
        let r = try CLI.run(["replay", file.path, "--quiet"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("truncated_"))
        #expect(r.stderr.contains("at offset "))
        #expect(r.stdoutLines.filter { $0.contains("\"progress\"") }.count > 100)
        #expect(r.stdoutLines.last?.contains("\"end\"") == true)
    }

    /// A btsnoop file is cut where no connection is open and its stretches replayed on several
    /// threads: stdout, stderr and the exit status are the one-thread replay's, whole, cut short in
    /// a record, or stopped by an oversize header; stretches as small as one session each, or
    /// several, or the default.
    /// Every committed capture and the shared two-controller btmon file, one after the other, as one btsnoop file.
    static func joinedCaptures() throws -> [UInt8] {
        var files = try FileManager.default.contentsOfDirectory(atPath: captures.path).filter {
            $0.hasSuffix(".btsnoop")
        }.sorted()
            .map { captures.appendingPathComponent($0).path }
        let sample = "/work/shared/vmble/samples/capture-all-scenarios.btsnoop"
        if FileManager.default.fileExists(atPath: sample) { files.insert(sample, at: files.count / 2) }
        var joined: [UInt8] = []
        for f in files {
            let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: f)))
            #expect(b[12..<16].elementsEqual([0, 0, 0x07, 0xD1]), "\(f) is not btmon's datalink 2001")
            joined += joined.isEmpty ? b : Array(b.dropFirst(16))
        }
        return joined
    }

    @Test func severalThreadsGiveWhatOneThreadGives() throws {
        let joined = try Self.joinedCaptures()
        let oversize =
            joined + [0, 0, 0, 9, 0xFF, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 16)
            + joined.dropFirst(16).prefix(5000)
        for (name, bytes) in [
            ("whole", joined), ("cut", Array(joined.prefix(joined.count * 2 / 3 + 7))), ("oversize", oversize),
        ] {
            let file = Self.tempFile("\(name).btsnoop")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(bytes).write(to: file)
            for quiet in [false, true] {
                let q = quiet ? ["--quiet"] : []
                let one = try CLI.run(["replay", file.path, "--jobs", "1"] + q)
                #expect(one.stdoutLines.count > 1000)
                if name == "whole" {
                    #expect(one.status == 0 || one.status == 7, "\(one.stderr.suffix(300))")
                } else {
                    #expect(one.status == 1)
                }
                for args in [
                    ["--segment-bytes", "1"], ["--segment-bytes", "1", "--jobs", "4"],
                    ["--segment-bytes", "30000", "--jobs", "3"], [],
                ] {
                    let many = try CLI.run(["replay", file.path] + args + q)
                    #expect(many.status == one.status, "\(name) \(args)")
                    #expect(many.stdout == one.stdout, "\(name) \(args): stdout differs")
                    #expect(many.stderr == one.stderr, "\(name) \(args): stderr differs")
                }
            }
        }
    }

    /// A connection that never closes leaves no quiet point: past 4 stretches' worth of bytes (at
    /// least 1 MB) the rest goes to one thread, after what the threads already wrote; the output
    /// is unchanged.
    @Test func aConnectionThatNeverClosesHandsTheRestToOneThread() throws {
        let joined = try Self.joinedCaptures()
        let records = joined.dropFirst(16)
        // An ATT Read Request sent on handle 0x0EEE, which no event opens or closes (its session
        // times out later, in the capture's time).
        let firstRecord = Array(records.prefix(24))
        var acl: [UInt8] = [0, 0, 0, 11, 0, 0, 0, 11, 0, 0, 0, 4, 0, 0, 0, 0] + firstRecord[16..<24]
        acl += [0xEE, 0x2E, 7, 0, 3, 0, 4, 0, 0x0A, 3, 0]
        var bytes = Array(joined.prefix(16))
        for i in 0..<7 {
            if i == 2 { bytes += acl }  // after two rounds cut into stretches, none any more
            bytes += records
        }
        #expect(bytes.count > 1 << 20)
        let file = Self.tempFile("open.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(bytes).write(to: file)
        let one = try CLI.run(["replay", file.path, "--jobs", "1"])
        #expect(one.stderr.contains("hci0/0x0EEE"))
        for args in [["--segment-bytes", "1"], ["--segment-bytes", "1", "--jobs", "3"]] {
            let many = try CLI.run(["replay", file.path] + args)
            #expect(many.status == one.status)
            #expect(many.stdout == one.stdout, "\(args): stdout differs")
            #expect(many.stderr == one.stderr, "\(args): stderr differs")
        }
    }

    @Test func jobsMustBeAThreadCount() throws {
        let capture = Self.captures.appendingPathComponent("normal.btsnoop").path
        for bad in ["0", "65"] {
            let r = try CLI.run(["replay", capture, "--jobs", bad])
            #expect(r.status == 64)
            #expect(r.stderr.contains("--jobs takes a number of threads from 1 to 64"))
        }
        #expect(try CLI.run(["replay", capture, "--jobs", "3", "--quiet"]).stdoutLines.count > 100)
    }

    /// `--segment-bytes` past 16 MiB once made each replay thread allocate three times it (1e12:
    /// "failed to allocate", SIGABRT; Int.max: an overflow trap): it is refused, and the largest
    /// taken gives the one-thread output.
    @Test func segmentBytesAreBounded() throws {
        let capture = Self.captures.appendingPathComponent("normal.btsnoop").path
        for bad in ["0", "16777217", "1000000000000", "9223372036854775807"] {
            let r = try CLI.run(["replay", capture, "--jobs", "2", "--segment-bytes", bad])
            #expect(r.status == 64, "\(bad): \(r.stderr)")
            #expect(r.stderr.contains("--segment-bytes takes 1 to 16777216 bytes"), "\(r.stderr)")
        }
        let one = try CLI.run(["replay", capture, "--jobs", "1"])
        let largest = try CLI.run(["replay", capture, "--jobs", "2", "--segment-bytes", "16777216"])
        #expect(largest.status == 0)
        #expect(largest.stdout == one.stdout)
        #expect(largest.stdout.count > 10_000)
    }

    /// A capture read from a pipe (it cannot be read again from an offset) is replayed in one pass.
    @Test func aCaptureFromAPipe() throws {
        let joined = try Self.joinedCaptures()
        let file = Self.tempFile("piped.btsnoop")
        let out = Self.tempFile("piped.out"), err = Self.tempFile("piped.err")
        defer { for f in [file, out, err] { try? FileManager.default.removeItem(at: f) } }
        try Data(joined).write(to: file)
        let p = try ChildProcess(
            ["-c", "cat '\(file.path)' | '\(CLI.binary.path)' replay /dev/stdin --quiet --segment-bytes 1"],
            executable: "/bin/sh", stdout: out.path, stderr: err.path)
        let status = p.wait(timeout: 120)
        let direct = try CLI.run(["replay", file.path, "--quiet", "--jobs", "1"])
        #expect(status == direct.status)
        #expect(try String(contentsOf: out, encoding: .utf8) == direct.stdout)
        #expect(direct.stdoutLines.count > 1000)
    }

    /// `cuff replay -` reads stdin, a pipe or a file, as the other tools do (probe Q: "cannot open -").
    @Test(arguments: ["a pipe", "a file"])
    func aCaptureFromStdinAsADash(_ stdin: String) throws {
        let joined = try Self.joinedCaptures()
        let file = Self.tempFile("dash.btsnoop")
        let out = Self.tempFile("dash.out"), err = Self.tempFile("dash.err")
        defer { for f in [file, out, err] { try? FileManager.default.removeItem(at: f) } }
        try Data(joined).write(to: file)
        let script =
            stdin == "a pipe"
            ? "cat '\(file.path)' | '\(CLI.binary.path)' replay - --quiet"
            : "'\(CLI.binary.path)' replay - --quiet --segment-bytes 262144 --jobs 2 < '\(file.path)'"
        let p = try ChildProcess(["-c", script], executable: "/bin/sh", stdout: out.path, stderr: err.path)
        let status = p.wait(timeout: 120)
        let direct = try CLI.run(["replay", file.path, "--quiet", "--jobs", "1"])
        #expect(status == direct.status)
        #expect(try String(contentsOf: out, encoding: .utf8) == direct.stdout)
        #expect(direct.stdoutLines.count > 1000)
    }

    @Test func aSinkThatFailsStopsTheReplayWithStatus10() throws {
        // stdout on /dev/full: the writer thread's first write fails (ENOSPC); the replay must stop,
        // say why, and exit 10 — not hang with the reading thread waiting on a full pipe.
        let capture = Self.captures.appendingPathComponent("stored-records.btsnoop").path
        let err = Self.tempFile("err")
        defer { try? FileManager.default.removeItem(at: err) }
        let p = try ChildProcess(["replay", capture, "--quiet"], stdout: "/dev/full", stderr: err.path)
        let status = p.wait(timeout: 60)
        if status == nil { p.signal(SIGKILL); _ = p.wait(timeout: 10) }
        #expect(status == 10)
        #expect(try String(contentsOf: err, encoding: .utf8).contains("No space left on device"))
    }

    @Test func badMagicAndOversizeLengths() throws {
        let file = Self.tempFile("bad.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("not a capture at all".utf8).write(to: file)
        let r = try CLI.run(["replay", file.path])
        #expect(r.status == 1)
        #expect(r.stderr.contains("bad_magic at offset 0"))
        #expect(r.stdout.isEmpty)
        // A record header claiming 4 GB after the first records.
        var bytes = [UInt8](try Data(contentsOf: Self.captures.appendingPathComponent("normal.btsnoop")))
        bytes = Array(
            bytes.prefix(
                16 + 24 + Int(UInt32(bigEndian: bytes[20..<24].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }))))
        bytes += [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 16)
        try Data(bytes).write(to: file)
        let o = try CLI.run(["replay", file.path])
        #expect(o.status == 1)
        #expect(o.stderr.contains("oversize_record at offset"))
    }

    @Test func missingDiscoverySaysWhichHandlesToMap() throws {
        let sample = "/work/shared/vmble/samples/capture-all-scenarios.btsnoop"
        guard FileManager.default.fileExists(atPath: sample) else { return }
        let r = try CLI.run(["replay", sample, "--quiet"])
        #expect(r.status == 7)
        #expect(r.stderr.contains("0x0003 (6 indications; like Blood Pressure Measurement 2a35)"))
        #expect(r.stderr.contains("--handle 0x0003=2a35"))
        let m = try CLI.run(["replay", sample, "--quiet", "--handle", "0x0003=2a35"])
        #expect(m.status == 0)
        #expect(m.stdoutLines.filter { $0.contains("\"measurement\"") }.count == 6)
        let bad = try CLI.run(["replay", sample, "--handle", "3=zz"])
        #expect(bad.status != 0)
    }
}
