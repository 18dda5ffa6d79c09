import CuffTestSupport
import Foundation
import Testing

/// `cuff simulate --listen unix:PATH` in one process, `cuff measure --connect unix:PATH` in another.
@Suite("Two processes over a Unix socket", .serialized)
struct TwoProcessTests {
    final class Simulator {
        var process: ChildProcess!
        let path: String
        let log: URL
        let dir: URL

        init(_ args: [String]) throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent(
                "cuff-2p-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            path = dir.appendingPathComponent("cuff.sock").path
            log = dir.appendingPathComponent("sim.log")
            FileManager.default.createFile(atPath: log.path, contents: nil)
            process = try ChildProcess(["simulate", "--listen", "unix:\(path)"] + args, stderr: log.path)
            let deadline = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: path) && Date() < deadline { usleep(10_000) }
        }

        var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

        func stop() -> Int32 {
            process.signal(SIGINT)
            var status = process.wait(timeout: 10)
            if status == nil {
                process.signal(SIGKILL)
                status = process.wait(timeout: 10)
            }
            try? FileManager.default.removeItem(at: dir)
            return status ?? -1
        }
    }

    func measurements(_ r: CLIResult) throws -> [[String: Any]] {
        try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
    }

    @Test(arguments: MeasureCommandTests.scenarios, ["bps-1.0", "bps-1.1"])
    func scenario(name: String, persona: String) throws {
        let sim = try Simulator([
            "--scenario", name, "--persona", persona, "--speed", "100", "--autostart", "--seed", "3",
        ])
        let r = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--timeout", "60"])
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        let ms = try measurements(r)
        switch name {
        case "disconnect":
            #expect(r.status == 4)
            #expect(ms.isEmpty)
        case "stored-records", "slow-confirm", "multi-user":
            #expect(r.status == 0)
            #expect(
                ms.filter { $0["stored"] as? Bool == true }.count
                    == ["stored-records": 3, "slow-confirm": 5, "multi-user": 1][name])
            #expect(ms.filter { $0["stored"] as? Bool == false }.count == 1)
        case "error":
            #expect(r.status == 0)
            #expect(ms.count == 1 && ms[0]["systolic"] as? String == "NaN")
        case "kpa":
            #expect(r.status == 0)
            #expect(ms.count == 1 && ms[0]["unit"] as? String == "kPa")
        default:
            #expect(r.status == 0, "\(r.stderr.suffix(300))")
            #expect(ms.count == 1)
        }
        #expect(log.contains("session 1: client connected"))
        #expect(r.stdoutLines.filter { $0.contains("\"type\":\"progress\"") }.count > 20)
    }

    @Test func serveOneClientAfterAnother() throws {
        let sim = try Simulator(["--speed", "200", "--autostart"])
        let a = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--quiet"])
        let b = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--quiet"])
        let log = sim.logText
        _ = sim.stop()
        #expect(a.status == 0 && b.status == 0)
        #expect(log.contains("session 2: client connected"))
    }

    /// The second client of one `cuff simulate` gets no stored reading the first confirmed (a Unix
    /// socket has no client address: all its clients are one bonded client).
    @Test func confirmedStoredReadingsGoToTheFirstClientOnly() throws {
        let sim = try Simulator(["--scenario", "stored-records", "--speed", "200", "--autostart", "--seed", "3"])
        let a = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--quiet"])
        let b = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--quiet"])
        let log = sim.logText
        _ = sim.stop()
        #expect(a.status == 0 && b.status == 0)
        let ma = try measurements(a), mb = try measurements(b)
        #expect(ma.filter { $0["stored"] as? Bool == true }.count == 3)
        #expect(ma.filter { $0["stored"] as? Bool == false }.count == 1)
        #expect(mb.filter { $0["stored"] as? Bool == true }.isEmpty, "\(b.stdout)")
        #expect(mb.filter { $0["stored"] as? Bool == false }.count == 1)
        #expect(log.contains("session 2: client connected"))
        #expect(log.components(separatedBy: "stored reading(s), oldest first").count == 2, "\(log)")
    }

    /// Stored records sent in 8-byte segments: `cuff measure` reassembles them, and so does
    /// `cuff replay` of the capture it recorded, to the same lines.
    @Test func segmentedRecordsLiveAndReplayed() throws {
        let sim = try Simulator([
            "--scenario", "stored-records", "--persona", "bps-1.1", "--record-segment", "8", "--speed", "200",
            "--autostart", "--seed", "3",
        ])
        let capture = sim.dir.appendingPathComponent("seg.btsnoop").path
        let live = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--quiet", "--capture", capture])
        let replay = try CLI.run(["replay", capture, "--quiet"])
        _ = sim.stop()
        #expect(live.status == 0, "\(live.stderr)")
        let stored = try measurements(live).filter { $0["stored"] as? Bool == true }
        #expect(stored.map { $0["sequence_number"] as? Int } == [0, 1, 2])
        #expect(!live.stderr.contains("warning"))
        let replayed = try measurements(replay).filter { $0["stored"] as? Bool == true }
        #expect(replayed.map { $0["sequence_number"] as? Int } == [0, 1, 2])
        #expect(replayed.map { $0["raw"] as? String } == stored.map { $0["raw"] as? String })
    }

    @Test func ctrlCStopsTheCuffAndKeepsWhatArrived() throws {
        let sim = try Simulator(["--speed", "5"])
        let out = sim.dir.appendingPathComponent("measure.out")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        let p = try ChildProcess(["measure", "--connect", "unix:\(sim.path)", "--start"], stdout: out.path)
        // Wait until the cuff is inflating, then press Ctrl-C.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline,
            !((try? String(contentsOf: out, encoding: .utf8)) ?? "").contains("\"type\":\"progress\"")
        { usleep(20_000) }
        p.signal(SIGINT)
        let status = p.wait(timeout: 20)
        let log = sim.logText
        let text = try String(contentsOf: out, encoding: .utf8)
        _ = sim.stop()
        #expect(status == 3)
        #expect(text.contains("\"outcome\":\"stopped\""))
        #expect(log.contains("stop command"))
    }

    @Test func killMinus9KeepsEveryConfirmedMeasurementInTheStore() throws {
        let sim = try Simulator(["--scenario", "slow-confirm", "--speed", "100", "--autostart"])
        let db = sim.dir.appendingPathComponent("bp.sqlite").path
        let out = sim.dir.appendingPathComponent("measure.out")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        let p = try ChildProcess(
            ["measure", "--connect", "unix:\(sim.path)", "--store", db, "--follow", "--quiet"], stdout: out.path)
        // Kill as soon as some stored records were printed (printed after the store committed them).
        let deadline = Date().addingTimeInterval(20)
        var printed = 0
        while Date() < deadline {
            printed =
                ((try? String(contentsOf: out, encoding: .utf8)) ?? "").components(
                    separatedBy: "\"type\":\"measurement\""
                ).count - 1
            if printed >= 2 { break }
            usleep(2_000)
        }
        p.signal(SIGKILL)
        _ = p.wait(timeout: 10)
        _ = sim.logText
        let h = try CLI.run(["history", "--store", db])
        _ = sim.stop()
        #expect(printed >= 2)
        #expect(h.status == 0)
        #expect(h.stdoutLines.count >= printed)
    }

    /// A session with a mark that finds nothing after it asks for the cuff's last record, only to
    /// learn its number, and does not print it. Its capture replayed does not print it either:
    /// the replay reads the mark from the request it sees (the very records the live session gave).
    @Test func theLastRecordAskedOnlyForItsNumberIsPrintedNeitherLiveNorReplayed() throws {
        let sim = try Simulator([
            "--scenario", "stored-records", "--persona", "bps-1.1", "--speed", "100", "--seed", "1",
        ])
        let db = sim.dir.appendingPathComponent("bp.sqlite").path
        let capture = sim.dir.appendingPathComponent("second.btsnoop").path
        let first = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--store", db, "--timeout", "3"])
        let second = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--store", db, "--timeout", "3", "--capture", capture,
            "--no-gatt-cache",  // (the capture then holds the discovery the replay maps handles with)
        ])
        let replay = try CLI.run(["replay", capture])
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(try measurements(first).count == 3, "\(first.stdout)\n\(first.stderr)")
        #expect(second.stderr.contains("stored records: no_records_found"), "\(second.stderr)")
        #expect(second.stderr.components(separatedBy: "asked the cuff for its stored records").count == 3)
        #expect(try measurements(second).isEmpty, "\(second.stdout)")
        #expect(replay.stderr.contains("asked the cuff for its stored records"), "\(replay.stderr)")
        #expect(!replay.stderr.contains("unknown"), "\(replay.stderr)")
        #expect(try measurements(replay).isEmpty, "\(replay.stdout)\n\(replay.stderr)")
    }
}
