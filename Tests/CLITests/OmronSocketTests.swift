import CuffTestSupport
import Foundation
import Testing

/// `cuff simulate --model NAME --listen unix:PATH` in one process, `cuff measure --connect unix:PATH`
/// in another: the Omron protocol chosen from what the socket's cuff offers.
@Suite("Omron cuffs over a Unix socket", .serialized)
struct OmronSocketTests {
    func measurements(_ r: CLIResult) throws -> [[String: Any]] {
        try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
    }

    func end(_ r: CLIResult) throws -> [String: Any]? {
        try r.stdoutLines.map(CLI.json).last { $0["type"] as? String == "session" && $0["event"] as? String == "end" }
    }

    /// One classic and one modern profile: keep-unread twice gives the same readings, a marking
    /// sync the same again, then nothing new (exit 2); --all-records every stored one.
    @Test(arguments: ["HEM-7361T", "HEM-7600T", "HEM-7142T2", "HEM-7380T1"])
    func syncsLikeTheVendorApp(model: String) throws {
        // Real-time pace (--speed 1): the simulated cuff's clock then runs as ours, 97 s slow.
        let sim = try TwoProcessTests.Simulator(["--model", model, "--speed", "1", "--seed", "5"])
        let keep = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--model", model, "--keep-unread", "--timeout", "60",
        ])
        let keep2 = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--model", model, "--keep-unread", "--timeout", "60",
        ])
        let mark = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--model", model, "--timeout", "60"])
        let none = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--model", model, "--timeout", "60"])
        let all = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--model", model, "--all-records", "--no-set-time", "--timeout",
            "60",
        ])
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(keep.status == 0, "\(keep.stderr.suffix(400))")
        let k = try measurements(keep)
        #expect(!k.isEmpty)
        #expect(
            k.allSatisfy {
                $0["characteristic"] as? String == "omron"
                    && ($0["device"] as? [String: Any])?["model"] as? String == model
            })
        #expect(try measurements(keep2).map { $0["raw"] as! String } == k.map { $0["raw"] as! String })
        #expect(try measurements(mark).map { $0["raw"] as! String } == k.map { $0["raw"] as! String })
        #expect(none.status == 2)
        #expect(try measurements(none).isEmpty)
        #expect(try measurements(all).count >= k.count)
        let drift = try #require(try end(keep)?["clock_drift_s"] as? Int)
        #expect((-99 ... -95).contains(drift))
        // Set by the first session: in step since.
        let later = try #require(try end(all)?["clock_drift_s"] as? Int)
        #expect(abs(later) <= 2)
    }

    /// A store keeps a sync's readings and gives them back to `cuff history` as they were printed
    /// (the store keeps no slot number: `omron.slot` is null there). No --model: Device Information
    /// names the model; one classic and one modern profile, three layouts (be14, le14, heartguide24).
    @Test(arguments: ["HEM-7600T", "HEM-7380T1", "HEM-9601T"])
    func historyGivesBackTheStoredReadings(model: String) throws {
        let sim = try TwoProcessTests.Simulator(["--model", model, "--speed", "100", "--seed", "4"])
        let db = sim.dir.appendingPathComponent("bp.sqlite").path
        let live = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--all-records", "--no-set-time", "--store", db, "--timeout",
            "60",
        ])
        let h = try CLI.run(["history", "--store", db])
        _ = sim.stop()
        #expect(live.status == 0, "\(live.stderr.suffix(400))")
        #expect(h.status == 0, "\(h.stderr.suffix(400))")
        func withoutSlot(_ m: [String: Any]) -> NSDictionary {
            var m = m
            var o = m["omron"] as? [String: Any] ?? [:]
            o["slot"] = nil
            m["omron"] = o
            return m as NSDictionary
        }
        let printed = try measurements(live)
        let kept = try h.stdoutLines.map(CLI.json)
        #expect(printed.count > 1)
        #expect(
            Set(printed.compactMap { $0["user_id"] as? Int }).count
                == (model == "HEM-7600T" || model == "HEM-9601T" ? 1 : 2))
        #expect(kept.count == printed.count)
        #expect(kept.allSatisfy { ($0["omron"] as? [String: Any])?["slot"] is NSNull })
        #expect(kept.map(withoutSlot) == printed.map(withoutSlot), "\(h.stdout.prefix(600))")
    }

    /// Probe B3: `refused-key` on a model that pairs by token or by the bond alone was taken and
    /// played as `normal` (exit 0, readings). It is refused as a usage error, by `simulate` and
    /// by `measure --simulated`; a key-pairing model still plays it.
    @Test(arguments: [("HEM-7142T2", "a token"), ("HEM-7377T1-OB", "the bond alone")])
    func refusedKeyIsOnlyForModelsThatPairWithAKey(model: String, how: String) throws {
        let sim = try CLI.run(["simulate", "--model", model, "--scenario", "refused-key", "--listen", "unix:/tmp/x"])
        let measure = try CLI.run(["measure", "--simulated", "refused-key", "--model", model, "--timeout", "5"])
        for r in [sim, measure] {
            #expect(r.status == 64, "\(r.stderr)")
            #expect(r.stderr.contains("'refused-key' needs a cuff that pairs with a key"), "\(r.stderr)")
            #expect(r.stderr.contains("pairs by \(how)"), "\(r.stderr)")
        }
        let key = try CLI.run(["measure", "--simulated", "refused-key", "--model", "HEM-7322T", "--timeout", "30"])
        #expect(key.status == 12, "\(key.stderr.suffix(300))")
    }

    /// A refused key (exit 12), then, the refusal latched, pairing in pairing mode (exit 14); a
    /// factory-fresh cuff refuses any key (12) and takes none outside pairing mode (13).
    @Test func pairingFailuresHaveTheirOwnOutcomeAndExit() throws {
        let sim = try TwoProcessTests.Simulator(["--model", "HEM-7322T", "--scenario", "refused-key", "--speed", "1"])
        let refused = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--model", "HEM-7322T", "--timeout", "60",
        ])
        sim.process.signal(SIGUSR1)
        usleep(300_000)
        let latched = try CLI.run(["pair", "--connect", "unix:\(sim.path)", "--model", "HEM-7322T"])
        #expect(sim.stop() == 0)
        #expect(refused.status == 12, "\(refused.stderr.suffix(300))")
        #expect(try end(refused)?["outcome"] as? String == "key_refused")
        #expect((try end(refused)?["message"] as? String)?.contains("refused the key") == true)
        #expect(latched.status == 14, "\(latched.stderr.suffix(300))")
        #expect(latched.stderr.contains("latched a refused key") && latched.stderr.contains("batteries"))

        let fresh = try TwoProcessTests.Simulator(["--model", "HEM-7361T", "--unpaired", "--speed", "1"])
        let never = try CLI.run([
            "measure", "--connect", "unix:\(fresh.path)", "--model", "HEM-7361T", "--timeout", "60",
        ])
        let notPairing = try CLI.run(["pair", "--connect", "unix:\(fresh.path)", "--model", "HEM-7361T"])
        #expect(fresh.stop() == 0)
        #expect(never.status == 12, "\(never.stderr.suffix(300))")
        #expect(notPairing.status == 13, "\(notPairing.stderr.suffix(300))")
        #expect(notPairing.stderr.contains("not in pairing mode"))
    }

    /// `cuff replay` of a captured Omron session (no --model: Device Information picked the
    /// profile live) gives the live session's readings, decoded from the channel traffic.
    /// With `--protocol omron` too (it gave no reading: the forced observer needs the discovered
    /// database, and the standard one then followed alone). One session start, as live (the
    /// replay gave two: the standard observer's, and the Omron observer's at the hand-over).
    @Test(arguments: [("HEM-7600T", false), ("HEM-7380T1", false), ("HEM-7600T", true)])
    func replayOfACaptureGivesTheLiveReadings(model: String, forced: Bool) throws {
        let sim = try TwoProcessTests.Simulator(["--model", model, "--speed", "1", "--seed", "9"])
        let capture = sim.dir.appendingPathComponent("omron.btsnoop").path
        let live = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--capture", capture, "--timeout", "60"])
        let replay = try CLI.run(["replay", capture] + (forced ? ["--protocol", "omron"] : []))
        _ = sim.stop()
        let starts = try replay.stdoutLines.map(CLI.json).filter {
            $0["type"] as? String == "session" && $0["event"] as? String == "start"
        }
        #expect(starts.count == 1, "\(replay.stdout)")
        #expect(live.status == 0, "\(live.stderr.suffix(300))")
        #expect(replay.status == 0, "\(replay.stderr.suffix(300))")
        func values(_ r: CLIResult) throws -> [String] {
            try measurements(r).map { m in
                let o = m["omron"] as? [String: Any]
                return
                    "\(m["raw"]!)|\(m["timestamp"]!)|\(m["user_id"]!)|\(o?["model"] ?? "")|\((m["device"] as? [String: Any])?["model"] ?? "")"
            }
        }
        let l = try values(live)
        #expect(!l.isEmpty)
        #expect(try values(replay) == l)
        #expect(l.allSatisfy { $0.hasSuffix("|\(model)|\(model)") })
    }
}

/// `cuff pair --connect` against a factory-fresh simulated Omron cuff: refused until its button
/// (SIGUSR1) puts it in pairing mode, then our key is programmed and a sync with it works.
@Suite("cuff pair with an Omron cuff", .serialized)
struct OmronPairTests {
    @Test func keyProgrammedOnlyInPairingMode() throws {
        let key = "00112233445566778899aabbccddeeff"
        let sim = try TwoProcessTests.Simulator(["--model", "HEM-7322T", "--unpaired", "--speed", "1"])
        let early = try CLI.run(["pair", "--connect", "unix:\(sim.path)", "--model", "HEM-7322T", "--omron-key", key])
        sim.process.signal(SIGUSR1)
        usleep(300_000)
        let paired = try CLI.run(["pair", "--connect", "unix:\(sim.path)", "--model", "HEM-7322T", "--omron-key", key])
        let sync = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--model", "HEM-7322T", "--omron-key", key, "--quiet",
        ])
        let wrong = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--model", "HEM-7322T", "--quiet"])
        #expect(sim.stop() == 0)
        #expect(early.status == 13 && early.stderr.contains("not in pairing mode"))
        // Said once (probe Z: the session's log and the command both said it).
        #expect(early.stderr.components(separatedBy: "not in pairing mode").count == 2, "\(early.stderr)")
        #expect(
            paired.status == 0 && paired.stdout.contains(#""type":"paired""#)
                && paired.stdout.contains(#""pairing":"key""#))
        #expect(sync.status == 0 && sync.stdoutLines.contains { $0.contains(#""characteristic":"omron""#) })
        #expect(wrong.status == 12)
    }

    /// `--cuffs N` with `--model`: a fleet of Omron cuffs on one event loop, each with readings of
    /// its own seed. `cuff watch` syncs every one, each unread reading once, and marks them read.
    @Test func fleetOfOmronCuffsIsWatchedEachReadingOnce() throws {
        let s = try ScratchDirectory()
        let fleet = try ChildProcess(
            [
                "simulate", "--model", "HEM-7380T1", "--listen", "unix:" + s.path("cuffs"), "--cuffs", "3", "--speed",
                "60",
            ],
            stderr: s.path("sim.err"))
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: s.path("cuffs/cuff-0003.sock")) })
        // What each cuff holds unread, read without marking it.
        var unread: [String: [String]] = [:]
        for i in 1...3 {
            let name = "cuff-000\(i).sock"
            let r = try CLI.run([
                "measure", "--connect", "unix:" + s.path("cuffs/" + name), "--keep-unread", "--timeout", "60",
            ])
            #expect(r.status == 0, "\(r.stderr.suffix(400))")
            unread[name] = try OmronSocketTests().measurements(r).map { $0["raw"] as! String }
        }
        #expect(unread.values.allSatisfy { !$0.isEmpty })
        #expect(
            Set(unread.values.map { $0.joined(separator: ",") }).count == 3,
            "the cuffs' seeds differ, so do their readings")
        let total = unread.values.reduce(0) { $0 + $1.count }
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--store", s.path("w.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        #expect(
            waitUntil(60) { ((try? WatchCommandTests.measurementLines(s.lines("out"))) ?? []).count >= total },
            "\(s.text("watch.err").suffix(1500))")
        // A few more turns of every cuff: nothing is printed again.
        usleep(3_000_000)
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 20) == 0, "\(s.text("watch.err").suffix(1500))")
        let printed = try WatchCommandTests.measurementLines(s.lines("out"))
        for (name, raws) in unread {
            let got = printed.filter {
                (($0["device"] as? [String: Any])?["address"] as? String)?.hasSuffix(name) == true
            }
            #expect(got.map { $0["raw"] as! String }.sorted() == raws.sorted(), "\(name)")
            #expect(
                got.allSatisfy {
                    $0["characteristic"] as? String == "omron"
                        && ($0["device"] as? [String: Any])?["model"] as? String == "HEM-7380T1"
                })
        }
        #expect(try WatchCommandTests.history(s.path("w.db")).count == total)
        // Marked read, as the vendor app does: the next sync of a cuff has nothing new.
        let again = try CLI.run(["measure", "--connect", "unix:" + s.path("cuffs/cuff-0002.sock"), "--timeout", "60"])
        let againRead = try OmronSocketTests().measurements(again)
        #expect(again.status == 2 && againRead.isEmpty, "\(again.stderr.suffix(400))")
        fleet.signal(SIGTERM)
        #expect(fleet.wait(timeout: 20) == 0, "\(s.text("sim.err").suffix(800))")
        #expect(s.text("sim.err").contains("3 Omron HEM-7380T1 normal cuffs"))
    }
}
