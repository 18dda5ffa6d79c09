// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Foundation
import GRDB
import Testing

@testable import Sinks

/// `--store-key-file`: a store whose file, WAL and journal hold no reading in the clear.
@Suite("Encrypted store")
struct EncryptedStoreTests {
    static func tempDir() throws -> String {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-enc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    /// A spread of records: every vector, a stored 2B36 record, two devices, a special value.
    static func records() throws -> [MeasurementRecord] {
        var out = [
            try Vectors.bpm(Vectors.mmHgFull), try Vectors.bpm(Vectors.kPa), try Vectors.bpm(Vectors.errorFrame),
            try Vectors.bpm(Vectors.withDateTime), try Vectors.enhancedRecord(),
            try Vectors.enhancedRecord(sequenceNumber: 7),
        ]
        // Names long enough that random bytes never hold them by chance (a 2-byte name would be
        // found in any 100 kB of ciphertext).
        let device = DeviceInfo(
            address: "AA:BB:CC:DD:EE:FF", name: "BPM-One-Cuff", manufacturer: "Acme Medical", model: "Model-M7-Pro",
            serial: "SERIAL-424242", firmware: "1.0.77")
        for i in out.indices { out[i].device = device }
        let other = DeviceInfo(address: "11:22:33:44:55:66", name: "Other cuff", serial: "XSERIAL-991")
        out.append(
            try Vectors.bpm(
                Vectors.withDateTime, device: other,
                at: EventTime(monotonic: .seconds(1), wallMicros: Vectors.receivedMicros + 9_000_000)))
        return out
    }

    /// Every file of the store: the database, its WAL and shared memory, a rollback journal.
    static func files(_ path: String) -> [Data] {
        ["", "-wal", "-shm", "-journal"].compactMap { FileManager.default.contents(atPath: path + $0) }
    }

    /// What a reading holds, as text and as bytes: none of it may be found in an encrypted store.
    static func secrets(_ records: [MeasurementRecord]) -> [(String, Data)] {
        var out: [(String, Data)] = []
        for m in records {
            for t in [
                m.device.address, m.device.name, m.device.serial, m.device.manufacturer, m.device.model, m.timestamp,
                m.receivedAt.iso8601, Hex.encode(m.raw), m.dedupKey, "\"systolic\":",
            ].compactMap({ $0 }) {
                out.append((t, Data(t.utf8)))
            }
            out.append(("raw bytes \(Hex.encode(m.raw))", Data(m.raw)))
        }
        return out
    }

    @Test func nothingAReadingHoldsIsInTheFilesAndHistoryIsThePlainStores() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = try StoreKey.create(path: dir + "/k")
        let records = try Self.records()
        let sealed = try SQLiteStore(path: dir + "/e.db", key: key, utcOffset: .fixed(3600), warn: SinkWarnings.ignore)
        let plain = try SQLiteStore(path: dir + "/p.db", utcOffset: .fixed(3600), warn: SinkWarnings.ignore)
        #expect(sealed.isEncrypted && !plain.isEncrypted)
        for m in records {
            #expect(try sealed.insert(m).isNew)
            #expect(try plain.insert(m).isNew)
        }
        #expect(try sealed.insert(records[0]) == .duplicate)  // deduplicated by its tag
        // Before closing (the WAL holds the rows) and after (checkpointed into the file).
        for when in ["open", "closed"] {
            let blobs = Self.files(dir + "/e.db")
            #expect(!blobs.isEmpty)
            for (name, needle) in Self.secrets(records) where needle.count >= 6 {
                #expect(
                    !blobs.contains { $0.range(of: needle) != nil }, "\(name) found in the encrypted store (\(when))")
            }
            // The plain store does hold them: the search can find what it looks for.
            #expect(Self.files(dir + "/p.db").contains { $0.range(of: Data("SERIAL-424242".utf8)) != nil })
            if when == "open" { try sealed.finish(); try plain.finish() }
        }
        let e = try SQLiteStore(path: dir + "/e.db", mustExist: true, key: key, warn: SinkWarnings.ignore)
        let p = try SQLiteStore(path: dir + "/p.db", mustExist: true, warn: SinkWarnings.ignore)
        var eh = try e.history(), ph = try p.history()
        for i in eh.indices { eh[i].id = 0 }
        for i in ph.indices { ph[i].id = 0 }
        #expect(eh == ph)
        #expect(
            try e.records().map { SessionOutput.measurement($0).json.serialized() }
                == p.records().map { SessionOutput.measurement($0).json.serialized() })
        #expect(try e.knownKeys() == p.knownKeys())
        #expect(try e.lastSequenceNumber(address: "AA:BB:CC:DD:EE:FF") == 7)
        #expect(Self.secrets(records).filter { $0.1.count >= 6 }.count > 60)
        #expect(try e.recordedOffsets() == p.recordedOffsets())
    }

    /// The store's files, byte for byte, to show a refusal changed nothing.
    static func snapshot(_ path: String) -> [Data?] {
        ["", "-wal", "-shm"].map { FileManager.default.contents(atPath: path + $0) }
    }

    @Test func wrongKeyNoKeyAndAKeyForAPlainStoreAreRefusedAndChangeNothing() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = try StoreKey.create(path: dir + "/k")
        let other = try StoreKey.create(path: dir + "/other")
        let s = try SQLiteStore(path: dir + "/e.db", key: key, warn: SinkWarnings.ignore)
        try s.insert(try Vectors.bpm(Vectors.mmHgFull))
        try s.finish()
        let p = try SQLiteStore(path: dir + "/p.db", warn: SinkWarnings.ignore)
        try p.insert(try Vectors.bpm(Vectors.mmHgFull))
        try p.finish()
        let before = (Self.snapshot(dir + "/e.db"), Self.snapshot(dir + "/p.db"))
        func refused(_ body: () throws -> SQLiteStore, _ words: String) {
            do {
                _ = try body()
                Issue.record("opened; expected a refusal saying \(words)")
            } catch let e as SinkError {
                guard case .storeKey = e else { Issue.record("\(e)"); return }
                #expect(e.description.contains(words), "\(e)")
            } catch { Issue.record("\(error)") }
        }
        refused({ try SQLiteStore(path: dir + "/e.db", mustExist: true, key: other) }, "another key")
        refused({ try SQLiteStore(path: dir + "/e.db", mustExist: true) }, "is encrypted")
        refused({ try SQLiteStore(path: dir + "/p.db", mustExist: true, key: key) }, "is not encrypted")
        #expect(Self.snapshot(dir + "/e.db") == before.0)
        #expect(Self.snapshot(dir + "/p.db") == before.1)
    }

    @Test func aChangedByteIsDetectedNotRead() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = try StoreKey.create(path: dir + "/k")
        let s = try SQLiteStore(path: dir + "/e.db", key: key, warn: SinkWarnings.ignore)
        for m in try Self.records() { try s.insert(m) }
        let all = try s.history()
        try s.finish()
        // Flip one bit of each place a row keeps: its sealed value (nonce, ciphertext, tag) and its
        // dedup tag; and swap two rows' sealed values.
        for (column, offset) in [("sealed", 0), ("sealed", 20), ("sealed", -1), ("dedup_tag", 3), ("swap", 0)] {
            let copy = dir + "/t-\(column)\(offset).db"
            try FileManager.default.copyItem(atPath: dir + "/e.db", toPath: copy)
            let q = try DatabaseQueue(path: copy)
            try q.write { db in
                if column == "swap" {
                    let a = try Data.fetchOne(db, sql: "SELECT sealed FROM sealed_measurements WHERE id = 1")!
                    let b = try Data.fetchOne(db, sql: "SELECT sealed FROM sealed_measurements WHERE id = 2")!
                    try db.execute(sql: "UPDATE sealed_measurements SET sealed = ? WHERE id = 1", arguments: [b])
                    try db.execute(sql: "UPDATE sealed_measurements SET sealed = ? WHERE id = 2", arguments: [a])
                    return
                }
                var v = [UInt8](try Data.fetchOne(db, sql: "SELECT \(column) FROM sealed_measurements WHERE id = 3")!)
                let i = offset < 0 ? v.count + offset : offset
                v[i] ^= 0x01
                try db.execute(sql: "UPDATE sealed_measurements SET \(column) = ? WHERE id = 3", arguments: [Data(v)])
            }
            try q.close()
            // The changed rows are skipped, named (probe X: one of them hid the whole history);
            // the others are read; a rotation refuses the store and changes nothing.
            let t = try SQLiteStore(path: copy, mustExist: true, key: key, warn: SinkWarnings.ignore)
            let r = try t.readHistory()
            let bad: Set<Int64> = column == "swap" ? [1, 2] : [3]
            #expect(Set(r.skipped.map(\.rowID)) == bad, "\(column)")
            #expect(r.skipped.allSatisfy { $0.kind == .doesNotAuthenticate && $0.column == "sealed" })
            #expect(r.rows.count == all.count - bad.count && r.rows.allSatisfy { !bad.contains($0.id) })
            #expect(Set(r.rows.map(\.dedupKey)) == Set(all.filter { !bad.contains($0.id) }.map(\.dedupKey)))
            #expect(throws: SinkError.self) { try t.history() }
            try t.finish()
            let other = try StoreKey.create(path: dir + "/k-\(column)\(offset)")
            let before = Self.snapshot(copy)
            #expect(throws: SinkError.storeTampered(path: copy, rowID: column == "swap" ? 1 : 3)) {
                try SQLiteStore.rotateKey(path: copy, from: key, to: other)
            }
            #expect(Self.snapshot(copy) == before)
        }
    }

    /// Probe X: a rotation while a writer had the store open re-sealed the rows under the new key,
    /// then the writer sealed its next reading under the old one, and neither key opened the store.
    /// The writer now refuses (nothing stored, so nothing confirmed) and the store opens with the new key.
    @Test func aWriterOpenDuringARotationStoresNothingUnderTheOldKey() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = try StoreKey.create(path: dir + "/old")
        let new = try StoreKey.create(path: dir + "/new")
        let records = try Self.records()
        let writer = try SQLiteStore(path: dir + "/e.db", key: old, warn: SinkWarnings.ignore)
        try writer.insert(records[0])
        #expect(try SQLiteStore.rotateKey(path: dir + "/e.db", from: old, to: new) == 1)
        #expect { try writer.insert(records[1]) } throws: { "\($0)".contains("its key was changed (cuff key rotate)") }
        #expect { try writer.insert(contentsOf: [records[2]]) } throws: { "\($0)".contains("its key was changed") }
        try writer.finish()
        let r = try SQLiteStore(path: dir + "/e.db", mustExist: true, key: new, warn: SinkWarnings.ignore)
        let rows = try r.readHistory()
        #expect(rows.skipped.isEmpty && rows.rows.map(\.dedupKey) == [records[0].dedupKey])
    }

    @Test func rotationReSealsUnderTheNewKeyOnly() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = try StoreKey.create(path: dir + "/old")
        let new = try StoreKey.create(path: dir + "/new")
        let s = try SQLiteStore(path: dir + "/e.db", key: old, warn: SinkWarnings.ignore)
        for m in try Self.records() { try s.insert(m) }
        let before = try s.history()
        try s.finish()
        #expect(try SQLiteStore.rotateKey(path: dir + "/e.db", from: old, to: new) == before.count)
        #expect(throws: SinkError.self) { try SQLiteStore(path: dir + "/e.db", mustExist: true, key: old) }
        let r = try SQLiteStore(path: dir + "/e.db", mustExist: true, key: new, warn: SinkWarnings.ignore)
        #expect(try r.history() == before)
        // Still deduplicated under the new key.
        #expect(try r.insert(try Self.records()[2]) == .duplicate)
    }

    @Test func keyFiles() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let k = try StoreKey.create(path: dir + "/k")
        let text = try String(contentsOfFile: dir + "/k", encoding: .utf8)
        #expect(text.count == 65 && text.hasSuffix("\n"))
        let attrs = try FileManager.default.attributesOfItem(atPath: dir + "/k")
        #expect((attrs[.posixPermissions] as? Int) == 0o600)
        #expect(throws: SinkError.self) { try StoreKey.create(path: dir + "/k") }  // never overwritten
        #expect(try String(contentsOfFile: dir + "/k", encoding: .utf8) == text)
        #expect(try StoreKey.load(path: dir + "/k").path == k.path)
        // A key file others can read, a symlink, not a key, missing: each refused with its reason.
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: dir + "/k")
        #expect { try StoreKey.load(path: dir + "/k") } throws: { "\($0)".contains("mode 640") }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: dir + "/k")
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/k")
        #expect { try StoreKey.load(path: dir + "/link") } throws: { "\($0)".contains("not a regular file") }
        FileManager.default.createFile(
            atPath: dir + "/junk", contents: Data("not a key\n".utf8), attributes: [.posixPermissions: 0o600])
        #expect { try StoreKey.load(path: dir + "/junk") } throws: { "\($0)".contains("not a cuff key") }
        #expect { try StoreKey.load(path: dir + "/missing") } throws: { "\($0)".contains("no such file") }
    }
}
