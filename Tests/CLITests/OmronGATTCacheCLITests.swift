import CuffTestSupport
import Foundation
import Testing

/// The GATT cache on the Omron protocol: `cuff simulate --model NAME` in one process, `cuff
/// measure --connect` in another, one session after another against the same socket (the
/// simulated cuff started again each time with the same seed, so each session has the same
/// unread records to read).
@Suite("GATT cache: Omron cuffs", .serialized)
struct OmronGATTCacheCLITests {
    final class Cuff {
        let s: ScratchDirectory
        let env: [String: String]
        var socket: String { s.path("o.sock") }

        init() throws {
            s = try ScratchDirectory()
            env = ["XDG_STATE_HOME": s.path("state")]
        }

        /// One `cuff measure` (with `measure`'s extra arguments) against a freshly started
        /// simulated cuff of `model` (with `simulate`'s).
        /// (`model` nil: a standard cuff that measures once a client subscribes.)
        func session(_ measure: [String], simulate: [String] = [], model: String? = "HEM-7361T") throws -> CLIResult {
            try? FileManager.default.removeItem(atPath: socket)
            let cuff = model.map { ["--model", $0] } ?? ["--autostart"]
            let sim = try ChildProcess(
                ["simulate"] + cuff + ["--listen", "unix:" + socket, "--speed", "100", "--seed", "5"]
                    + simulate, stderr: s.path("sim.err"))
            #expect(waitUntil(10) { FileManager.default.fileExists(atPath: self.socket) })
            let r = try CLI.run(
                ["measure", "--connect", "unix:" + socket, "--timeout", "60"] + measure, environment: env)
            sim.signal(SIGINT)
            #expect(sim.wait(timeout: 10) == 0)
            return r
        }

        var cacheFiles: [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: s.path("state/cuff/gatt"))) ?? []).map {
                s.path("state/cuff/gatt/" + $0)
            }
        }
    }

    static func end(_ r: CLIResult) throws -> [String: Any] {
        try GATTCacheCLITests.end(r)
    }

    /// Each record's values and user (its time is the simulated cuff's, which starts at our clock).
    static func raws(_ r: CLIResult) throws -> [String] {
        try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }.map {
            "\($0["systolic"] ?? "-")/\($0["diastolic"] ?? "-") \($0["pulse_rate"] ?? "-") "
                + "\($0["user_id"] ?? "-") \(($0["omron"] as? [String: Any])?["slot"] ?? "-") \($0["characteristic"] ?? "-")"
        }
    }

    static func requests(_ e: [String: Any]) -> Int { e["att_requests"] as? Int ?? -1 }

    /// Another model answering where a HEM-7361T was cached (the VM's simulators take turns at
    /// one address): its model number is read again, so its own profile reads its memory; the
    /// records are those a session without the cache reads.
    @Test(arguments: ["HEM-6320T", "HEM-7155T-MW"])
    func anotherModelAtACachedAddressIsReadWithItsOwnProfile(model: String) throws {
        let cuff = try Cuff()
        let first = try cuff.session([])
        let other = try cuff.session([], model: model)
        let reference = try cuff.session(["--no-gatt-cache"], model: model)
        #expect(first.status == 0 && other.status == reference.status, "\(other.stderr.suffix(800))")
        #expect(other.stderr.contains("Omron \(model) ("), "\(other.stderr.suffix(800))")
        #expect(!other.stderr.contains("Omron HEM-7361T ("), "\(other.stderr.suffix(800))")
        let records = try Self.raws(other)
        #expect(!records.isEmpty)
        #expect(records == (try Self.raws(reference)))
        let end = try Self.end(other)
        #expect(["hit", "stale"].contains(end["gatt_cache"] as? String), "\(end)")
    }

    /// An Omron cuff's cache entry, then a standard cuff at the same address (and the reverse):
    /// the first session finds the cache wrong, discovers, hands the link to the protocol the
    /// cuff speaks and gets its readings (`stale`); the next uses what that session kept (`hit`).
    @Test func anotherProtocolAtACachedAddressIsReadAtOnce() throws {
        for (cached, now) in [("HEM-7361T", nil), (nil, "HEM-7361T")] as [(String?, String?)] {
            let cuff = try Cuff()
            let first = try cuff.session([], model: cached)
            #expect(first.status == 0, "\(first.stderr.suffix(800))")
            let other = try cuff.session([], model: now)
            #expect(
                other.status == 0, "\(cached ?? "standard") then \(now ?? "standard"): \(other.stderr.suffix(1200))")
            let records = try Self.raws(other)
            #expect(!records.isEmpty)
            let end = try Self.end(other)
            #expect(end["gatt_cache"] as? String == "stale", "\(end)")
            let again = try cuff.session([], model: now)
            let recordsAgain = try Self.raws(again)
            #expect(again.status == 0 && recordsAgain == records, "\(again.stderr.suffix(800))")
            let endAgain = try Self.end(again)
            #expect(endAgain["gatt_cache"] as? String == "hit", "\(endAgain)")
        }
    }

    /// With `--model` and without it: the first session discovers (and, without `--model`, reads
    /// the model number after the standard session's discovery hands the link over), the second
    /// goes straight to the Omron service's subscriptions and the unlock, and reads the same records.
    @Test(arguments: [["--model", "HEM-7361T"], []])
    func theSecondSessionSkipsDiscovery(model: [String]) throws {
        let cuff = try Cuff()
        let first = try cuff.session(model)
        let second = try cuff.session(model)
        let off = try cuff.session(model + ["--no-gatt-cache"])
        #expect([first, second, off].allSatisfy { $0.status == 0 }, "\(second.stderr.suffix(600))")
        let a = try Self.end(first), b = try Self.end(second), c = try Self.end(off)
        #expect(a["gatt_cache"] as? String == "miss", "\(a)")
        #expect(b["gatt_cache"] as? String == "hit", "\(second.stderr)")
        #expect(c["gatt_cache"] as? String == "off")
        // Discovery is 12 requests and the MTU exchange one (the classic family's pieces fit the
        // default MTU); without --model the model number is read again on every connection (the
        // cuff at the address may be another model).
        #expect(Self.requests(a) == Self.requests(c), "\(a) \(c)")
        #expect(Self.requests(b) == Self.requests(a) - 13, "\(a) \(b)")
        #expect(!second.stderr.contains("handing the link"), "\(second.stderr)")
        #expect(second.stderr.contains("using the GATT cache"))
        let records = try Self.raws(first), again = try Self.raws(second), without = try Self.raws(off)
        #expect(!records.isEmpty && records == again && records == without)
        for key in ["manufacturer", "model"] { #expect("\(a[key] ?? "-")" == "\(b[key] ?? "-")", "\(key)") }
        #expect(cuff.cacheFiles.count == 1)
    }

    /// A firmware update moved every handle: the first cached request fails, the session
    /// discovers again and reads every record; the rewritten cache serves the next one.
    @Test func movedHandlesAreDiscoveredAgainWithoutLosingRecords() throws {
        let cuff = try Cuff()
        let model = ["--model", "HEM-7361T"]
        let first = try cuff.session(model)
        let moved = try cuff.session(model, simulate: ["--handle-gap", "128"])
        let again = try cuff.session(model, simulate: ["--handle-gap", "128"])
        let results = [first, moved, again]
        #expect(results.allSatisfy { $0.status == 0 }, "\(moved.stderr.suffix(800))")
        let ends = try results.map(Self.end)
        #expect(ends.map { $0["gatt_cache"] as? String } == ["miss", "stale", "hit"], "\(moved.stderr)")
        #expect(
            moved.stderr.contains("Invalid Handle") && moved.stderr.contains("discovering the cuff's handles again"))
        let records = try Self.raws(first)
        #expect(!records.isEmpty && results.allSatisfy { (try? Self.raws($0)) == records })
        #expect(Self.requests(ends[2]) < Self.requests(ends[0]) - 10)
    }

    /// A cuff with a Database Hash: the cache is checked with it (one request), and a changed
    /// database is discovered again before any Omron transaction.
    @Test func theDatabaseHashIsCheckedFirst() throws {
        let cuff = try Cuff()
        let model = ["--model", "HEM-7361T"]
        let first = try cuff.session(model, simulate: ["--database-hash"])
        let second = try cuff.session(model, simulate: ["--database-hash"])
        let moved = try cuff.session(model, simulate: ["--database-hash", "--handle-gap", "16"])
        let results = [first, second, moved]
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map { $0.stderr.suffix(400) })")
        let ends = try results.map(Self.end)
        #expect(ends.map { $0["gatt_cache"] as? String } == ["miss", "hit", "stale"])
        #expect(moved.stderr.contains("Database Hash changed"))
        #expect(!moved.stderr.contains("Invalid Handle"))
        let records = try Self.raws(first)
        #expect(!records.isEmpty && results.allSatisfy { (try? Self.raws($0)) == records })
        #expect(Self.requests(ends[1]) < Self.requests(ends[0]) - 10, "\(ends)")
    }

    /// The cuff says its database changed (Service Changed on connecting): the cache is not trusted.
    @Test func serviceChangedIsHeeded() throws {
        let cuff = try Cuff()
        let model = ["--model", "HEM-7361T"]
        let first = try cuff.session(model, simulate: ["--service-changed"])
        let told = try cuff.session(model, simulate: ["--service-changed", "--indicate-service-changed"])
        #expect(first.status == 0 && told.status == 0, "\(told.stderr.suffix(800))")
        #expect(try Self.end(told)["gatt_cache"] as? String == "stale", "\(told.stderr)")
        #expect(told.stderr.contains("indicated Service Changed: discovering"))
        let records = try Self.raws(first), afterTold = try Self.raws(told)
        #expect(!records.isEmpty && afterTold == records)
    }

    /// A damaged cache file: said on stderr, a full discovery, and the file rewritten.
    @Test func aDamagedCacheFileIsSaidAndRediscovered() throws {
        let cuff = try Cuff()
        let model = ["--model", "HEM-7361T"]
        let first = try cuff.session(model)
        let file = try #require(cuff.cacheFiles.first)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        try text.replacingOccurrences(of: "\nmtu ", with: "\nmtu x").write(
            toFile: file, atomically: true, encoding: .utf8)
        let damaged = try cuff.session(model)
        let after = try cuff.session(model)
        #expect([first, damaged, after].allSatisfy { $0.status == 0 })
        #expect(damaged.stderr.contains("GATT cache: \(file): line 3: malformed; discovering"), "\(damaged.stderr)")
        let ends = try [first, damaged, after].map(Self.end)
        #expect(ends.map { $0["gatt_cache"] as? String } == ["miss", "miss", "hit"])
        #expect(Self.requests(ends[1]) == Self.requests(ends[0]))
        let records = try Self.raws(first), rediscovered = try Self.raws(damaged)
        #expect(!records.isEmpty && rediscovered == records)
    }
}
