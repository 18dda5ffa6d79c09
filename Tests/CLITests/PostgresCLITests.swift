// SPDX-License-Identifier: GPL-2.0-or-later
import CuffTestSupport
import Foundation
import PostgresTestCluster
import Testing

/// `--store postgres://…` end to end: the built cuff against a throwaway PostgreSQL cluster.
@Suite("cuff with a PostgreSQL store")
struct PostgresCLITests {
    static let captures = CLI.packageRoot.appendingPathComponent("captures")

    func cluster() throws -> TestCluster? {
        if let why = TestCluster.unavailable {
            print("skipped: \(why)")
            return nil
        }
        return try TestCluster()
    }

    func tempDir() throws -> String {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-pgcli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    /// Each printed measurement's raw bytes and time of receipt (what tells readings apart).
    func keys(_ r: CLIResult) throws -> [String] {
        try r.stdoutLines.map { l in
            let o = try CLI.json(l)
            return "\(o["raw"] as? String ?? "")@\(o["received_at"] as? String ?? "")"
        }
    }

    /// The issue's "done when": three hubs, then two runs with the server down, then `cuff sync`,
    /// leave every reading in PostgreSQL exactly once, as `cuff history --store postgres://…` shows.
    @Test func threeHubsTwoRunsWithTheServerDownThenSyncKeepEveryReadingOnce() throws {
        guard let c = try cluster() else { return }
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let url = c.url()
        // Three hubs at once, each with its own outbox and its own reading.
        let hubs = try (1...3).map { i in
            try ChildProcess(
                [
                    "measure", "--simulated", "normal", "--speed", "0", "--seed", "\(i)", "--store", url, "--outbox",
                    "\(dir)/hub\(i).db",
                ],
                stdout: "\(dir)/out\(i)", stderr: "\(dir)/err\(i)")
        }
        for (i, h) in hubs.enumerated() {
            let status = h.wait(timeout: 120)
            #expect(
                status == 0,
                "hub \(i + 1): \((try? String(contentsOfFile: "\(dir)/err\(i + 1)", encoding: .utf8)) ?? "")")
        }
        // The server stopped while two hubs measure: both complete, exit 0, and say the reading waits.
        try c.stop()
        for i in 4...5 {
            let r = try CLI.run([
                "measure", "--simulated", i == 4 ? "hypertensive" : "normal", "--speed", "0", "--seed", "\(i)",
                "--store", url, "--outbox", "\(dir)/hub\(i).db",
            ])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdoutLines.contains { $0.contains("\"type\":\"measurement\"") })
            #expect(r.stderr.contains("1 reading waits in the outbox \(dir)/hub\(i).db"), "\(r.stderr)")
            #expect(r.stderr.contains("Connection refused"), "\(r.stderr)")
            // (Probe U: "takes readings again: 0 shipped" came between the two, though the
            // server never answered: a drain of the empty outbox was read as the server's answer.)
            #expect(!r.stderr.contains("takes readings again"), "\(r.stderr)")
            var st = stat()
            #expect(stat("\(dir)/hub\(i).db", &st) == 0 && st.st_mode & 0o777 == 0o600, "the outbox has mode 0600")
        }
        // While the server is down, cuff sync cannot ship: status 9, the readings still wait.
        let down = try CLI.run(["sync", "--store", url, "--outbox", "\(dir)/hub4.db"])
        #expect(down.status == 9)
        #expect(down.stderr.contains("1 still wait in the outbox"), "\(down.stderr)")
        // History needs the server: a clear error, status 10.
        let noServer = try CLI.run(["history", "--store", url])
        #expect(noServer.status == 10)
        #expect(
            noServer.stderr.contains("PostgreSQL 127.0.0.1:\(c.port): cannot reach the server: Connection refused"),
            "\(noServer.stderr)")
        try c.start()
        for i in 4...5 {
            let s = try CLI.run(["sync", "--store", url, "--outbox", "\(dir)/hub\(i).db"])
            #expect(s.status == 0, "\(s.stderr)")
            #expect(s.stderr.contains("shipped 1 reading"), "\(s.stderr)")
            #expect(!s.stderr.contains(TestCluster.password), "the password is not shown")
        }
        // Syncing again is harmless: nothing waits.
        #expect(try CLI.run(["sync", "--store", url, "--outbox", "\(dir)/hub5.db"]).status == 0)
        let history = try CLI.run(["history", "--store", url])
        #expect(history.status == 0, "\(history.stderr)")
        let k = try keys(history)
        #expect(k.count == 5, "every reading: \(history.stdout)")
        #expect(Set(k).count == 5, "each once")
        #expect(
            history.stderr.contains("5 measurements in postgres://cuff:***@127.0.0.1:\(c.port)/cuff"),
            "\(history.stderr)")
        #expect(try c.psql("SELECT count(*), count(DISTINCT dedup_key) FROM cuff_measurements") == "5|5")
    }

    /// The same capture replayed into an SQLite store and into PostgreSQL: `cuff history` prints
    /// the same bytes in every format; replayed again into PostgreSQL by another hub, nothing doubles.
    @Test func historyIsTheSameWhateverTheStore() throws {
        guard let c = try cluster() else { return }
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let capture = Self.captures.appendingPathComponent("stored-records-bps-1.1.btsnoop").path
        let sqlite = "\(dir)/s.db"
        #expect(try CLI.run(["replay", capture, "--quiet", "--store", sqlite]).status == 0)
        let r = try CLI.run(["replay", capture, "--quiet", "--store", c.url(), "--outbox", "\(dir)/o.db"])
        #expect(r.status == 0, "\(r.stderr)")
        let r2 = try CLI.run(["replay", capture, "--quiet", "--store", c.url(), "--outbox", "\(dir)/o2.db"])
        #expect(r2.status == 0, "\(r2.stderr)")
        for f in ["ndjson", "fhir", "omh"] {
            let env = ["TZ": "UTC"]
            let a = try CLI.run(["history", "--store", sqlite, "--format", f], environment: env)
            let b = try CLI.run(["history", "--store", c.url(), "--format", f], environment: env)
            #expect(a.status == 0 && b.status == 0, "\(a.stderr) \(b.stderr)")
            #expect(a.stdoutLines.count > 1)
            if f == "omh" {
                // Open mHealth headers carry fresh ids and the time of printing: compare the bodies.
                func bodies(_ r: CLIResult) throws -> [String] {
                    try r.stdoutLines.map { l in
                        let o = try CLI.json(l)
                        return String(
                            data: try JSONSerialization.data(withJSONObject: o["body"] ?? [:], options: [.sortedKeys]),
                            encoding: .utf8)!
                    }
                }
                #expect(try bodies(a) == bodies(b))
            } else {
                #expect(a.stdout == b.stdout, "\(f)")
            }
        }
        let n = try CLI.run(["history", "--store", sqlite]).stdoutLines.count
        #expect(try c.psql("SELECT count(*) FROM cuff_measurements") == "\(n)")
    }

    /// A row another program changed (a user id out of range) skips that row, named by id and
    /// column, and the rest is printed (exit 11), as for a damaged SQLite store; a column whose
    /// type was altered skips the rows it makes unreadable, never the whole history at once.
    @Test func anUnreadableRowOnTheServerSkipsThatRowOnly() throws {
        guard let c = try cluster() else { return }
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let capture = Self.captures.appendingPathComponent("stored-records-bps-1.1.btsnoop").path
        let r = try CLI.run(["replay", capture, "--quiet", "--store", c.url(), "--outbox", "\(dir)/o.db"])
        #expect(r.status == 0, "\(r.stderr)")
        let whole = try CLI.run(["history", "--store", c.url()])
        #expect(whole.status == 0 && whole.stdoutLines.count > 1, "\(whole.stderr)")
        let first = try c.psql("SELECT min(id) FROM cuff_measurements")
        _ = try c.psql("UPDATE cuff_measurements SET user_id = 999 WHERE id = \(first)")
        let damaged = try CLI.run(["history", "--store", c.url()])
        #expect(damaged.status == 11, "\(damaged.stderr)")
        #expect(damaged.stdoutLines == Array(whole.stdoutLines.dropFirst()))
        #expect(damaged.stderr.contains("skipped") && damaged.stderr.contains("user_id"), "\(damaged.stderr)")
        // (The server's address is left out: its port may hold the digits.)
        #expect(
            !damaged.stderr.replacingOccurrences(of: "\(c.port)", with: "PORT").contains("999"),
            "a value is never shown")
        _ = try c.psql(
            "ALTER TABLE cuff_measurements ALTER COLUMN warnings TYPE BYTEA USING convert_to(warnings, 'UTF8')")
        let altered = try CLI.run(["history", "--store", c.url()])
        #expect(altered.status == 11 && altered.stdoutLines.isEmpty, "\(altered.stderr)")
        #expect(altered.stderr.contains("warnings"), "\(altered.stderr)")
    }

    @Test func clearErrors() throws {
        guard let c = try cluster() else { return }
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func measure(_ url: String) throws -> CLIResult {
            try CLI.run(["measure", "--simulated", "normal", "--speed", "0", "--store", url, "--outbox", "\(dir)/o.db"])
        }
        let bad = try measure("postgres://cuff:pw@127.0.0.1:notaport/cuff")
        #expect(bad.status == 10)
        #expect(
            bad.stderr.contains(
                "bad PostgreSQL URL postgres://cuff:***@127.0.0.1:notaport/cuff: the port 'notaport' is not a number"),
            "\(bad.stderr)")
        #expect(bad.stdout.isEmpty, "no session without a usable store")
        let wrong = try measure(c.url(password: "nope"))
        #expect(wrong.status == 10)
        #expect(wrong.stderr.contains("password authentication failed for user \"cuff\""), "\(wrong.stderr)")
        let missing = try measure(c.url("nosuchdb"))
        #expect(missing.status == 10)
        #expect(missing.stderr.contains("database \"nosuchdb\" does not exist"), "\(missing.stderr)")
        let tls = try measure(c.url(sslmode: "require"))
        #expect(tls.status == 10)
        #expect(tls.stderr.contains("the server does not accept TLS, and sslmode=require requires it"), "\(tls.stderr)")
        let h = try CLI.run(["history", "--store", c.url("nosuchdb")])
        #expect(h.status == 10)
        #expect(h.stderr.contains("does not exist"))
        // The password from PGPASSWORD, and from a password file named by PGPASSFILE.
        let noPassword = c.url(password: nil)
        let viaEnv = try CLI.run(["history", "--store", noPassword], environment: ["PGPASSWORD": TestCluster.password])
        #expect(viaEnv.status == 0, "\(viaEnv.stderr)")
        let passfile = "\(dir)/pgpass"
        try "127.0.0.1:\(c.port):*:cuff:\(TestCluster.password)\n".write(
            toFile: passfile, atomically: true, encoding: .utf8)
        chmod(passfile, 0o600)
        let viaFile = try CLI.run(["history", "--store", noPassword], environment: ["PGPASSFILE": passfile])
        #expect(viaFile.status == 0, "\(viaFile.stderr)")
        // Options that go together.
        let orphan = try CLI.run(["measure", "--simulated", "normal", "--outbox", "\(dir)/x.db"])
        #expect(orphan.status == 64)
        #expect(orphan.stderr.contains("--outbox is the outbox of a postgres:// --store"))
        let syncSQLite = try CLI.run(["sync", "--store", "\(dir)/s.db"])
        #expect(syncSQLite.status == 64)
    }

    /// `cuff watch --store postgres://…`: readings reach the server while it runs (the shipper
    /// works continuously), and after SIGTERM the server holds each printed reading once.
    /// A server that stops answering (SIGSTOP: no error, no hang-up) while watch ships: SIGTERM
    /// still ends watch in seconds (it ships for at most 2 s more), the unshipped readings wait in
    /// the outbox, and `cuff sync` ships them once the server answers again.
    @Test func aStoppingWatchDoesNotWaitForAFrozenServer() throws {
        guard let c = try cluster() else { return }
        let s = try ScratchDirectory()
        let fleet = try SimulatedFleet.start(in: s, cuffs: 1)
        defer { fleet.kill9() }
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--store", c.url(), "--outbox", s.path("outbox.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        defer { watch.kill9() }
        func shipped() -> Int { Int((try? c.psql("SELECT count(*) FROM cuff_measurements")) ?? "0") ?? 0 }
        #expect(waitUntil(60) { shipped() >= 1 }, "\(s.text("watch.err").suffix(2000))")
        // Freeze the server and its backends.
        let postmaster = try #require(
            pid_t(try String(contentsOfFile: c.dataDir + "/postmaster.pid", encoding: .utf8).split(separator: "\n")[0]))
        let backends = try runToCompletion("pgrep", ["-P", "\(postmaster)"]).stdout.split(separator: "\n")
            .compactMap { pid_t($0) }
        let frozen = [postmaster] + backends
        for p in frozen { kill(p, SIGSTOP) }
        defer { for p in frozen { kill(p, SIGCONT) } }
        let before = try WatchCommandTests.measurementLines(s.lines("out")).count
        #expect(waitUntil(30) { ((try? WatchCommandTests.measurementLines(s.lines("out")).count) ?? 0) >= before + 2 })
        fleet.signal(SIGTERM)
        _ = fleet.wait(timeout: 20)
        let stopping = ContinuousClock.now
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 30) == 0, "\(s.text("watch.err").suffix(2000))")
        let took = ContinuousClock.now - stopping
        #expect(took < .seconds(12), "SIGTERM took \(took)")
        #expect(s.text("watch.err").contains("wait in the outbox"), "\(s.text("watch.err").suffix(2000))")
        for p in frozen { kill(p, SIGCONT) }
        let sync = try CLI.run(["sync", "--store", c.url(), "--outbox", s.path("outbox.db")])
        #expect(sync.status == 0, "\(sync.stderr)")
        let printed = try WatchCommandTests.measurementLines(s.lines("out")).map(WatchCommandTests.key)
        let stored = try WatchCommandTests.history(c.url()).map(WatchCommandTests.key)
        #expect(
            Set(printed) == Set(stored) && stored.count == printed.count,
            "\(printed.count) printed, \(stored.count) stored")
    }

    @Test func watchShipsContinuously() throws {
        guard let c = try cluster() else { return }
        let s = try ScratchDirectory()
        let fleet = try SimulatedFleet.start(in: s, cuffs: 4)
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--store", c.url(), "--outbox", s.path("outbox.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        // On the server while watch still runs.
        #expect(
            waitUntil(60) {
                (Int((try? c.psql("SELECT count(DISTINCT device_id) FROM cuff_measurements")) ?? "0") ?? 0) == 4
            },
            "not shipped while running: \(s.text("watch.err").suffix(2000))")
        #expect(watch.isRunning)
        fleet.signal(SIGTERM)
        #expect(fleet.wait(timeout: 20) == 0)
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 30) == 0, "\(s.text("watch.err").suffix(2000))")
        #expect(
            s.text("watch.err").contains("storing in postgres://cuff@127.0.0.1:\(c.port)/cuff?sslmode=disable"),
            "\(s.text("watch.err").prefix(1000))")
        let printed = try WatchCommandTests.measurementLines(s.lines("out")).map(WatchCommandTests.key)
        let stored = try WatchCommandTests.history(c.url()).map(WatchCommandTests.key)
        #expect(Set(stored).count == stored.count, "a reading was stored twice")
        #expect(Set(printed) == Set(stored), "stdout and the server disagree")
        #expect(printed.count >= 4)
    }

    /// Two processes storing into two databases of one server, with default outboxes, while it is
    /// down: `cuff sync` of each database ships that database's reading only. (They shared
    /// `outbox.db`, and the first sync shipped both readings into its own database.)
    @Test func twoDatabasesWithDefaultOutboxesGetOnlyTheirOwnReadings() throws {
        guard let c = try cluster() else { return }
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try c.createDatabase("lab")
        let env = ["XDG_STATE_HOME": dir + "/state"]
        try c.stop()
        var taken: [String: [String]] = [:]
        for (db, scenario) in [("cuff", "normal"), ("lab", "hypertensive")] {
            let r = try CLI.run(
                ["measure", "--simulated", scenario, "--speed", "0", "--store", c.url(db)], environment: env)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stderr.contains("1 reading waits in the outbox"), "\(r.stderr)")
            taken[db] = try r.stdoutLines.filter { $0.contains(#""type":"measurement""#) }.map {
                try CLI.json($0)["raw"] as? String ?? ""
            }
        }
        try c.start()
        for db in ["cuff", "lab"] {
            let s = try CLI.run(["sync", "--store", c.url(db)], environment: env)
            #expect(s.status == 0 && s.stderr.contains("shipped 1 reading"), "\(s.stderr)")
            let history = try CLI.run(["history", "--store", c.url(db)])
            #expect(
                try history.stdoutLines.map { try CLI.json($0)["raw"] as? String ?? "" } == taken[db],
                "\(db): \(history.stdout)")
        }
    }
}
