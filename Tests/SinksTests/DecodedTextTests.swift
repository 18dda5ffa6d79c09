// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import GRDB
import Testing

@testable import Sinks

/// The store's `decoded` column, written straight from the record, is the text the JSON value
/// serialises to, for every kind of record.
@Suite struct DecodedTextTests {
    @Test func decodedTextIsTheSerialisedJSON() throws {
        var withWarnings = try Vectors.bpm("1E 78 00 50 00 5D 00 E8 07 06 17 0E 23 0A 48 00 01 00 00 FF")
        #expect(!withWarnings.warnings.isEmpty, "trailing byte: a warning")
        var readBack = try Vectors.bpm(Vectors.withDateTime)
        readBack.decoded = .object([
            ("type", .string("measurement")), ("note", .string("quote \" backslash \\ tab \t ä 血圧 \u{1}")),
            ("n", .double(18.9)), ("whole", .double(127)), ("tiny", .double(1e-05)), ("i", .int(-42)),
            ("list", .array([.null, .bool(true), .object([])])), ("empty", .array([])),
        ])
        withWarnings.stored = true
        let records = [
            try Vectors.bpm(Vectors.kPa), try Vectors.bpm(Vectors.errorFrame), try Vectors.bpm(Vectors.withDateTime),
            try Vectors.enhancedRecord(), try Vectors.enhancedRecord(sequenceNumber: 300), withWarnings, readBack,
        ]
        let buffer = NDJSONLineBuffer(capacity: 16)  // (grown as needed)
        for m in records + records {  // twice: the buffer is reused
            #expect(buffer.decodedText(of: m) == m.decoded.serialized())
        }
        #expect(buffer.byteCount == 0)
    }

    @Test func theStoreKeepsTheSerialisedJSON() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        let records = [try Vectors.bpm(Vectors.kPa), try Vectors.enhancedRecord()]
        for m in records { try store.insert(m) }
        let rows = try store.db.read { db in
            try String.fetchAll(db, sql: "SELECT decoded || '|' || warnings FROM measurements ORDER BY id")
        }
        #expect(rows == records.map { $0.decoded.serialized() + "|" + $0.warnings.json.serialized() })
    }
}
