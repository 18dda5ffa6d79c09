import CuffTestSupport
import Foundation
import Testing

/// `cuff measure --connect` against one `cuff simulate` process, again and again: the second
/// session goes straight to its subscriptions and the clock on what the first learned.
@Suite("GATT cache: cuff measure twice", .serialized)
struct GATTCacheCLITests {
    static func end(_ r: CLIResult) throws -> [String: Any] {
        let ends = try r.stdoutLines.map(CLI.json).filter {
            $0["type"] as? String == "session" && $0["event"] as? String == "end"
        }
        return try #require(ends.last, "no session end record: \(r.stderr.suffix(400))")
    }

    static func reading(_ r: CLIResult) throws -> [String: Any] {
        try #require(try r.stdoutLines.map(CLI.json).first { $0["type"] as? String == "measurement" })
    }

    @Test func theSecondMeasureNeedsAtMostFourRequestsBeforeItsReading() throws {
        let sim = try TwoProcessTests.Simulator(["--speed", "200", "--autostart", "--seed", "4"])
        let state = sim.dir.appendingPathComponent("state").path
        let store = sim.dir.appendingPathComponent("readings.db").path
        let env = ["XDG_STATE_HOME": state]
        let measure = ["measure", "--connect", "unix:\(sim.path)", "--store", store, "--timeout", "60"]
        let first = try CLI.run(measure, environment: env)
        let second = try CLI.run(measure, environment: env)
        let off = try CLI.run(measure + ["--no-gatt-cache"], environment: env)
        let cacheFiles = (try? FileManager.default.contentsOfDirectory(atPath: state + "/cuff/gatt")) ?? []
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(first.status == 0 && second.status == 0 && off.status == 0, "\(second.stderr.suffix(400))")

        let a = try Self.end(first), b = try Self.end(second), c = try Self.end(off)
        #expect(a["gatt_cache"] as? String == "miss" && a["att_requests"] as? Int == 22)
        #expect(b["gatt_cache"] as? String == "hit", "\(second.stderr)")
        let before = try #require(b["att_requests_before_reading"] as? Int)
        #expect(before <= 4 && (b["att_requests"] as? Int ?? 99) <= 4)
        #expect(c["gatt_cache"] as? String == "off" && c["att_requests"] as? Int == 22)
        // What the cache held stands in for what the first session read.
        for key in ["name", "manufacturer", "model", "serial", "features"] {
            #expect("\(a[key] ?? "nil")" == "\(b[key] ?? "nil")", "\(key)")
        }
        #expect(cacheFiles.count == 1 && cacheFiles[0].hasSuffix(".gatt"), "\(cacheFiles)")
        // The reading came, complete, with the device the cache knows.
        let r = try Self.reading(second)
        #expect(r["systolic"] is Double && r["diastolic"] is Double)
        #expect((r["device"] as? [String: Any])?["serial"] as? String == "SIM-000001")
        #expect(second.stderr.contains("using the GATT cache"))
        // Probe U: it said "discovering services", then "no discovery".
        #expect(second.stderr.contains("; checking the GATT cache\n"), "\(second.stderr)")
        #expect(!second.stderr.contains("discovering services"), "\(second.stderr)")
        #expect(first.stderr.contains("; discovering services\n") && off.stderr.contains("; discovering services\n"))
    }

    /// A BPS 1.1 cuff sends its measurement live (0x2A35, no sequence number), then, at the next
    /// connection, the same one as a record of its memory (0x2B36, sequence number 0): that record
    /// is one already kept, neither stored nor printed again (was: stored and printed twice).
    @Test func aBPS11RecordOfAReadingReceivedLiveIsNotKeptTwice() throws {
        let sim = try TwoProcessTests.Simulator([
            "--persona", "bps-1.1", "--speed", "200", "--autostart", "--seed", "4",
        ])
        let store = sim.dir.appendingPathComponent("readings.db").path
        let env = ["XDG_STATE_HOME": sim.dir.appendingPathComponent("state").path]
        let measure = ["measure", "--connect", "unix:\(sim.path)", "--store", store, "--timeout", "60", "--quiet"]
        let first = try CLI.run(measure, environment: env)
        let second = try CLI.run(measure, environment: env)
        let history = try CLI.run(["history", "--store", store])
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(first.status == 0 && second.status == 0, "\(second.stderr.suffix(400))")
        func measurements(_ r: CLIResult) throws -> [[String: Any]] {
            try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
        }
        let live = try measurements(first), next = try measurements(second)
        #expect(live.count == 1 && live[0]["characteristic"] as? String == "2A35")
        // The second session: its own live reading only, not the record of the first one.
        #expect(next.count == 1 && next.allSatisfy { $0["stored"] as? Bool == false }, "\(second.stdout)")
        #expect(history.status == 0, "\(history.stderr)")
        #expect(history.stdoutLines.count == 2, "\(history.stdout)")
    }

    /// A session that got nothing and found no service it could speak (a peer that was no cuff of
    /// that protocol) once kept the database it discovered; the honest cuff served next at the same
    /// path then used it, found no Blood Pressure Service there, and ended `service_missing` every
    /// time (and `cuff watch` forever) until the file was deleted. Such a session keeps nothing.
    @Test func aSessionThatFoundNoServiceKeepsNothing() throws {
        let s = try ScratchDirectory()
        let env = ["XDG_STATE_HOME": s.path("state")]
        let socket = s.path("c.sock")
        let measure = ["measure", "--connect", "unix:" + socket, "--timeout", "60"]
        let omron = try ChildProcess(
            ["simulate", "--listen", "unix:" + socket, "--model", "HEM-7361T", "--speed", "200"],
            stderr: s.path("o.err"))
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: socket) })
        let wrong = try CLI.run(measure + ["--protocol", "bps"], environment: env)
        omron.signal(SIGINT)
        #expect(omron.wait(timeout: 10) != nil)
        #expect(wrong.status == 7, "\(wrong.stderr.suffix(400))")
        #expect(try Self.end(wrong)["outcome"] as? String == "service_missing")
        let kept = (try? FileManager.default.contentsOfDirectory(atPath: s.path("state") + "/cuff/gatt")) ?? []
        #expect(kept.isEmpty, "\(kept)")
        let honest = try ChildProcess(
            ["simulate", "--listen", "unix:" + socket, "--speed", "200", "--autostart"], stderr: s.path("h.err"))
        defer {
            honest.signal(SIGINT)
            _ = honest.wait(timeout: 10)
        }
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: socket) })
        let first = try CLI.run(measure, environment: env)
        #expect(first.status == 0, "\(first.stderr.suffix(400))")
        #expect(try Self.end(first)["gatt_cache"] as? String == "miss")
        let again = try CLI.run(measure, environment: env)
        #expect(again.status == 0, "\(again.stderr.suffix(400))")
        #expect(try Self.end(again)["gatt_cache"] as? String == "hit")
    }

    @Test func watchKeepsWhatItLearnedAcrossSessionsAndRestarts() throws {
        let s = try ScratchDirectory()
        let env = ["XDG_STATE_HOME": s.path("state")]
        let cuff = try ChildProcess(
            ["simulate", "--listen", "unix:" + s.path("c.sock"), "--every", "60", "--speed", "120"],
            stderr: s.path("sim.err"))
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: s.path("c.sock")) })
        func ends(_ name: String) -> [[String: Any]] {
            s.lines(name).compactMap { try? CLI.json($0) }.filter {
                $0["type"] as? String == "session" && $0["event"] as? String == "end"
            }
        }
        for (round, extra) in [[], [], ["--no-gatt-cache"]].enumerated() {
            let w = try ChildProcess(
                ["watch", "--connect", "unix:" + s.path("c.sock")] + extra, stdout: s.path("out\(round)"),
                stderr: s.path("watch\(round).err"), environment: env)
            #expect(waitUntil(30) { ends("out\(round)").count >= 3 }, "\(s.text("watch\(round).err").suffix(800))")
            w.signal(SIGTERM)
            #expect(w.wait(timeout: 20) == 0)
        }
        cuff.signal(SIGTERM)
        _ = cuff.wait(timeout: 10)
        let first = ends("out0"), restarted = ends("out1"), off = ends("out2")
        // The first session discovers; the ones after it, in this watch and in the next, use what it learned.
        #expect(first.first?["gatt_cache"] as? String == "miss")
        let hits = (first.dropFirst() + restarted).filter { $0["outcome"] as? String == "completed" }
        #expect(
            !hits.isEmpty
                && hits.allSatisfy { $0["gatt_cache"] as? String == "hit" && ($0["att_requests"] as? Int ?? 99) <= 4 },
            "\(hits.map { "\($0["gatt_cache"] ?? "-") \($0["att_requests"] ?? "-")" })")
        #expect(hits.allSatisfy { $0["serial"] as? String == "SIM-000001" })
        let full = try #require(first.first?["att_requests"] as? Int)
        #expect(
            !off.isEmpty
                && off.allSatisfy { $0["gatt_cache"] as? String == "off" && $0["att_requests"] as? Int == full })
    }

    @Test func aCuffWhoseHandlesMovedIsDiscoveredAgainWithoutLosingItsReading() throws {
        let s = try ScratchDirectory()
        let env = ["XDG_STATE_HOME": s.path("state")]
        let socket = s.path("c.sock")
        func simulate(_ extra: [String]) throws -> ChildProcess {
            try? FileManager.default.removeItem(atPath: socket)
            let p = try ChildProcess(
                ["simulate", "--listen", "unix:" + socket, "--speed", "200", "--autostart", "--seed", "4"] + extra,
                stderr: s.path("sim.err"))
            #expect(waitUntil(10) { FileManager.default.fileExists(atPath: socket) })
            return p
        }
        let measure = ["measure", "--connect", "unix:" + socket, "--timeout", "60"]
        var results: [CLIResult] = []
        // The same cuff (same socket) before and after a firmware update that moved its handles.
        for extra in [[], ["--handle-gap", "128"], ["--handle-gap", "128"]] {
            let sim = try simulate(extra)
            results.append(try CLI.run(measure, environment: env))
            sim.signal(SIGINT)
            #expect(sim.wait(timeout: 10) == 0)
        }
        let ends = try results.map(Self.end)
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map { $0.stderr.suffix(300) })")
        #expect(ends.map { $0["gatt_cache"] as? String } == ["miss", "stale", "hit"])
        #expect(results[1].stderr.contains("Invalid Handle"))
        #expect(try results.map { try Self.reading($0)["systolic"] as? Double }.allSatisfy { $0 != nil })
        #expect((ends[2]["att_requests"] as? Int ?? 99) <= 4)
    }
}
