import CuffTestSupport
import Foundation
import Testing

/// `cuff watch` against simulated cuffs in other processes, over real Unix sockets.
@Suite("cuff watch", .serialized)
struct WatchCommandTests {
    /// The stored readings (`cuff history`), as (serial, dedup-relevant fields) rows.
    static func history(_ store: String) throws -> [[String: Any]] {
        let r = try CLI.run(["history", "--store", store])
        #expect(r.status == 0, "\(r.stderr)")
        return try r.stdoutLines.map(CLI.json)
    }

    static func key(_ m: [String: Any]) -> String {
        let d = m["device"] as? [String: Any] ?? [:]
        return
            "\(d["serial"] ?? "-")|\(m["timestamp"] ?? "-")|\(m["systolic"] ?? "-")|\(m["diastolic"] ?? "-")|\(m["pulse_rate"] ?? "-")|\(m["sequence_number"] ?? "-")"
    }

    static func measurementLines(_ lines: [String]) throws -> [[String: Any]] {
        try lines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
    }

    /// The serial of each measurement watch printed so far (to its `out`), in order.
    static func printedSerials(_ s: ScratchDirectory) -> [String] {
        (try? measurementLines(s.lines("out")))?.compactMap {
            ($0["device"] as? [String: Any])?["serial"] as? String
        } ?? []
    }

    /// "N measurements taken, M readings confirmed by clients" from a simulator's last line.
    static func simulatorTotals(_ stderr: String) -> (taken: Int, confirmed: Int)? {
        guard
            let line = stderr.split(separator: "\n").last(where: {
                $0.contains(" taken, ") && $0.contains("confirmed by clients")
            })
        else {
            return nil
        }
        let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        guard numbers.count >= 2 else { return nil }
        return (numbers[numbers.count - 2], numbers[numbers.count - 1])
    }

    /// Probe S: `--connect unix:DIR` given before the fleet made DIR took DIR for a socket for
    /// good; the fleet's cuffs were never followed. Once DIR is a directory, its sockets are.
    @Test func aDirectoryMadeAfterWatchStartedIsFollowed() throws {
        let s = try ScratchDirectory()
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--store", s.path("w.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        #expect(waitUntil(10) { s.text("watch.err").contains("watching 1 socket(s) and 0 directories") })
        let fleet = try SimulatedFleet.start(in: s, cuffs: 2)
        #expect(
            waitUntil(60) {
                let serials = Self.printedSerials(s)
                return Set(serials).count == 2
            }, "\(s.text("watch.err").suffix(2000))")
        fleet.signal(SIGTERM)
        #expect(fleet.wait(timeout: 20) == 0)
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 20) == 0, "\(s.text("watch.err").suffix(2000))")
        #expect(s.text("watch.err").contains("is a directory now; following the sockets in it"))
    }

    @Test func fleetEveryReadingStoredOncePrintedOnceAndSIGTERMExitsZero() throws {
        let s = try ScratchDirectory()
        let fleet = try SimulatedFleet.start(in: s, cuffs: 6)
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--store", s.path("w.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        // Every cuff delivers at least two readings.
        #expect(
            waitUntil(60) {
                let serials = Self.printedSerials(s)
                return Set(serials).count == 6 && serials.count >= 12
            }, "watch did not collect from all 6 cuffs: \(s.text("watch.err").suffix(2000))")
        // Stop the fleet first: what it counts as confirmed is final then.
        fleet.signal(SIGTERM)
        #expect(fleet.wait(timeout: 20) == 0)
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 20) == 0, "\(s.text("watch.err").suffix(2000))")

        let printed = try Self.measurementLines(s.lines("out"))
        let stored = try Self.history(s.path("w.db"))
        let printedKeys = printed.map(Self.key), storedKeys = stored.map(Self.key)
        #expect(Set(printedKeys).count == printedKeys.count, "a reading was printed twice")
        #expect(Set(storedKeys).count == storedKeys.count, "a reading was stored twice")
        #expect(Set(printedKeys) == Set(storedKeys), "stdout and the store disagree")
        let totals = try #require(Self.simulatorTotals(s.text("sim.err")), "\(s.text("sim.err"))")
        // Nothing confirmed is lost; nothing is invented.
        #expect(
            stored.count >= totals.confirmed, "\(stored.count) stored, \(totals.confirmed) confirmed by the watcher")
        #expect(stored.count <= totals.taken)
        // stderr carries events, not readings.
        let err = s.text("watch.err")
        #expect(err.contains("following unix:"))
        #expect(!err.contains("mmHg") && !err.contains("systolic"))
    }

    /// Probe Y: with a store, watch went on collecting after stdout's reader went away, but with
    /// stderr muted for good (no session ends, no "stopping", no summary) and exit 141. It says so
    /// once, keeps its stderr, stores every reading, and ends with 10 (a sink failed).
    @Test func withAStoreAReaderOfStdoutGoingAwayIsSaidAndCollectingGoesOn() throws {
        let s = try ScratchDirectory()
        let fleet = try SimulatedFleet.start(in: s, cuffs: 2)
        defer {
            fleet.signal(SIGTERM)
            _ = fleet.wait(timeout: 20)
        }
        // (The pipe's reader takes one line and leaves; the shell keeps watch's status.)
        let script =
            "( '\(CLI.binary.path)' watch --connect 'unix:\(s.path("cuffs"))' --store '\(s.path("w.db"))' 2> '\(s.path("watch.err"))'; echo $? > '\(s.path("rc"))' ) | head -n 1 > '\(s.path("first"))'"
        let sh = try ChildProcess(["-c", script], executable: "/bin/sh", stderr: s.path("sh.err"))
        #expect(
            waitUntil(60) { s.text("watch.err").contains("stdout's reader went away") },
            "\(s.text("watch.err").suffix(2000))")
        // Readings keep coming into the store after that.
        let before = try Self.history(s.path("w.db")).count
        #expect(waitUntil(60) { ((try? Self.history(s.path("w.db")).count) ?? 0) >= before + 2 })
        // SIGTERM to watch itself (the shell's child).
        let pids = try runToCompletion("/usr/bin/pgrep", ["-f", "watch --connect unix:\(s.path("cuffs"))"]).stdout
        for p in pids.split(separator: "\n") { if let pid = Int32(p) { kill(pid, SIGTERM) } }
        #expect(sh.wait(timeout: 30) == 0)
        #expect(s.text("rc") == "10\n", "\(s.text("watch.err").suffix(2000))")
        let err = s.text("watch.err")
        #expect(err.contains("stopping (SIGTERM)") && err.contains("stopped: "), "\(err.suffix(2000))")
        #expect(s.lines("first").count == 1)
    }

    @Test func simulatorRestartsAndSingleCuffKillsDoNotStopTheWatcher() throws {
        let s = try ScratchDirectory()
        try FileManager.default.createDirectory(atPath: s.path("cuffs"), withIntermediateDirectories: true)
        // Two single cuffs in the directory, each its own process; one will be killed.
        func cuff(_ name: String, seed: Int) throws -> ChildProcess {
            try ChildProcess(
                [
                    "simulate", "--listen", "unix:" + s.path("cuffs/\(name).sock"), "--every", "60", "--speed", "60",
                    "--seed", "\(seed)",
                ],
                stderr: s.path("\(name).err"))
        }
        let a = try cuff("a", seed: 11)
        var b = try cuff("b", seed: 22)
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--store", s.path("w.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        func count(_ address: String) -> Int {
            ((try? Self.measurementLines(s.lines("out"))) ?? []).filter {
                (($0["device"] as? [String: Any])?["address"] as? String)?.hasSuffix(address) == true
            }.count
        }
        #expect(waitUntil(30) { count("a.sock") >= 2 && count("b.sock") >= 2 }, "\(s.text("watch.err").suffix(1500))")
        // Kill b outright (no goodbye), and restart it with the same seed: watch reconnects.
        b.signal(SIGKILL)
        _ = b.wait(timeout: 10)
        let aBefore = count("a.sock"), bBefore = count("b.sock")
        #expect(waitUntil(20) { count("a.sock") >= aBefore + 3 }, "cuff a stalled while b was gone")
        b = try cuff("b", seed: 22)
        #expect(
            waitUntil(40) { count("b.sock") >= bBefore + 2 },
            "watch did not come back to the restarted cuff: \(s.text("watch.err").suffix(1500))")
        #expect(s.text("watch.err").contains("retrying in"))
        a.signal(SIGTERM)
        b.signal(SIGTERM)
        _ = a.wait(timeout: 10)
        _ = b.wait(timeout: 10)
        watch.signal(SIGINT)
        #expect(watch.wait(timeout: 20) == 0)
        let stored = try Self.history(s.path("w.db")).map(Self.key)
        #expect(Set(stored).count == stored.count, "a reading was stored twice")
        let printed = try Self.measurementLines(s.lines("out")).map(Self.key)
        #expect(Set(printed) == Set(stored))
    }

    @Test func storedReadingsOfABps11CuffComeOnceAcrossWatcherRestarts() throws {
        let s = try ScratchDirectory()
        // A cuff that measures while nobody listens: its readings wait in its memory.
        let cuff = try ChildProcess(
            [
                "simulate", "--listen", "unix:" + s.path("c.sock"), "--every", "60", "--speed", "120", "--persona",
                "bps-1.1",
            ],
            stderr: s.path("sim.err"))
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: s.path("c.sock")) })
        usleep(2_500_000)  // about five readings taken with nobody connected
        for round in 0..<3 {
            let w = try ChildProcess(
                ["watch", "--connect", "unix:" + s.path("c.sock"), "--store", s.path("w.db")],
                stdout: s.path("out\(round)"), stderr: s.path("watch\(round).err"))
            #expect(waitUntil(20) { ((try? Self.measurementLines(s.lines("out\(round)"))) ?? []).count >= 2 })
            // SIGTERM in the middle of whatever the session is doing.
            usleep(UInt32(300_000 * (round + 1)))
            w.signal(SIGTERM)
            #expect(w.wait(timeout: 20) == 0, "\(s.text("watch\(round).err"))")
        }
        cuff.signal(SIGTERM)
        #expect(cuff.wait(timeout: 10) == 0)
        let stored = try Self.history(s.path("w.db"))
        let keys = stored.map(Self.key)
        #expect(Set(keys).count == keys.count, "a reading was stored twice")
        // Stored records carry sequence numbers: each once, none confirmed and lost.
        let totals = try #require(Self.simulatorTotals(s.text("sim.err")))
        #expect(stored.count >= totals.confirmed)
        #expect(
            stored.contains { $0["stored"] as? Bool == true },
            "the readings taken while nobody listened did not arrive as stored")
    }

    @Test func sighupReopensStdoutAfterARotation() throws {
        let s = try ScratchDirectory()
        let cuff = try ChildProcess(
            ["simulate", "--listen", "unix:" + s.path("c.sock"), "--every", "60", "--speed", "60"],
            stderr: s.path("sim.err"))
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: s.path("c.sock")) })
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("c.sock")], stdout: s.path("out"), stderr: s.path("err"))
        #expect(waitUntil(20) { ((try? Self.measurementLines(s.lines("out"))) ?? []).count >= 1 })
        // logrotate: move the file away, then SIGHUP.
        try FileManager.default.moveItem(atPath: s.path("out"), toPath: s.path("out.1"))
        watch.signal(SIGHUP)
        #expect(
            waitUntil(20) { ((try? Self.measurementLines(s.lines("out"))) ?? []).count >= 1 },
            "nothing written to the reopened file: \(s.text("err"))")
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 20) == 0)
        cuff.signal(SIGTERM)
        _ = cuff.wait(timeout: 10)
        let before = try Self.measurementLines(s.lines("out.1")).map(Self.key),
            after = try Self.measurementLines(s.lines("out")).map(Self.key)
        #expect(!before.isEmpty && !after.isEmpty)
        #expect(Set(before).isDisjoint(with: after), "a reading went to both files")
        let mode = try FileManager.default.attributesOfItem(atPath: s.path("out"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(s.text("err").contains("SIGHUP"))
    }

    @Test func badTargetsAreClearErrors() throws {
        let r = try CLI.run(["watch"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--connect"))
        let r2 = try CLI.run(["watch", "--connect", "tcp:1.2.3.4"])
        #expect(r2.status == 64)
        #expect(r2.stderr.contains("unix:PATH"))
    }

    @Test func absentSocketIsRetriedWithBackoffUntilSIGTERM() throws {
        let s = try ScratchDirectory()
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("nobody.sock")], stdout: s.path("out"), stderr: s.path("err"))
        #expect(waitUntil(5) { s.text("err").contains("retrying in") })
        // Then the cuff appears: watch connects on its next try.
        let cuff = try ChildProcess(
            ["simulate", "--listen", "unix:" + s.path("nobody.sock"), "--every", "60", "--speed", "60"],
            stderr: s.path("sim.err"))
        #expect(waitUntil(30) { ((try? Self.measurementLines(s.lines("out"))) ?? []).count >= 1 }, "\(s.text("err"))")
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 20) == 0)
        cuff.signal(SIGTERM)
        _ = cuff.wait(timeout: 10)
    }
}
