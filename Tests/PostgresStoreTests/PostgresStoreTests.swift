// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import Foundation
import PostgresTestCluster
import Sinks
import Synchronization
import Testing

@testable import PostgresStore

/// `count` distinct readings from `device`, starting at `from` (values, times and keys vary).
func readings(
    _ count: Int, from: Int = 0,
    device: DeviceInfo = DeviceInfo(
        address: "AA:BB:CC:DD:EE:FF", name: "BPM-1", manufacturer: "Acme", model: "M7", serial: "SN42", firmware: "1.0")
) -> [MeasurementRecord] {
    (from..<(from + count)).map { i in
        let v = BloodPressureMeasurement(
            unit: i % 7 == 0 ? .kPa : .mmHg, systolic: SFloat(Double(100 + i % 60)),
            diastolic: SFloat(Double(60 + i % 30)),
            meanArterialPressure: i % 11 == 0 ? .nan : SFloat(Double(80 + i % 20)),
            timestamp: DateTime(unixSeconds: 1_700_000_000 + Int64(i) * 60), pulseRate: SFloat(Double(55 + i % 40)),
            userID: UInt8(i % 3))
        let raw = v.encode()
        let d = try! BloodPressureMeasurement.decode(raw[...])
        let at = EventTime(monotonic: .seconds(Double(i)), wallMicros: (1_795_000_000 + Int64(i)) * 1_000_000 + 123)
        return MeasurementRecord.from(
            bpm: d.value, warnings: d.warnings, raw: raw, device: device, at: at, stored: i % 2 == 1)
    }
}

/// A test's own cluster, or nil (the test then skips, saying why).
func cluster(ssl: Bool = false) throws -> TestCluster? {
    if let why = TestCluster.unavailable {
        print("skipped: \(why)")
        return nil
    }
    return try TestCluster(ssl: ssl)
}

func url(
    _ c: TestCluster, _ db: String = "cuff", password: String? = TestCluster.password, sslmode: String? = "disable"
) throws -> PostgresURL {
    try PostgresURL(
        parsing: c.url(db, password: password, sslmode: sslmode), environment: ["HOME": "/nonexistent", "USER": "root"])
}

func lines(_ store: any MeasurementStore, format: OutputFormat) throws -> [String] {
    let out = CollectedLines()
    var o = SinkConfiguration(
        format: format, utcOffset: .fixed(3600), uuidSeed: 9, clock: .fixed(1_795_400_000_000_000))
    o.utcOffset = .recorded(try store.recordedOffsets(), fallback: .fixed(3600))
    let sink = SinkFactory.formatSink(o, output: out)
    try store.replay(into: sink)
    try sink.finish()
    return out.lines
}

final class CollectedLines: LineOutput, @unchecked Sendable {
    private let m = Mutex<[String]>([])
    var lines: [String] { m.withLock { $0 } }
    func writeLine(_ s: String) throws(SinkError) { m.withLock { $0.append(s) } }
    func flush() throws(SinkError) {}
    var name: String { "collected" }
}

@Suite("PostgreSQL store with a local outbox, against a real server")
struct PostgresStoreTests {
    @Test func historyIsTheSameAsTheSQLiteStores() throws {
        guard let c = try cluster() else { return }
        let dir = try ScratchDirectory()
        var rs = readings(40)
        // A device that learns its name later, and a second device.
        rs += readings(5, from: 100, device: DeviceInfo(address: "11:22:33:44:55:66"))
        rs += readings(5, from: 105, device: DeviceInfo(address: "11:22:33:44:55:66", name: "Later", model: "X2"))
        // Names that JSON must escape, and text beyond ASCII.
        rs += readings(
            3, from: 200,
            device: DeviceInfo(address: "22:22:22:22:22:22", name: "Blutdruck \"Ümlaut\" \\ \t\u{1}", serial: "№ 7 ✓"))
        let sqlite = try SQLiteStore(path: dir.path("s.db"), utcOffset: .fixed(3600), warn: SinkWarnings.ignore)
        for m in rs { try sqlite.insert(m) }
        let pg = try PostgresOutboxStore(
            url: try url(c), outboxPath: dir.path("outbox.db"), utcOffset: .fixed(3600), background: false,
            batchSize: 7, warn: SinkWarnings.ignore)
        for m in rs { try pg.insert(m) }
        let r = pg.drain()
        #expect(r.failure == nil)
        #expect(r.shipped == rs.count && r.new == rs.count)
        #expect(try pg.outbox.count() == 0)
        for f in OutputFormat.allCases {
            let a = try lines(sqlite, format: f), b = try lines(pg, format: f)
            #expect(a.count >= rs.count)
            #expect(a == b, "\(f) history differs")
        }
        #expect(try pg.knownKeys() == sqlite.knownKeys())
        #expect(try pg.server.lastSequenceNumber(address: "11:22:33:44:55:66") == nil)
        try pg.close()
        try sqlite.finish()
    }

    @Test func migrationsAreSafeWhenManyHubsStartAtOnce() throws {
        guard let c = try cluster() else { return }
        let u = try url(c)
        let errors = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let s = PostgresServer(url: u)
            do throws(PostgresStoreError) { try s.migrate() } catch { errors.withLock { $0.append(error.description) } }
            s.disconnect()
        }
        #expect(errors.withLock { $0 } == [])
        let s = PostgresServer(url: u)
        #expect(try s.appliedMigrations() == [1])
        // A schema from a newer cuff is refused, saying so.
        try c.psql("INSERT INTO cuff_schema_migrations (version, name) VALUES (99, 'future')")
        let e = #expect(throws: PostgresStoreError.self) { try s.migrate() }
        #expect(e?.description.contains("schema version 99") == true)
        #expect(e?.transient == false)
        s.disconnect()
    }

    /// `history` of a database no cuff wrote to reads it as empty and creates nothing; a role
    /// that may use cuff's tables but not create any (no CREATE on the schema) reads and writes
    /// once the schema is there.
    @Test func aRoleWithoutCreateUsesAnExistingSchemaAndHistoryCreatesNothing() throws {
        guard let c = try cluster() else { return }
        let empty = try PostgresReadStore(url: try url(c))
        #expect(try empty.readHistory().rows.isEmpty)
        try empty.finish()
        #expect(try c.psql("SELECT to_regclass('cuff_schema_migrations') IS NULL") == "t", "history created tables")
        let owner = PostgresServer(url: try url(c))
        try owner.migrate()
        owner.disconnect()
        _ = try c.psql(
            """
            CREATE ROLE hub LOGIN PASSWORD 'hubpw'; REVOKE CREATE ON SCHEMA public FROM PUBLIC;
            GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO hub;
            GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO hub;
            """)
        let hubURL = try PostgresURL(
            parsing: "postgres://hub:hubpw@127.0.0.1:\(c.port)/cuff?sslmode=disable",
            environment: ["HOME": "/nonexistent", "USER": "root"])
        let hub = PostgresServer(url: hubURL)
        try hub.migrate()  // (was: permission denied for schema public)
        hub.disconnect()
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try PostgresOutboxStore(url: hubURL, outboxPath: dir.path("o.db"))
        for r in readings(3) { try store.insert(r) }
        try store.finish()
        #expect(try c.psql("SELECT count(*) FROM cuff_measurements") == "3")
        let read = try PostgresReadStore(url: hubURL)
        #expect(try read.readHistory().rows.count == 3)
        try read.finish()
    }

    /// A `cuff_devices` column dropped by another program: history still runs, as an SQLite
    /// store's does. Without `name` the rows read with no name; without `address` each row is
    /// skipped, named by the column.
    @Test func aDroppedDeviceColumnIsReadAsNullOrSkipsTheRows() throws {
        guard let c = try cluster() else { return }
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try PostgresOutboxStore(url: try url(c), outboxPath: dir.path("o.db"))
        for r in readings(3) { try store.insert(r) }
        try store.finish()
        _ = try c.psql("ALTER TABLE cuff_devices DROP COLUMN name")
        let read = try PostgresReadStore(url: try url(c))
        let named = try read.readHistory()
        #expect(named.rows.count == 3 && named.skipped.isEmpty)
        #expect(named.rows.allSatisfy { $0.device.name == nil && $0.device.address == "AA:BB:CC:DD:EE:FF" })
        _ = try c.psql("ALTER TABLE cuff_devices DROP COLUMN address")
        let unaddressed = try read.readHistory()
        #expect(unaddressed.rows.isEmpty)
        #expect(
            unaddressed.skipped.count == 3
                && unaddressed.skipped.allSatisfy { $0.kind == .missingColumn && $0.column == "devices.address" })
        try read.finish()
    }

    @Test func threeHubsWritingAtOnceAndTheSameReadingFromTwoHubs() throws {
        guard let c = try cluster() else { return }
        let dir = try ScratchDirectory()
        let u = try url(c)
        // Hub i has readings i*100 ..< i*100+150: hubs 0/1 and 1/2 share 50 readings each.
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { i in
            do {
                let hub = try PostgresOutboxStore(url: u, outboxPath: dir.path("hub\(i).db"), warn: SinkWarnings.ignore)
                for m in readings(150, from: i * 100) { try hub.insert(m) }
                try hub.finish()
                if try SQLiteStore(path: dir.path("hub\(i).db"), warn: SinkWarnings.ignore).count() != 0 {
                    failures.withLock { $0.append("hub \(i): outbox not empty") }
                }
            } catch {
                failures.withLock { $0.append("hub \(i): \(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        #expect(try c.psql("SELECT count(*), count(DISTINCT dedup_key) FROM cuff_measurements") == "350|350")
        #expect(try c.psql("SELECT count(*) FROM cuff_devices") == "1")
        // One reading stored by two hubs again: still one row.
        let again = readings(1, from: 120)
        for h in 0..<2 {
            let hub = try PostgresOutboxStore(
                url: u, outboxPath: dir.path("again\(h).db"), background: false, warn: SinkWarnings.ignore)
            #expect(try hub.outbox.insert(again[0]).isNew)
            let r = hub.drain()
            #expect(r.shipped == 1 && r.new == 0 && r.failure == nil)
            try hub.close()
        }
        #expect(try c.psql("SELECT count(*) FROM cuff_measurements WHERE dedup_key = '\(again[0].dedupKey)'") == "1")
    }

    /// Probe S: with the shipper running (`cuff watch`), a server that went away and came back
    /// said nothing at all; readings waited silently. Both are said, once each.
    @Test func anOutageUnderTheShipperIsSaidAndSoIsTheRecovery() throws {
        guard let c = try cluster() else { return }
        let dir = try ScratchDirectory()
        let warnings = WarningCollector()
        let hub = try PostgresOutboxStore(url: try url(c), outboxPath: dir.path("o.db"), warn: warnings.handler)
        #expect(try hub.insert(readings(1)[0]).isNew)
        #expect(waitUntil(30) { (try? hub.outbox.count()) == 0 })
        #expect(warnings.warnings.isEmpty, "\(warnings.warnings)")
        try c.stop()
        for (i, r) in readings(3, from: 1).enumerated() {
            #expect(try hub.insert(r).isNew, "\(i)")
        }
        #expect(
            waitUntil(30) { warnings.warnings.contains { $0.description.contains("readings wait in the outbox") } },
            "\(warnings.warnings)")
        try c.start()
        #expect(
            waitUntil(60) { warnings.warnings.contains { $0.description.contains("takes readings again: 3 shipped") } },
            "\(warnings.warnings)")
        #expect(warnings.warnings.count == 2, "said once each: \(warnings.warnings)")
        try hub.finish()
        #expect(try c.psql("SELECT count(*) FROM cuff_measurements") == "4")
    }

    @Test func serverDownReadingsWaitThenShip() throws {
        guard let c = try cluster() else { return }
        let dir = try ScratchDirectory()
        try c.stop()
        let warnings = WarningCollector()
        let hub = try PostgresOutboxStore(url: try url(c), outboxPath: dir.path("o.db"), warn: warnings.handler)
        #expect(try hub.insert(readings(1)[0]).isNew)
        try hub.insert(contentsOf: readings(9, from: 1))
        try hub.finish()
        let said = warnings.warnings.map(\.description)
        #expect(said.first?.contains("cannot reach the server: Connection refused") == true, "\(said)")
        #expect(said.last?.contains("10 readings wait in the outbox \(dir.path("o.db"))") == true, "\(said)")
        // The outbox: mode 0600, the readings in it.
        var st = stat()
        #expect(stat(dir.path("o.db"), &st) == 0 && st.st_mode & 0o777 == 0o600)
        try c.start()
        let later = try PostgresOutboxStore(
            url: try url(c), outboxPath: dir.path("o.db"), background: false, warn: SinkWarnings.ignore)
        #expect(try later.outbox.count() == 10)
        let r = later.drain()
        #expect(r.failure == nil && r.shipped == 10)
        try later.close()
        #expect(try c.psql("SELECT count(*) FROM cuff_measurements") == "10")
    }

    @Test func serverKilledInTheMiddleOfShippingLosesNothingAndDuplicatesNothing() throws {
        guard let c = try cluster() else { return }
        let dir = try ScratchDirectory()
        let n = 20_000
        let u = try url(c)
        do {
            let fill = try PostgresOutboxStore(
                url: u, outboxPath: dir.path("o.db"), background: false, warn: SinkWarnings.ignore)
            try fill.outbox.insert(contentsOf: readings(n))
            try fill.close()
        }
        let hub = try PostgresOutboxStore(
            url: u, outboxPath: dir.path("o.db"), background: false, batchSize: 100, warn: SinkWarnings.ignore)
        let result = Mutex<PostgresOutboxStore.ShipResult?>(nil)
        let t = Thread { result.withLock { $0 = hub.drain() } }
        t.start()
        // Kill the server once some batches are in.
        var tries = 0
        while (Int((try? c.psql("SELECT count(*) FROM cuff_measurements")) ?? "0") ?? 0) < 500 && tries < 3000 {
            usleep(5_000); tries += 1
        }
        try c.kill9()
        while result.withLock({ $0 }) == nil { usleep(10_000) }
        let r = try #require(result.withLock { $0 })
        #expect(r.failure != nil, "the drain saw the server go")
        #expect(r.failure?.transient == true)
        let waiting = try hub.outbox.count()
        #expect(waiting > 0 && waiting < n, "killed in the middle: \(waiting) of \(n) wait")
        try c.start()
        let onServer = Int(try c.psql("SELECT count(*) FROM cuff_measurements"))!
        #expect(onServer + waiting >= n, "nothing lost: \(onServer) on the server + \(waiting) waiting")
        let again = hub.drain()
        #expect(again.failure == nil)
        #expect(try hub.outbox.count() == 0)
        try hub.close()
        #expect(try c.psql("SELECT count(*), count(DISTINCT dedup_key) FROM cuff_measurements") == "\(n)|\(n)")
    }

    @Test func clearErrors() throws {
        guard let c = try cluster() else { return }
        let dir = try ScratchDirectory()
        func openError(_ u: PostgresURL) -> String {
            do {
                let s = try PostgresOutboxStore(
                    url: u, outboxPath: dir.path("o.db"), background: false, warn: SinkWarnings.ignore)
                try? s.close()
                return "opened"
            } catch { return error.description }
        }
        let wrong = openError(try url(c, password: "wrong"))
        #expect(wrong.contains("password authentication failed for user \"cuff\""), "\(wrong)")
        #expect(wrong.contains("the password came from the URL"), "\(wrong)")
        #expect(!wrong.contains("wrong"), "the password is not shown: \(wrong)")
        let none = openError(try url(c, password: nil))
        #expect(none.contains("asks for a password"), "\(none)")
        let missing = openError(try url(c, "nosuchdb"))
        #expect(missing.contains("database \"nosuchdb\" does not exist"), "\(missing)")
        let tls = openError(try url(c, sslmode: "require"))
        #expect(tls.contains("does not accept TLS") && tls.contains("sslmode=require"), "\(tls)")
        // prefer (libpq's default) falls back to plain with this server.
        #expect(openError(try url(c, sslmode: nil)) == "opened")
        // The outbox of a refused open is as it was: nothing in it.
        #expect(try SQLiteStore(path: dir.path("o.db"), warn: SinkWarnings.ignore).count() == 0)
    }

    @Test func tlsWhenTheURLAsks() throws {
        guard let c = try cluster(ssl: true) else { return }
        let dir = try ScratchDirectory()
        let hub = try PostgresOutboxStore(
            url: try url(c, sslmode: "require"), outboxPath: dir.path("o.db"), background: false,
            warn: SinkWarnings.ignore)
        try hub.insert(contentsOf: readings(3))
        #expect(hub.drain().failure == nil)
        try hub.close()
        #expect(try c.psql("SELECT count(*) FROM pg_stat_ssl WHERE ssl") != "")
        // verify-full against a self-signed certificate not given as sslrootcert: refused, clearly.
        let e = #expect(throws: SinkError.self) {
            _ = try PostgresOutboxStore(
                url: try url(c, sslmode: "verify-full"), outboxPath: dir.path("o2.db"), background: false,
                warn: SinkWarnings.ignore)
        }
        #expect(e?.description.contains("TLS") == true, "\(e?.description ?? "")")
        // ... and accepted with the certificate as its root.
        var v = try url(c, sslmode: "verify-ca")
        v.sslRootCert = c.dataDir + "/server.crt"
        let ok = try PostgresOutboxStore(
            url: v, outboxPath: dir.path("o3.db"), background: false, warn: SinkWarnings.ignore)
        try ok.close()
    }
}

/// An outbox belongs to the server's database that first used it: two processes storing into two
/// databases never ship each other's readings (they shared `outbox.db`, and the first to ship sent
/// both processes' readings into its own database).
@Suite("PostgreSQL outboxes, one per database")
struct PostgresOutboxClaimTests {
    @Test func anotherDatabaseGetsItsOwnDefaultOutboxAndIsRefusedOneHoldingOthersReadings() throws {
        let dir = try ScratchDirectory()
        let env = ["XDG_STATE_HOME": dir.path("state")]
        let port = TestCluster.freePort()  // nothing listens: the readings wait
        func open(_ db: String, _ outbox: String?, warn: WarningCollector = WarningCollector()) throws
            -> PostgresOutboxStore
        {
            try PostgresOutboxStore(
                url: try PostgresURL(parsing: "postgres://cuff@127.0.0.1:\(port)/\(db)?sslmode=disable"),
                outboxPath: outbox, background: false, environment: env, warn: warn.handler)
        }
        let a = try open("clinic", nil)
        #expect(a.outboxPath == dir.path("state") + "/cuff/outbox.db")
        try a.insert(readings(1)[0])
        try a.close()
        let w = WarningCollector()
        let b = try open("lab", nil, warn: w)
        #expect(b.outboxPath == dir.path("state") + "/cuff/outbox-127_0_0_1_\(port)-lab.db")
        // What waits in the default outbox for the other database is said (a changed URL would
        // otherwise leave it unseen).
        #expect(
            w.warnings.contains {
                $0.message.hasPrefix(
                    "1 reading for the PostgreSQL database postgres://127.0.0.1:\(port)/clinic waits in the outbox \(dir.path("state"))/cuff/outbox.db"
                )
            }, "\(w.warnings)")
        try b.insert(readings(2, from: 1)[1])
        #expect(try b.outbox.count() == 1)
        try b.close()
        // Each comes back to its own; the first keeps the default even when it is empty.
        let again = try open("clinic", nil)
        #expect(again.outboxPath.hasSuffix("/cuff/outbox.db"))
        #expect(try again.outbox.count() == 1)
        try again.close()
        // The clinic's outbox given to the lab: refused, nothing in it changed.
        let given = dir.path("state") + "/cuff/outbox.db"
        do {
            _ = try open("lab", given)
            Issue.record("the lab opened the clinic's outbox")
        } catch let e as SinkError {
            guard case let .storeOpen(path, reason) = e else { throw e }
            #expect(path == given)
            #expect(
                reason.contains(
                    "holds 1 reading for the PostgreSQL database postgres://127.0.0.1:\(port)/clinic, not the PostgreSQL database postgres://127.0.0.1:\(port)/lab"
                ),
                "\(reason)")
            #expect(reason.contains("cuff sync --store"), "\(reason)")
        }
        #expect(try open("clinic", given).outbox.count() == 1)
        // An empty outbox given to another database passes to it.
        let empty = dir.path("empty.db")
        let holding = try open("clinic", empty)
        // …but not while another process (here another store) has it open for its database.
        do {
            _ = try open("lab", empty)
            Issue.record("the lab took an outbox the clinic has open")
        } catch let e as SinkError {
            guard case let .storeOpen(_, reason) = e else { throw e }
            #expect(reason.contains("is open in another process for the PostgreSQL database"), "\(reason)")
        }
        try holding.close()
        let taken = try open("lab", empty)
        #expect(taken.outboxPath == empty)
        try taken.close()
    }
}
