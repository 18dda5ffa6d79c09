import Foundation
import Testing

/// The device-family personas (`cuff simulate --quirk NAME`) against `cuff measure` in another
/// process, and `cuff decode --protocol` on the public vectors.
@Suite("Device families over a Unix socket, vendor protocols", .serialized)
struct VendorCLITests {
    typealias Simulator = TwoProcessTests.Simulator

    func measurements(_ r: CLIResult) throws -> [[String: Any]] {
        try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
    }

    /// Each persona, the readings expected out, and the profile named on stderr.
    @Test(arguments: [
        ("and-ua651", 3), ("veroval", 5), ("sbm69", 3), ("beurer-bm96", 3), ("beurer-bm85", 1), ("boso", 3),
        ("medisana", 3), ("qardio", 1),
    ])
    func persona(name: String, readings: Int) throws {
        let sim = try Simulator(["--quirk", name, "--speed", "100", "--autostart", "--seed", "3"])
        let r = try CLI.run(
            ["measure", "--connect", "unix:\(sim.path)", "--timeout", "60"] + (name == "qardio" ? ["--start"] : []))
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(r.status == 0, "\(r.stderr)")
        let ms = try measurements(r)
        #expect(ms.count == readings, "\(r.stdout)")
        #expect(r.stderr.contains("applying quirk profile \(name)"), "\(r.stderr)")
        switch name {
        case "and-ua651":
            #expect(r.stderr.components(separatedBy: "skipped a marker record").count == 3, "\(r.stderr)")
            #expect(log.contains("(Date Time)"))
        case "veroval":
            #expect(ms.allSatisfy { $0["mean_arterial_pressure"] is NSNull })
            #expect(ms.map { $0["user_id"] as? Int } == [0, 0, 0, 1, 1])
        case "beurer-bm85":
            // The cuff sends a MAP of 0 (it measures none), read as absent.
            #expect(ms.allSatisfy { $0["systolic"] is Double && $0["mean_arterial_pressure"] is NSNull }, "\(r.stdout)")
            #expect(ms.allSatisfy { ($0["raw"] as? String)?.dropFirst(10).hasPrefix("0000") == true }, "\(r.stdout)")
        case "boso":
            let errors = ms.filter {
                ($0["warnings"] as? [[String: Any]])?.contains { $0["code"] as? String == "error_reading" } == true
            }
            #expect(errors.count == 1)
            #expect(errors.first?["systolic"] as? String == "NaN")
        default:
            #expect(ms.allSatisfy { $0["systolic"] is Double })
        }
    }

    /// Veroval sends its whole memory at every connection: the store keeps each reading once.
    @Test func veroValDumpIsStoredOnce() throws {
        let sim = try Simulator(["--quirk", "veroval", "--speed", "100", "--seed", "3"])
        let db = sim.dir.appendingPathComponent("bp.sqlite").path
        let first = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--store", db, "--timeout", "60"])
        let second = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--store", db, "--timeout", "60"])
        let h = try CLI.run(["history", "--store", db])
        let log = sim.logText
        _ = sim.stop()
        #expect(try measurements(first).count == 5, "\(first.stderr)")
        #expect(try measurements(second).isEmpty, "\(second.stdout)")
        #expect(
            second.stderr.components(separatedBy: "skipped a stored record already received").count == 6,
            "\(second.stderr)")
        #expect(log.components(separatedBy: "dumping the memory: 5 reading(s)").count == 3, "\(log)")
        #expect(h.status == 0)
        #expect(h.stdoutLines.count == 5, "\(h.stdout)")
    }

    @Test func decodeYonker() throws {
        let r = try CLI.run(["decode", "--protocol", "yonker", "81 83 67 51 00 00 19 0B 18 13 12 00 00 00 00"])
        #expect(r.status == 0)
        let j = try CLI.json(try #require(r.stdoutLines.first))
        #expect(j["systolic"] as? Int == 131 && j["diastolic"] as? Int == 103 && j["pulse_rate"] as? Int == 81)
        #expect(j["timestamp"] as? String == "2024-11-25T19:18:00")
        let bad = try CLI.run(["decode", "--protocol", "yonker", "81 83 67 51 00 00 19 0B 18 13"])
        #expect(bad.status == 1)
        #expect((try CLI.json(bad.stdoutLines[0])["error"] as? [String: Any])?["code"] as? String == "truncated")
        // A quirk, a characteristic or an Omron model would be ignored by the frame's own layout: refused.
        for extra in [["--quirk", "veroval"], ["--characteristic", "2a36"], ["--model", "HEM-7361T"]] {
            let r = try CLI.run(
                ["decode", "--protocol", "yonker"] + extra + ["81 83 67 51 00 00 19 0B 18 13 12 00 00 00 00"])
            #expect(r.status == 64 && r.stderr.contains("it does not take"), "\(extra): \(r.stderr)")
        }
    }

    /// A whole Microlife response frame: one line per record (derdilla's vector records, an empty
    /// slot and an impossible date between them); every truncated prefix an error line, exit 1.
    @Test func decodeMicrolife() throws {
        var payload = [UInt8](repeating: 0, count: 38)
        payload +=
            [120, 80, 60, 24, 6, 15, 14, 30, 0, 0] + [UInt8](repeating: 0, count: 10) + [
                110, 70, 65, 24, 0, 15, 14, 30, 0, 0,
            ] + [130, 85, 70, 25, 1, 2, 3, 4, 0, 0]
        var frame: [UInt8] = [0x4D, 0x3A, 0x00, UInt8(payload.count + 1)] + payload
        frame.append(UInt8(truncatingIfNeeded: frame.reduce(0) { $0 + Int($1) }))
        let hex = frame.map { String(format: "%02x", $0) }.joined()
        let r = try CLI.run(["decode", "--protocol", "microlife", hex])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try r.stdoutLines.map(CLI.json)
        #expect(lines.map { $0["systolic"] as? Int } == [120, 130])
        #expect(lines.map { $0["timestamp"] as? String } == ["2024-06-15T14:30:00", "2025-01-02T03:04:00"])
        #expect(
            r.stderr.contains("payload offset 48 skipped: empty")
                && r.stderr.contains("payload offset 58 skipped: impossible_date"))
        #expect(lines.allSatisfy { ($0["warnings"] as? [Any])?.isEmpty == true }, "\(r.stdout)")
        // Values no measurement gives are flagged, as on the live path (probe A2: decode said nothing).
        var odd = [UInt8](repeating: 0, count: 38)
        odd += [80, 120, 70, 25, 6, 1, 8, 0, 0, 0] + [120, 120, 70, 25, 6, 1, 8, 0, 0, 0]
        var oddFrame: [UInt8] = [0x4D, 0x3A, 0x00, UInt8(odd.count + 1)] + odd
        oddFrame.append(UInt8(truncatingIfNeeded: oddFrame.reduce(0) { $0 + Int($1) }))
        let o = try CLI.run(["decode", "--protocol", "microlife", oddFrame.map { String(format: "%02x", $0) }.joined()])
        #expect(o.status == 0, "\(o.stderr)")
        let flagged = try o.stdoutLines.map(CLI.json).map {
            (($0["warnings"] as? [[String: Any]]) ?? []).map { $0["code"] as? String ?? "" }
        }
        #expect(flagged.count == 2 && flagged.allSatisfy { $0.contains("implausible_value") }, "\(o.stdout)")
        let prefixes = (1..<(hex.count / 2)).map { String(hex.prefix($0 * 2)) }
        let t = try CLI.run(["decode", "--protocol", "microlife"], stdin: prefixes.joined(separator: "\n") + "\n")
        #expect(t.status == 1)
        #expect(t.stdoutLines.count == prefixes.count)
        #expect(
            try t.stdoutLines.map(CLI.json).allSatisfy {
                ($0["error"] as? [String: Any])?["code"] as? String == "truncated"
            })
    }

    /// Probe E3: a whole frame with no whole record slot (the 38 bytes before the records, then
    /// nothing, or 5 bytes of a record) printed nothing and exited 0; a record cut short after
    /// whole ones was dropped without a word. Stdin's failures are named by their line, blank
    /// lines counted.
    @Test func aMicrolifeFrameWithoutAWholeRecordIsAnError() throws {
        func frame(_ payload: [UInt8]) -> String {
            var f: [UInt8] = [0x4D, 0x3A, 0x00, UInt8(payload.count + 1)] + payload
            f.append(UInt8(truncatingIfNeeded: f.reduce(0) { $0 + Int($1) }))
            return f.map { String(format: "%02x", $0) }.joined()
        }
        let header = [UInt8](repeating: 0, count: 38)
        let record: [UInt8] = [120, 80, 60, 24, 6, 15, 14, 30, 0, 0]
        for payload in [header, header + record.prefix(5)] {
            let r = try CLI.run(["decode", "--protocol", "microlife", frame(payload)])
            #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
            let e = try #require(try r.stdoutLines.map(CLI.json).first?["error"] as? [String: Any])
            #expect(e["code"] as? String == "truncated" && e["field"] as? String == "records", "\(e)")
            #expect(r.stderr.contains("input 1: microlife: "), "\(r.stderr)")
        }
        let cut = try CLI.run(["decode", "--protocol", "microlife", frame(header + record + record.prefix(6))])
        #expect(cut.status == 0 && cut.stdoutLines.count == 1, "\(cut.stderr)")
        #expect(cut.stderr.contains("payload offset 48 skipped: truncated"), "\(cut.stderr)")

        let lines = try CLI.run(["decode"], stdin: "\n\n00 78 00 50 00 5D 00\n\nzz\n")
        #expect(lines.status == 1 && lines.stdoutLines.count == 2)
        #expect(lines.stderr.contains("cuff decode: line 5: "), "\(lines.stderr)")
        let args = try CLI.run(["decode", "00 78 00 50 00 5D 00", "zz"])
        #expect(args.stderr.contains("cuff decode: input 2: "), "\(args.stderr)")
    }
}

/// Microlife and Yonker on the protocol seam: `cuff simulate --protocol NAME` in one process,
/// `cuff measure` in another, the protocol found by discovery (or forced).
@Suite("Vendor protocols over a Unix socket", .serialized)
struct VendorProtocolCLITests {
    typealias Simulator = TwoProcessTests.Simulator

    func measurements(_ r: CLIResult) throws -> [[String: Any]] {
        try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
    }

    @Test(arguments: [("microlife", 3, false), ("microlife", 3, true), ("yonker", 1, false), ("yonker", 1, true)])
    func session(name: String, readings: Int, forced: Bool) throws {
        let sim = try Simulator(["--protocol", name, "--speed", "100", "--seed", "3"])
        let r = try CLI.run(
            ["measure", "--connect", "unix:\(sim.path)", "--timeout", "60"] + (forced ? ["--protocol", name] : []))
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(r.status == 0, "\(r.stderr)")
        let ms = try measurements(r)
        #expect(ms.count == readings, "\(r.stdout)\n\(r.stderr)")
        #expect(
            ms.allSatisfy {
                $0["characteristic"] as? String == name && $0["systolic"] is Int
                    && $0["mean_arterial_pressure"] is NSNull
            })
        #expect(ms.allSatisfy { $0["stored"] as? Bool == (name == "microlife") })
        if !forced { #expect(r.stderr.contains("discovery shows a \(name) device"), "\(r.stderr)") }
        if name == "microlife" {
            #expect(log.contains("Microlife cuff: clock set to") && log.contains("Microlife cuff: goodbye"), "\(log)")
        }
    }

    /// `cuff replay` of a captured vendor session gives the records the live session printed,
    /// every key but the capture's clock and the device's address; one session, started and ended
    /// once. Also with `--protocol` (probe A2: such a capture gave no reading, though
    /// `replay --help` lists the vendor protocols).
    @Test(arguments: [("microlife", false), ("microlife", true), ("yonker", false), ("yonker", true)])
    func replayOfACaptureGivesTheLiveRecords(name: String, forced: Bool) throws {
        let sim = try Simulator(["--protocol", name, "--speed", "100", "--seed", "5"])
        let capture = sim.dir.appendingPathComponent("\(name).btsnoop").path
        let live = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--capture", capture, "--timeout", "60"])
        let replay = try CLI.run(["replay", capture] + (forced ? ["--protocol", name] : []))
        _ = sim.stop()
        #expect(live.status == 0, "\(live.stderr.suffix(300))")
        #expect(replay.status == 0, "\(replay.stderr.suffix(600))")
        func comparable(_ r: CLIResult) throws -> [String] {
            try measurements(r).map { m in
                var m = m
                m["received_at"] = nil
                var d = m["device"] as? [String: Any] ?? [:]
                d["address"] = nil
                m["device"] = d
                return String(
                    decoding: try JSONSerialization.data(withJSONObject: m, options: .sortedKeys), as: UTF8.self)
            }
        }
        let l = try comparable(live)
        #expect(l.count == (name == "microlife" ? 3 : 1))
        #expect(try comparable(replay) == l)
        let sessions = try replay.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "session" }
        #expect(sessions.map { $0["event"] as? String } == ["start", "end"], "\(replay.stdout)")
        #expect(sessions.last?["outcome"] as? String == "completed")
    }

    /// Probe Z: a vendor protocol forced on a device without its service exited 8 (protocol error)
    /// for Yonker, where the standard and Omron sessions say 7 (not that kind of cuff); Microlife too now.
    @Test(arguments: [("microlife", "yonker"), ("yonker", "microlife")])
    func aForcedProtocolWithoutItsServiceIsNotThatCuff(device: String, forced: String) throws {
        let sim = try Simulator(["--protocol", device, "--speed", "100", "--seed", "3"])
        let r = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--timeout", "30", "--protocol", forced])
        _ = sim.stop()
        #expect(r.status == 7, "\(r.stderr)")
        let name = forced == "yonker" ? "Yonker" : "Microlife"
        #expect(r.stderr.contains("\(name): no \(name) service on this device (no characteristic "), "\(r.stderr)")
    }

    /// A vendor protocol's simulated cuff plays none of the standard cuff's shaping: asked for,
    /// it is refused by name (exit 64), not served as another cuff under the option's name.
    @Test(arguments: ["microlife", "yonker"])
    func standardShapingIsRefused(name: String) throws {
        let quirk = try CLI.run(["simulate", "--listen", "unix:/tmp/x", "--protocol", name, "--quirk", "veroval"])
        #expect(quirk.status == 64, "\(quirk.stderr)")
        #expect(
            quirk.stderr.contains(
                "--quirk shapes the standard simulated cuff; the \(name) protocol's simulated cuff does not play it"),
            "\(quirk.stderr)")
        let two = try CLI.run([
            "simulate", "--listen", "unix:/tmp/x", "--protocol", name, "--scenario", "error", "--handle-gap", "4",
        ])
        #expect(two.status == 64 && two.stderr.contains("--scenario, --handle-gap shape the standard"), "\(two.stderr)")
        // What it does play (--seed, --speed) and the standard protocol's own shaping still go.
        let bps = try CLI.run([
            "simulate", "--listen", "unix:/tmp/x", "--protocol", "bps", "--quirk", "veroval", "--list",
        ])
        #expect(bps.status == 0, "\(bps.stderr)")
    }

    /// The Microlife download repeats the whole memory, a Yonker cuff its last result: the store
    /// keeps each reading once, and a session whose readings were all kept already is a result
    /// ("0 new", exit 0), as the standard session's is.
    @Test(arguments: [("microlife", 3), ("yonker", 1)])
    func downloadStoredOnce(name: String, readings: Int) throws {
        let sim = try Simulator(["--protocol", name, "--speed", "100", "--seed", "3"])
        let db = sim.dir.appendingPathComponent("bp.sqlite").path
        let first = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--store", db, "--timeout", "60"])
        let second = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--store", db, "--timeout", "60"])
        let h = try CLI.run(["history", "--store", db])
        _ = sim.stop()
        #expect(try measurements(first).count == readings, "\(first.stderr)")
        // The store gives back the records as they were printed.
        #expect(h.status == 0, "\(h.stderr)")
        let kept = try h.stdoutLines.map(CLI.json)
        #expect(kept.map { $0["raw"] as? String } == (try measurements(first)).map { $0["raw"] as? String })
        #expect(kept.map { $0["timestamp"] as? String } == (try measurements(first)).map { $0["timestamp"] as? String })
        #expect(try measurements(second).isEmpty, "\(second.stdout)")
        #expect(
            second.stderr.components(separatedBy: "skipped a stored record already received").count == readings + 1,
            "\(second.stderr)")
        #expect(
            second.stderr.contains("0 new measurements; \(readings) result\(readings == 1 ? "" : "s") already kept"),
            "\(second.stderr)")
        #expect(second.status == 0, "\(second.stderr)")
    }
}
