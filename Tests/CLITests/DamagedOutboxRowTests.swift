// SPDX-License-Identifier: GPL-2.0-or-later
import CuffTestSupport
import Foundation
import GRDB
import PostgresTestCluster
import Testing

/// Probe Y: one outbox row that cannot be read (a damaged cell) held back every later reading,
/// from the broker and from the server alike; `cuff watch` went on taking readings it never sent.
/// Such a row now stays in the outbox, named; the others are shipped; `cuff sync` says why one
/// stays (not "the broker did not answer") and exits 10, as for an outbox that cannot be read.
@Suite("An outbox row that cannot be read")
struct DamagedOutboxRowTests {
    static let capture = CLI.packageRoot.appendingPathComponent("captures/stored-records-bps-1.1.btsnoop").path

    /// Fills `outbox` through `target` while nothing answers there, then damages its first row.
    static func damagedOutbox(_ outbox: String, _ target: [String]) throws -> Int {
        let r = try CLI.run(["replay", capture, "--quiet", "--outbox", outbox] + target)
        #expect(r.status == 0 || r.status == 9, "\(r.stderr)")
        let q = try DatabaseQueue(path: outbox)
        defer { try? q.close() }
        return try q.write { db in
            try db.execute(
                sql: "UPDATE measurements SET systolic = 'abc' WHERE id = (SELECT min(id) FROM measurements)")
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM measurements") ?? 0
        }
    }

    static func left(_ outbox: String) throws -> Int {
        let q = try DatabaseQueue(path: outbox)
        defer { try? q.close() }
        return try q.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM measurements") ?? -1 }
    }

    @Test func mqttSyncPublishesTheOthersAndNamesTheRow() throws {
        let broker = try MosquittoBroker()
        let closed = MosquittoBroker.freePort()
        let outbox = broker.dir + "/o.db"
        let waiting = try Self.damagedOutbox(outbox, ["--publish", "mqtt://127.0.0.1:\(closed)/t"])
        #expect(waiting > 2)
        let url = "mqtt://\(broker.user):\(broker.password)@127.0.0.1:\(broker.port)/t"
        let started = Date()
        let r = try CLI.run(["sync", "--publish", url, "--outbox", outbox], timeout: 60)
        #expect(r.status == 10, "\(r.stderr)")
        #expect(r.stderr.contains("published \(waiting - 1) readings"), "\(r.stderr)")
        #expect(r.stderr.contains("column systolic holds text, not a number"), "\(r.stderr)")
        #expect(!r.stderr.contains("did not answer"), "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 30)
        #expect(try Self.left(outbox) == 1)
    }

    @Test func postgresSyncShipsTheOthersAndNamesTheRow() throws {
        if let why = TestCluster.unavailable {
            print("skipped: \(why)")
            return
        }
        let c = try TestCluster()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-dmg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = dir + "/o.db"
        try c.stop()
        let waiting = try Self.damagedOutbox(outbox, ["--store", c.url()])
        try c.start()
        #expect(waiting > 2)
        let r = try CLI.run(["sync", "--store", c.url(), "--outbox", outbox], timeout: 60)
        #expect(r.status == 10, "\(r.stderr)")
        #expect(r.stderr.contains("shipped \(waiting - 1) readings"), "\(r.stderr)")
        #expect(r.stderr.contains("column systolic holds text, not a number"), "\(r.stderr)")
        #expect(try Self.left(outbox) == 1)
        let h = try CLI.run(["history", "--store", c.url()])
        #expect(h.status == 0 && h.stdoutLines.count == waiting - 1, "\(h.stderr)")
    }
}
