// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import Foundation
import GRDB
import StoreFormat
import Testing

@testable import Sinks

/// Stores with one odd cell: SQLite does not enforce column types, so any cell may hold anything.
/// The reader must never trap, skip only the row it cannot read (named by row id, never by value),
/// and read everything else.
@Suite struct DamagedStoreTests {
    /// A store holding the six vectors (rows 1…6), then `damage` run on it with SQLite directly.
    static func damagedStore(_ dir: ScratchDirectory, _ damage: String) throws -> String {
        let path = dir.path("d.db")
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        try store.insert(contentsOf: try vectorRecords())
        try store.finish()
        var config = Configuration()
        config.foreignKeysEnabled = false
        let q = try DatabaseQueue(path: path, configuration: config)
        try q.writeWithoutTransaction { try $0.execute(sql: damage) }
        try q.close()
        return path
    }

    /// Reads the damaged store as `cuff history` does: read-only, every row that can be read printed.
    static func read(_ path: String) throws -> (StoreRecords, [SinkWarning], [String]) {
        let store = try SQLiteStore(path: path, mustExist: true, readOnly: true, warn: SinkWarnings.ignore)
        let r = try store.readRecords()
        try store.finish()
        let w = WarningCollector()
        r.warn(w.handler, store: path)
        let out = MemoryOutput()
        let sink = NDJSONSink(output: out)
        for e in r.entries { try sink.write(.measurement(e.record)) }
        return (r, w.warnings, out.lines)
    }

    /// Every odd cell the issue names, and a few more, each in row 2 of six.
    static let oddCells: [(damage: String, column: String, secret: String)] = [
        ("UPDATE measurements SET systolic = 'sys-secret-120' WHERE id = 2", "systolic", "sys-secret-120"),
        ("UPDATE measurements SET received_at_us = 'when-secret' WHERE id = 2", "received_at_us", "when-secret"),
        ("UPDATE measurements SET stored = 'stored-secret' WHERE id = 2", "stored", "stored-secret"),
        ("UPDATE measurements SET decoded = X'DEADBEEF' WHERE id = 2", "decoded", "DEADBEEF"),
        ("UPDATE measurements SET raw = 'raw-secret' WHERE id = 2", "raw", "raw-secret"),
        ("UPDATE measurements SET systolic_raw = 70000 WHERE id = 2", "systolic_raw", "70000"),
        ("UPDATE measurements SET quirks = 4096 WHERE id = 2", "quirks", "4096"),
        (
            "UPDATE measurements SET host_utc_offset = 9223372036854775807 WHERE id = 2", "host_utc_offset",
            "9223372036854775807"
        ),
        ("UPDATE measurements SET received_at_us = -5 WHERE id = 2", "received_at_us", "-5"),
        (
            "PRAGMA ignore_check_constraints = ON; UPDATE measurements SET unit = 'furlongs' WHERE id = 2", "unit",
            "furlongs"
        ),
        ("UPDATE measurements SET characteristic = 'ZZZZ' WHERE id = 2", "characteristic", "ZZZZ"),
        ("UPDATE measurements SET user_id = 3.5 WHERE id = 2", "user_id", "3.5"),
        ("UPDATE measurements SET dedup_key = X'1717' WHERE id = 2", "dedup_key", "1717"),
    ]

    @Test(arguments: oddCells.indices)
    func oneOddCellSkipsItsRowOnlyAndNamesNoValue(_ i: Int) throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let odd = Self.oddCells[i]
        let path = try Self.damagedStore(dir, odd.damage)
        let (r, warnings, lines) = try Self.read(path)
        #expect(r.entries.map(\.stored.id) == [1, 3, 4, 5, 6], "\(odd.damage)")
        #expect(r.skipped.map(\.rowID) == [2])
        #expect(r.skipped.first?.column == odd.column, "\(r.skipped)")
        #expect(lines.count == 5)
        #expect(warnings.count == 1)
        // The store's path (random: "/tmp/cuff-5…" holds the secret "-5") is named, so left out.
        let text = warnings.map(\.description).joined(separator: "\n").replacingOccurrences(of: dir.root, with: "…")
        #expect(text.contains("row 2"), "\(text)")
        // No value of the row: not the odd one, nor the device's serial or the reading's values.
        for secret in [odd.secret, "SN42", "BPM-1", "AA:BB:CC:DD:EE:FF", "mmHg", "120"] {
            #expect(!text.contains(secret), "\(text)")
        }
        // The strict reader names the row instead of trapping.
        let store = try SQLiteStore(path: path, mustExist: true, readOnly: true, warn: SinkWarnings.ignore)
        let err = #expect(throws: SinkError.self) { try store.history() }
        #expect(err.map { "\($0)" }?.contains("row 2") == true)
    }

    @Test func aBlobAddressInTheDeviceRowSkipsThatDevicesRows() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        // Every vector has the one device: all six rows go, each named; nothing traps.
        let path = try Self.damagedStore(dir, "UPDATE devices SET address = X'00FF'")
        let (r, warnings, _) = try Self.read(path)
        #expect(r.entries.isEmpty)
        #expect(r.skipped.map(\.rowID) == [1, 2, 3, 4, 5, 6])
        #expect(r.skipped.allSatisfy { $0.column == "devices.address" })
        #expect(warnings.count == 6)
    }

    @Test func aDroppedColumnIsReadAsNullOrSkipsEveryRowWithOneCappedWarningList() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        // A nullable column dropped: every row still reads.
        let a = try Self.damagedStore(dir, "ALTER TABLE measurements DROP COLUMN pulse_rate_special")
        #expect(try Self.read(a).0.entries.count == 6)
        try FileManager.default.removeItem(atPath: a)
        // A column every row needs: every row is skipped, named, and nothing traps.
        let b = try Self.damagedStore(dir, "ALTER TABLE measurements DROP COLUMN decoded")
        let (r, warnings, lines) = try Self.read(b)
        #expect(r.entries.isEmpty && lines.isEmpty)
        #expect(r.skipped.count == 6 && r.skipped.allSatisfy { $0.kind == .missingColumn && $0.column == "decoded" })
        #expect(warnings.count == 6)
    }

    /// A `devices` column dropped: the history still runs. Without `address` each row is skipped,
    /// named by the column; without `name` the rows read with no name.
    @Test func aDroppedDeviceColumnIsReadAsNullOrSkipsTheRows() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let a = try Self.damagedStore(dir, "ALTER TABLE devices DROP COLUMN address")
        let (r, warnings, lines) = try Self.read(a)
        #expect(r.entries.isEmpty && lines.isEmpty)
        #expect(
            r.skipped.count == 6 && r.skipped.allSatisfy { $0.kind == .missingColumn && $0.column == "devices.address" }
        )
        #expect(warnings.count == 6)
        try FileManager.default.removeItem(atPath: a)
        let b = try Self.damagedStore(dir, "ALTER TABLE devices DROP COLUMN name")
        let (rb, _, _) = try Self.read(b)
        #expect(rb.entries.count == 6 && rb.skipped.isEmpty)
        #expect(
            rb.entries.allSatisfy { $0.record.device.name == nil && $0.record.device.address == "AA:BB:CC:DD:EE:FF" })
    }

    @Test func manyUnreadableRowsAreNamedUpTo20ThenCounted() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("d.db")
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        var records: [MeasurementRecord] = []
        for n in 0..<30 {
            records.append(
                try Vectors.bpm(
                    Vectors.kPa, at: EventTime(monotonic: .zero, wallMicros: Vectors.receivedMicros + Int64(n) * 1000)))
        }
        try store.insert(contentsOf: records)
        try store.finish()
        let q = try DatabaseQueue(path: path)
        try q.write { try $0.execute(sql: "UPDATE measurements SET stored = 'x'") }
        try q.close()
        let (r, warnings, _) = try Self.read(path)
        #expect(r.skipped.count == 30)
        #expect(warnings.count == 21)
        #expect(warnings.last?.message.contains("10 more") == true)
    }

    @Test func aMeasurementWhoseDeviceRowIsMissingIsShown() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = try Self.damagedStore(dir, "DELETE FROM devices")
        let (r, warnings, lines) = try Self.read(path)
        #expect(r.entries.count == 6 && lines.count == 6 && r.skipped.isEmpty)
        #expect(r.withoutDevice == 6)
        #expect(r.entries.allSatisfy { $0.record.device.address.isEmpty && $0.record.device.serial == nil })
        #expect(warnings.count == 1 && warnings[0].message.contains("6 measurements have no device row"))
        // The outbox does not ship a reading it cannot attribute; it says which.
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        let err = #expect(throws: SinkError.self) { try store.pending(limit: 10) }
        #expect(err.map { "\($0)" }?.contains("row 1: its device row is missing") == true)
    }

    @Test func rawBytesThatNoLongerDecodeSkipTheirRowOnly() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = try Self.damagedStore(dir, "UPDATE measurements SET raw = X'1E8A' WHERE id = 3")
        let (r, warnings, _) = try Self.read(path)
        #expect(r.entries.map(\.stored.id) == [1, 2, 4, 5, 6])
        #expect(r.skipped.map(\.rowID) == [3] && r.skipped.first?.column == "raw")
        #expect(warnings.first?.message.contains("row 3: the raw value does not decode") == true)
    }

    @Test func aReadOnlyOpenOfAnEmptyFileWritesNothing() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("empty.db")
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]))
        let store = try SQLiteStore(path: path, mustExist: true, readOnly: true, warn: SinkWarnings.ignore)
        #expect(try store.readHistory().rows.isEmpty)
        #expect(try store.history().isEmpty)
        try store.finish()
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0)
        #expect(
            !FileManager.default.fileExists(atPath: path + "-wal")
                && !FileManager.default.fileExists(atPath: path + "-journal"))
        // Through the history printer (what `cuff history` runs): 0 measurements, the file untouched.
        let out = MemoryOutput()
        let report = try SinkFactory.printHistory(
            storePath: path, options: SinkConfiguration(), output: out, warn: SinkWarnings.ignore)
        #expect(report == HistoryReport(printed: 0, skipped: 0))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0)
    }

    @Test func aReadOnlyOpenLeavesAStoreByteForByte() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = try Self.damagedStore(dir, "UPDATE measurements SET systolic = 'x' WHERE id = 2")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        _ = try Self.read(path)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func anotherProgramsDatabaseIsNotReadAsAStore() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("other.db")
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]))
        let q = try DatabaseQueue(path: path)
        try q.write { try $0.execute(sql: "CREATE TABLE notes (t TEXT)") }
        try q.close()
        let err = #expect(throws: SinkError.self) {
            try SQLiteStore(path: path, mustExist: true, readOnly: true, warn: SinkWarnings.ignore)
        }
        #expect(err.map { "\($0)" }?.contains("not a cuff store") == true)
    }

    @Test func knownKeysAndSequenceNumbersIgnoreDamagedCells() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = try Self.damagedStore(
            dir,
            """
            UPDATE measurements SET dedup_key = X'01' WHERE id = 1;
            UPDATE measurements SET sequence_number = 'seven' WHERE id = 4;
            """)
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        #expect(try store.knownKeys().count == 5)
        #expect(try store.lastSequenceNumber(address: Vectors.device.address) == 7)
    }

    @Test func storeErrorsAndWarningsNameNoReading() throws {
        // A dedup key holds the device, user, time stamp and raw words: never in a message.
        let key = try Vectors.bpm(Vectors.mmHgFull).dedupKey
        #expect(key.contains("|user:"))
        let e = SinkError.storeWrite(path: "/x/w.db", dedupKey: key, reason: "13 (database or disk is full)")
        #expect(!e.description.contains(key) && e.description.contains("database or disk is full"))
        let w = SinkWarning(sink: "store", message: "the record's values do not match", dedupKey: key)
        #expect(!w.description.contains(key) && !w.description.contains("|user:"))
    }
}

/// An outbox's claim (`outbox_destination`) as damage or another program may leave it: never a
/// trap, and a claim that names a destination is kept.
@Suite struct DamagedOutboxClaimTests {
    static func outbox(_ dir: ScratchDirectory, rows: Int, _ damage: String) throws -> SQLiteStore {
        let path = dir.path("o-\(UUID().uuidString.prefix(6)).db")
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        if rows > 0 { try store.insert(contentsOf: Array(try vectorRecords().prefix(rows))) }
        try store.finish()
        let q = try DatabaseQueue(path: path)
        try q.writeWithoutTransaction { try $0.execute(sql: damage) }
        try q.close()
        return try SQLiteStore(path: path, warn: SinkWarnings.ignore)
    }

    @Test func oddClaimRows() throws {
        let dir = try ScratchDirectory()
        let made = "CREATE TABLE outbox_destination (destination);"
        // No usable row (none, NULL only): claimed anew, and that claim holds from then on.
        for damage in [made, made + "INSERT INTO outbox_destination VALUES (NULL);"] {
            let s = try Self.outbox(dir, rows: 1, damage)
            #expect(try s.claimOutbox(for: "home") == .claimed, "\(damage)")
            #expect(try s.claimOutbox(for: "lab") == .heldFor("home", waiting: 1), "\(damage)")
            try s.finish()
        }
        // A number, a blob: read as text, and held for it.
        let n = try Self.outbox(dir, rows: 1, made + "INSERT INTO outbox_destination VALUES (42);")
        #expect(try n.claimOutbox(for: "lab") == .heldFor("42", waiting: 1))
        try n.finish()
        let b = try Self.outbox(dir, rows: 0, made + "INSERT INTO outbox_destination VALUES (x'686f6d65');")
        #expect(try b.claimOutbox(for: "home") == .claimed)
        try b.finish()
        // Two rows: the first one made counts.
        let two = try Self.outbox(
            dir, rows: 2,
            made + "INSERT INTO outbox_destination VALUES ('home'); INSERT INTO outbox_destination VALUES ('lab');")
        #expect(try two.claimOutbox(for: "lab") == .heldFor("home", waiting: 2))
        #expect(try two.claimOutbox(for: "home") == .claimed)
        try two.finish()
        // A view in its place: an error that names the outbox, no trap.
        let v = try Self.outbox(dir, rows: 0, "CREATE VIEW outbox_destination AS SELECT 1 AS destination;")
        #expect {
            try v.claimOutbox(for: "home")
        } throws: { e in
            guard case let .storeOpen(path, reason) = e as? SinkError else { return false }
            return path == v.path && reason.hasPrefix("cannot claim it as an outbox")
        }
        try v.finish()
    }
}

/// A store's file removed or replaced while a process has it open (probe M: `rm w.db` under a
/// running watch, and 95 readings confirmed to cuffs went into a file nobody can open again).
@Suite struct RemovedStoreFileTests {
    @Test func aRemovedStoreOrLogTakesNothingMore() throws {
        let dir = try ScratchDirectory()
        let records = try vectorRecords()
        for removed in ["", "-wal"] {
            let path = dir.path("s\(removed.isEmpty ? "main" : "wal").db")
            let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
            #expect(try store.insert(records[0]).isNew)
            try FileManager.default.removeItem(atPath: path + removed)
            for m in [records[1], records[1]] {  // (and again: a retry is not taken as already kept)
                #expect {
                    try store.insert(m)
                } throws: { e in
                    guard case let .storeWrite(p, _, reason) = e as? SinkError else { return false }
                    return p == path && reason.contains("while cuff had the store open")
                        && reason.contains(removed.isEmpty ? "the file is gone" : "write-ahead log")
                }
            }
            #expect(throws: SinkError.self) { try store.insert(contentsOf: [records[2]]) }
            try? store.finish()
        }
        // Replaced by another file at the same path: the same.
        let path = dir.path("replaced.db")
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        try FileManager.default.removeItem(atPath: path)
        try Data().write(to: URL(fileURLWithPath: path))
        #expect(throws: SinkError.self) { try store.insert(records[0]) }
        try? store.finish()
    }

    /// Probe D3: readings confirmed before `mv bp.db bp-archive.db` stayed in `bp.db-wal`, which
    /// SQLite does not checkpoint into a moved file at close; the next store made at the path
    /// deleted that log, and every one of them was lost. They are now in the moved file: when
    /// the next write finds the move, or at the end (a SIGTERM with no reading since), and a
    /// removed log's readings are in the store file.
    @Test(arguments: ["next write", "end", "removed log"])
    func whatWasKeptBeforeAMoveIsInTheMovedFile(found: String) throws {
        let dir = try ScratchDirectory()
        let records = try vectorRecords()
        let path = dir.path("bp.db"), archive = dir.path("bp-archive.db")
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        for m in records.prefix(3) { #expect(try store.insert(m).isNew) }
        if found == "removed log" {
            try FileManager.default.removeItem(atPath: path + "-wal")
        } else {
            try FileManager.default.moveItem(atPath: path, toPath: archive)
        }
        if found != "end" { #expect(throws: SinkError.self) { try store.insert(records[3]) } }
        try store.finish()
        // The restart the message asks for: a new store at the path (SQLite then deletes a log
        // left beside it that is not its own).
        if found != "removed log" {
            let again = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
            #expect(try again.readRecords().entries.isEmpty)
            try again.finish()
        }
        let kept = try SQLiteStore(
            path: found == "removed log" ? path : archive, mustExist: true, readOnly: true, warn: SinkWarnings.ignore)
        // (With the log removed, the write that found it gone went into it first: kept too, though
        // not confirmed.)
        #expect(
            try kept.readRecords().entries.map(\.record.raw)
                == records.prefix(found == "removed log" ? 4 : 3).map(\.raw))
        try kept.finish()
    }
}

/// Probe D3: 40 bytes flipped in a store broke its dedup index; `watch` kept taking readings into
/// it and confirming them (26), while `cuff history` could read none back, and dedup cannot hold
/// on a broken index. A store SQLite's quick check finds damaged is now refused for writing.
@Suite struct DamagedIndexStoreTests {
    @Test func aStoreWithADamagedIndexTakesNothing() throws {
        let dir = try ScratchDirectory()
        let path = dir.path("bp.db")
        let records = try vectorRecords()
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        for m in records { _ = try store.insert(m) }
        try store.finish()
        // The dedup index's root page overwritten (the table itself left whole).
        let (root, pageSize) = try DatabaseQueue(path: path).read { db in
            (
                try Int.fetchOne(
                    db, sql: "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'measurements'")
                    ?? 0,
                try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            )
        }
        #expect(root > 1 && pageSize >= 512)
        let h = try #require(FileHandle(forUpdatingAtPath: path))
        try h.seek(toOffset: UInt64((root - 1) * pageSize + 8))
        h.write(Data(repeating: 0xA5, count: 64))
        try h.close()
        #expect {
            try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        } throws: { e in
            guard case let .storeOpen(p, reason) = e as? SinkError else { return false }
            return p == path && reason.hasPrefix("the store is damaged (SQLite's quick check: ")
                && reason.contains("REINDEX")
        }
        // What `sqlite3 PATH 'REINDEX;'` does makes it whole again, every reading still there.
        try DatabaseQueue(path: path).write { try $0.execute(sql: "REINDEX") }
        let again = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        #expect(try again.readRecords().entries.count == records.count)
        #expect(try again.insert(records[0]).isNew == false)
        try again.finish()
    }
}
