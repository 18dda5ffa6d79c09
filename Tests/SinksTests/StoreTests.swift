// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import Foundation
import Testing

@testable import Sinks

func fileMode(_ path: String) -> UInt32? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return UInt32(st.st_mode) & 0o7777
}

/// The public vectors as records, with distinct reception times.
func vectorRecords() throws -> [MeasurementRecord] {
    func at(_ n: Int64) -> EventTime {
        EventTime(monotonic: .seconds(Double(n)), wallMicros: Vectors.receivedMicros + n * 1_000_000)
    }
    return [
        try Vectors.bpm(Vectors.mmHgFull, at: at(0)),
        try Vectors.bpm(Vectors.kPa, at: at(1)),
        try Vectors.bpm(Vectors.errorFrame, at: at(2)),
        try Vectors.enhancedRecord(at: at(3)),
        try Vectors.bpm(Vectors.withDateTime, at: at(4), stored: true),
        try Vectors.enhancedRecord(sequenceNumber: 7, at: at(5)),
    ]
}

@Suite struct SQLiteStoreTests {
    @Test func newStoreFileAndItsWALAreMode600() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("cuff.db")
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        #expect(fileMode(path) == 0o600)
        try store.write(.measurement(try Vectors.bpm(Vectors.mmHgFull)))
        #expect(fileMode(path + "-wal") == 0o600)
        #expect(fileMode(path + "-shm") == 0o600)
        try store.finish()
    }

    /// A directory given as the store is named as one, with no chmod hint (probe U: following
    /// "chmod 600 DIR" made the directory unusable).
    @Test func aDirectoryIsNamedAsOne() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let err = #expect(throws: SinkError.self) {
            try SQLiteStore(path: dir.root, mustExist: true, readOnly: true, warn: SinkWarnings.ignore)
        }
        #expect(
            err?.description
                == "store \(dir.root) is a directory; give the path of a store file (e.g. \(dir.root)/bp.sqlite)")
    }

    @Test func groupReadableStoreIsRefused() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("open.db")
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644]))
        #expect(fileMode(path) == 0o644)
        let err = #expect(throws: SinkError.self) { try SQLiteStore(path: path, warn: SinkWarnings.ignore) }
        guard case let .insecureStoreFile(p, mode) = err else {
            Issue.record("wrong error \(String(describing: err))"); return
        }
        #expect(p == path)
        #expect(mode & 0o777 == 0o644)
        #expect(err?.description.contains("chmod 600") == true)
        // Once fixed, it opens.
        #expect(chmod(path, 0o600) == 0)
        _ = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
    }

    @Test func looseWALLeftBehindIsRefused() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("d.db")
        #expect(
            FileManager.default.createFile(atPath: path + "-wal", contents: nil, attributes: [.posixPermissions: 0o666])
        )
        #expect(chmod(path + "-wal", 0o666) == 0)
        let err = #expect(throws: SinkError.self) { try SQLiteStore(path: path, warn: SinkWarnings.ignore) }
        guard case let .insecureStoreFile(p, mode) = err else {
            Issue.record("wrong error \(String(describing: err))"); return
        }
        #expect(p == path + "-wal")
        #expect(mode & 0o777 == 0o666)
    }

    @Test func symlinkDirectoryAndMissingFileAreRefused() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let target = dir.path("target.db")
        #expect(FileManager.default.createFile(atPath: target, contents: nil, attributes: [.posixPermissions: 0o600]))
        #expect(symlink(target, dir.path("link.db")) == 0)
        #expect(throws: SinkError.storeOpen(path: dir.path("link.db"), reason: "is a symbolic link")) {
            try SQLiteStore(path: dir.path("link.db"), warn: SinkWarnings.ignore)
        }
        #expect(throws: SinkError.self) { try SQLiteStore(path: dir.root, warn: SinkWarnings.ignore) }
        #expect(throws: SinkError.storeOpen(path: dir.path("none.db"), reason: "no such file")) {
            try SQLiteStore(path: dir.path("none.db"), mustExist: true, warn: SinkWarnings.ignore)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("none.db")))
    }

    /// A FIFO where the store should be: refused at once, read-only (`cuff history`) or not. A
    /// blocking read-only open waits for a writer that never comes.
    @Test func aFIFOIsRefusedWithoutWaiting() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("fifo.db")
        #expect(mkfifo(path, 0o600) == 0)
        for (mustExist, readOnly) in [(true, true), (false, false)] {
            let err = #expect(throws: SinkError.self) {
                try SQLiteStore(path: path, mustExist: mustExist, readOnly: readOnly, warn: SinkWarnings.ignore)
            }
            guard case let .insecureStoreFile(p, mode) = err else {
                Issue.record("wrong error \(String(describing: err))"); return
            }
            #expect(p == path && mode & UInt32(S_IFMT) == UInt32(S_IFIFO))
            #expect(err?.description.contains("is not a regular file") == true)
        }
    }

    @Test func walWithSynchronousFull() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        #expect(try store.pragma("journal_mode") == "wal")
        #expect(try store.pragma("synchronous") == "2")
    }

    @Test func sameRecordTwiceIsOneRow() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        let m = try Vectors.bpm(Vectors.mmHgFull)
        #expect(try store.insert(m).isNew)
        #expect(try store.insert(m) == .duplicate)
        // A retransmission arriving later is the same measurement.
        var again = m
        again.receivedAt = EventTime(monotonic: .seconds(99), wallMicros: m.receivedAt.wallMicros + 30_000_000)
        #expect(try store.insert(again) == .duplicate)
        try store.write(.measurement(m))
        #expect(try store.history().count == 1)
        #expect(try store.insert(try Vectors.bpm(Vectors.kPa)).isNew)
        #expect(try store.history().count == 2)
    }

    @Test func reopenReadsBackIdenticalBytesAndRecords() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("d.db")
        let records = try vectorRecords()
        let w = WarningCollector()
        do {
            let store = try SQLiteStore(path: path, utcOffset: .fixed(3600), warn: w.handler)
            for r in records { try store.write(.measurement(r)) }
            try store.finish()
        }
        #expect(w.warnings.isEmpty)
        let store = try SQLiteStore(path: path, mustExist: true, warn: SinkWarnings.ignore)
        let rows = try store.history()
        #expect(rows.map(\.raw) == records.map(\.raw))
        #expect(rows.map(\.dedupKey) == records.map(\.dedupKey))
        #expect(rows.map(\.hostUTCOffsetSeconds) == Array(repeating: 3600, count: records.count))
        #expect(
            rows.map(\.characteristic) == [
                .bloodPressureMeasurement, .bloodPressureMeasurement, .bloodPressureMeasurement,
                .enhancedBloodPressureMeasurement, .bloodPressureMeasurement, .bloodPressureRecord,
            ])
        #expect(rows[5].sequenceNumber == 7)
        #expect(rows[4].stored && !rows[0].stored)
        #expect(rows[0].device == Vectors.device)
        let back = try store.records()
        #expect(back.count == records.count)
        for (a, b) in zip(back, records) {
            #expect(a.json == b.json)
            #expect(a.dedupKey == b.dedupKey)
            #expect(a.receivedAt.wallMicros == b.receivedAt.wallMicros)
            #expect(a.characteristic == b.characteristic)
            #expect(a.sequenceNumber == b.sequenceNumber)
        }
    }

    @Test func knownKeysAndLastSequenceNumberForTheSession() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        #expect(try store.knownKeys().isEmpty)
        #expect(try store.lastSequenceNumber(address: Vectors.device.address) == nil)
        let records = try vectorRecords()
        for r in records { try store.insert(r) }
        #expect(try store.knownKeys() == Set(records.map(\.dedupKey)))
        #expect(try store.lastSequenceNumber(address: Vectors.device.address) == 7)
        try store.insert(try Vectors.enhancedRecord(sequenceNumber: 300))
        try store.insert(try Vectors.enhancedRecord(sequenceNumber: 12))
        #expect(try store.lastSequenceNumber(address: Vectors.device.address) == 300)
        #expect(try store.lastSequenceNumber(address: "11:22:33:44:55:66") == nil)
    }

    /// Two cuffs that send the same placeholder serial ("0000000000", as cheap cuffs do) are two
    /// devices, and the same sequence number on each is two readings: neither record is dropped
    /// as the other's. A real serial still makes one cuff of two addresses.
    @Test func cuffsSharingAPlaceholderSerialAreKeptApart() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        func record(_ address: String, serial: String) throws -> MeasurementRecord {
            var r = try Vectors.enhancedRecord(sequenceNumber: 0)
            r.device = DeviceInfo(address: address, name: "BPM", serial: serial)
            return r
        }
        for placeholder in ["0000000000", " N/A ", "123456789", "FFFFFFFF", "Serial Number"] {
            let a = try record("AA:00:00:00:00:01", serial: placeholder)
            let b = try record("AA:00:00:00:00:02", serial: placeholder)
            #expect(a.dedupKey != b.dedupKey, "\(placeholder)")
            #expect(a.device.identity == "address:AA:00:00:00:00:01", "\(placeholder)")
            #expect(a.device.serial == placeholder, "the serial itself is kept as sent")
        }
        #expect(try store.insert(try record("AA:00:00:00:00:01", serial: "0000000000")).isNew)
        #expect(try store.insert(try record("AA:00:00:00:00:02", serial: "0000000000")).isNew)
        let history = try store.history()
        #expect(history.count == 2)
        #expect(Set(history.map(\.device.address)) == ["AA:00:00:00:00:01", "AA:00:00:00:00:02"])
        // A distinct serial: the same cuff, whatever address it came from.
        #expect(try store.insert(try record("AA:00:00:00:00:03", serial: "A1B2C3-778")).isNew)
        #expect(try store.insert(try record("AA:00:00:00:00:04", serial: "A1B2C3-778")) == .duplicate)
        for real in ["SN42", "SIM-000001", "2024110012", "A1B2C3-778", "00AB"] {
            #expect(!DeviceInfo.isPlaceholder(serial: real), "\(real)")
        }
    }

    @Test func columnsKeepUnitWordsAndSpecialNames() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        try store.insert(try Vectors.bpm(Vectors.kPa))
        try store.insert(try Vectors.bpm(Vectors.errorFrame))
        let rows = try store.history()
        let k = rows[0], e = rows[1]
        #expect(k.unit == .kPa)
        #expect(k.systolic == 18.9 && k.diastolic == 11 && k.meanArterialPressure == 15.9 && k.pulseRate == 60)
        #expect(k.systolicRaw == 0xF0BD && k.status == 0x0012 && k.systolicSpecial == nil)
        #expect(e.systolic == nil && e.diastolic == nil && e.meanArterialPressure == nil && e.pulseRate == nil)
        #expect(e.systolicRaw == 0x07FF && e.pulseRateRaw == 0x07FF)
        #expect(
            [e.systolicSpecial, e.diastolicSpecial, e.meanArterialPressureSpecial, e.pulseRateSpecial] == [
                "NaN", "NaN", "NaN", "NaN",
            ])
        let warnings = try JSONSerialization.jsonObject(with: Data(e.warningsJSON.utf8)) as? [Any]
        #expect(warnings?.isEmpty == true)
        let decoded = try JSONSerialization.jsonObject(with: Data(k.decodedJSON.utf8)) as? [String: Any]
        #expect(decoded?["systolic"] as? Double == 18.9)
    }

    /// A record the codec made is matched value for value, one read back from its JSON by its
    /// JSON: both find the same options (none, a quirk profile's, or no set at all).
    @Test func reproducingOptionsAreTheSameFromTheValueAndFromTheJSON() throws {
        let q = QuirkProfile.beurerBM85.options
        let v = BloodPressureMeasurement(
            systolic: SFloat(rawValue: 125), diastolic: SFloat(rawValue: 82),
            meanArterialPressure: SFloat(rawValue: 96),
            pulseRate: SFloat(rawValue: 0x0102), userID: 2, status: MeasurementStatus(rawValue: 0x0004))
        let quirkRaw = v.encode(quirks: q)
        let d = try BloodPressureMeasurement.decode(quirkRaw[...], quirks: q)
        let quirky = MeasurementRecord.from(
            bpm: d.value, warnings: d.warnings, raw: quirkRaw, device: Vectors.device, at: Vectors.at, stored: false)
        var wrongRaw = try Vectors.bpm(Vectors.kPa)
        wrongRaw.raw = try Vectors.bytes(Vectors.withDateTime)
        let cases: [(MeasurementRecord, QuirkProfile.Options?)] = [
            (try Vectors.bpm(Vectors.kPa), []), (try Vectors.bpm(Vectors.errorFrame), []),
            (try Vectors.bpm(Vectors.withDateTime), []), (try Vectors.enhancedRecord(), []),
            (try Vectors.enhancedRecord(sequenceNumber: 7), []), (quirky, q), (wrongRaw, nil),
        ]
        for (m, expected) in cases {
            #expect(m.codecValue != nil)
            var fromJSON = m
            fromJSON.decoded = m.decoded  // a record read back: its JSON only
            #expect(fromJSON.codecValue == nil)
            #expect(SQLiteStore.reproducingOptions(m) == expected, "\(m.raw)")
            #expect(SQLiteStore.reproducingOptions(fromJSON) == expected, "\(m.raw)")
        }
    }

    @Test func quirkFramesDecodeAgainWithTheirProfile() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let v = BloodPressureMeasurement(
            systolic: SFloat(rawValue: 125), diastolic: SFloat(rawValue: 82),
            meanArterialPressure: SFloat(rawValue: 96),
            pulseRate: SFloat(rawValue: 0x0102), userID: 2, status: MeasurementStatus(rawValue: 0x0004))
        let q = QuirkProfile.beurerBM85.options
        let raw = v.encode(quirks: q)
        let d = try BloodPressureMeasurement.decode(raw[...], quirks: q)
        let m = MeasurementRecord.from(
            bpm: d.value, warnings: d.warnings, raw: raw, device: Vectors.device, at: Vectors.at, stored: false)
        #expect(m.pulseRate == SFloat(rawValue: 0x0102))
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        try store.insert(m)
        #expect(try store.history()[0].quirks == q)
        let back = try #require(try store.records().first)
        #expect(back.pulseRate == SFloat(rawValue: 0x0102))
        #expect(back.json == m.json)
    }

    @Test func bytesThatNoLongerDecodeAreATypedErrorNamingTheRow() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        var m = try Vectors.bpm(Vectors.mmHgFull)
        m.raw = Array(m.raw.prefix(9))  // ends inside the Time Stamp
        let w = WarningCollector()
        let store = try SQLiteStore(path: dir.path("d.db"), warn: w.handler)
        try store.insert(m)
        #expect(w.warnings.count == 1 && w.warnings[0].sink == "store")
        let err = #expect(throws: SinkError.self) { try store.records() }
        guard case let .storedValueUndecodable(p, row, reason) = err else {
            Issue.record("wrong error \(String(describing: err))"); return
        }
        #expect(p == dir.path("d.db"))
        #expect(row == 1)
        #expect(reason.contains("Time Stamp"))
    }

    @Test func sessionAndProgressAreNotStoredAndFinishCloses() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("d.db"), warn: SinkWarnings.ignore)
        try store.write(session)
        try store.write(progress)
        #expect(try store.history().isEmpty)
        try store.finish()
        #expect(throws: SinkError.finished(sink: "store")) {
            try store.write(.measurement(try Vectors.bpm(Vectors.kPa)))
        }
    }

    /// Durability short of kill -9: the row is visible to a second connection (and a second process)
    /// while the writer is still open — it is committed, not sitting in the writer. The real
    /// kill -9 test runs at CLI level.
    @Test func committedRowIsVisibleToAnotherConnectionAndProcessBeforeClose() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("d.db")
        let writer = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        let m = try Vectors.enhancedRecord()
        try writer.write(.measurement(m))
        let reader = try SQLiteStore(path: path, mustExist: true, warn: SinkWarnings.ignore)
        #expect(try reader.history().map(\.dedupKey) == [m.dedupKey])
        #expect(try reader.history().first?.raw == m.raw)
        // Another process (python3's sqlite3), if there is one.
        if let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) {
            let p = try runToCompletion(
                python,
                [
                    "-c",
                    "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('select hex(raw) from measurements').fetchone()[0])",
                    path,
                ])
            #expect(p.status == 0)
            #expect(p.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == Hex.encode(m.raw).uppercased())
        }
        // The writer still works after the reader came and went.
        #expect(try writer.insert(try Vectors.bpm(Vectors.kPa)).isNew)
    }
}

@Suite struct HistoryAndFactoryTests {
    /// Prints `records` live through `format`, stores them, then prints history: both outputs must match.
    func liveAndHistory(_ format: OutputFormat) throws -> (live: [String], history: [String]) {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("d.db")
        let options = SinkConfiguration(
            format: format, storePath: path, utcOffset: .fixed(3600), uuidSeed: 5, clock: .fixed(Vectors.receivedMicros)
        )
        let live = MemoryOutput()
        let sink = try SinkFactory.makeSink(options, output: live, warn: SinkWarnings.ignore)
        #expect(sink.sinks.count == 2 && sink.sinks[0] is SQLiteStore)
        for r in try vectorRecords() { try sink.write(.measurement(r)) }
        try sink.finish()
        // History on a host whose zone changed since: the offsets recorded at ingest win.
        var later = options
        later.utcOffset = .fixed(-7200)
        let hist = MemoryOutput()
        let n = try SinkFactory.printHistory(storePath: path, options: later, output: hist, warn: SinkWarnings.ignore)
        #expect(n.printed == 6 && n.skipped == 0)
        return (live.lines, hist.lines)
    }

    @Test func historyThroughNDJSONMatchesLive() throws {
        let (live, history) = try liveAndHistory(.ndjson)
        #expect(live.count == 6)
        #expect(history == live)
    }

    @Test func historyThroughFHIRMatchesLiveAndValidates() throws {
        let (live, history) = try liveAndHistory(.fhir)
        #expect(live.count == 12)  // every vector has a pulse rate
        #expect(history == live)
        #expect(history.contains { $0.contains("\"effectiveDateTime\":\"2024-06-23T14:35:10+01:00\"") })
        try #require(try validate("fhir", history)?.0 == 0)
    }

    @Test func historyThroughOMHMatchesLiveAndValidates() throws {
        let (live, history) = try liveAndHistory(.omh)
        #expect(live.count == 10)  // the error frame gives none
        #expect(history == live)  // same seed, same clock
        try #require(try validate("omh", history)?.0 == 0)
    }

    @Test func formatNames() throws {
        #expect(try OutputFormat(parsing: "ndjson") == .ndjson)
        #expect(try OutputFormat(parsing: "FHIR") == .fhir)
        #expect(try OutputFormat(parsing: "omh") == .omh)
        #expect(try OutputFormat(parsing: "jsonl") == .ndjson)
        #expect(throws: SinkError.unknownFormat("csv")) { try OutputFormat(parsing: "csv") }
        #expect(OutputFormat.allCases.map(\.description) == ["ndjson", "fhir", "omh"])
    }

    @Test func sinksForEachFormatWithoutStore() throws {
        let out = MemoryOutput()
        #expect(
            try SinkFactory.makeSinks(SinkConfiguration(format: .ndjson), output: out).map {
                type(of: $0) == NDJSONSink.self
            } == [true])
        #expect(
            try SinkFactory.makeSinks(SinkConfiguration(format: .fhir), output: out).map {
                type(of: $0) == FHIRSink.self
            } == [true])
        #expect(
            try SinkFactory.makeSinks(SinkConfiguration(format: .omh), output: out).map { type(of: $0) == OMHSink.self }
                == [true])
    }

    @Test func fanOutStopsAtTheStoreSoNothingIsPrintedForAnUnkeptMeasurement() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let out = MemoryOutput()
        let sink = try SinkFactory.makeSink(
            SinkConfiguration(storePath: dir.path("d.db")), output: out, warn: SinkWarnings.ignore)
        try sink.write(.measurement(try Vectors.bpm(Vectors.kPa)))
        #expect(out.lines.count == 1)
        try sink.sinks[0].finish()  // the store goes away
        #expect(throws: SinkError.finished(sink: "store")) {
            try sink.write(.measurement(try Vectors.bpm(Vectors.mmHgFull)))
        }
        #expect(out.lines.count == 1)
        // finish() still finishes the others, then reports the store's failure.
        #expect(throws: SinkError.finished(sink: "store")) { try sink.finish() }
        #expect(throws: SinkError.finished(sink: "ndjson")) { try sink.sinks[1].write(session) }
    }

    @Test(arguments: [true, false])
    func storedDuplicatesArePrintedOnlyWhenAskedTo(prints: Bool) throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let out = MemoryOutput()
        let options = SinkConfiguration(storePath: dir.path("d.db"), printsStoredDuplicates: prints)
        let sink = try SinkFactory.makeSink(options, output: out, warn: SinkWarnings.ignore)
        let m = try Vectors.bpm(Vectors.kPa)
        try sink.write(session)
        try sink.write(.measurement(m))
        try sink.write(.measurement(m))
        try sink.write(.measurement(try Vectors.bpm(Vectors.mmHgFull)))
        #expect(out.lines.count == (prints ? 4 : 3))
        let store = try #require(sink.sinks[0] as? SQLiteStore)
        #expect(try store.history().count == 2)
        try sink.finish()
    }
}
