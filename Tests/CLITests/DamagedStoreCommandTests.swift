import CuffTestSupport
import Foundation
import Testing

/// `cuff history` and `cuff plot --store` on stores with an odd cell, and the smaller output
/// promises of issue 28 (a capped decode message, DEL/C1 escaped in JSON, "0 new" is a result).
@Suite("Damaged stores and small output promises", .serialized)
struct DamagedStoreCommandTests {
    static func scratch() throws -> String {
        let dir = "/tmp/cuff-ds-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A store with three readings (three captures replayed into it), then `sql` run on it by Python's sqlite3.
    static func damagedStore(_ dir: String, _ sql: String) throws -> String {
        let store = dir + "/d.db"
        for c in ["normal", "kpa", "hypertensive"] {
            let r = try CLI.run([
                "replay", CLI.packageRoot.appendingPathComponent("captures/\(c).btsnoop").path, "--quiet", "--store",
                store,
            ])
            #expect(r.status == 0, "\(r.stderr)")
        }
        let py = try ChildProcess(
            [
                "-c", "import sqlite3,sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()",
                store, sql,
            ],
            executable: "/usr/bin/python3", stderr: dir + "/py.err")
        #expect(py.wait(timeout: 60) == 0, "\((try? String(contentsOfFile: dir + "/py.err", encoding: .utf8)) ?? "")")
        return store
    }

    @Test func historyAndPlotSkipTheOddRowNameItAndSaySo() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try Self.damagedStore(dir, "UPDATE measurements SET systolic = 'odd-value-77' WHERE id = 2;")
        let h = try CLI.run(["history", "--store", store])
        #expect(h.status == 11, "\(h.stderr)")
        #expect(h.stdoutLines.count == 2)
        #expect(h.stderr.contains("row 2") && h.stderr.contains("column systolic"), "\(h.stderr)")
        #expect(h.stderr.contains("2 measurements") && h.stderr.contains("1 unreadable row skipped"), "\(h.stderr)")
        #expect(
            !h.stderr.contains("odd-value-77") && !h.stderr.contains("Fatal error") && !h.stderr.contains("SIM-"),
            "\(h.stderr)")

        let svg = dir + "/h.svg"
        let p = try CLI.run(["plot", "--store", store, "-o", svg])
        #expect(p.status == 11, "\(p.stderr)")
        #expect(FileManager.default.fileExists(atPath: svg))
        #expect(p.stderr.contains("row 2") && !p.stderr.contains("odd-value-77"), "\(p.stderr)")
    }

    @Test func historyShowsMeasurementsWhoseDeviceRowIsGone() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try Self.damagedStore(dir, "PRAGMA foreign_keys = OFF; DELETE FROM devices;")
        let h = try CLI.run(["history", "--store", store])
        #expect(h.status == 0, "\(h.stderr)")
        #expect(h.stdoutLines.count == 3)
        #expect(h.stderr.contains("3 measurements have no device row"), "\(h.stderr)")
    }

    @Test func historyOnAnEmptyFileWritesNothingIntoIt() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/empty.db"
        #expect(FileManager.default.createFile(atPath: store, contents: nil, attributes: [.posixPermissions: 0o600]))
        let h = try CLI.run(["history", "--store", store])
        #expect(h.status == 0, "\(h.stderr)")
        #expect(h.stderr.contains("0 measurements"))
        #expect(try FileManager.default.attributesOfItem(atPath: store)[.size] as? Int == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["empty.db"])
    }

    @Test func plotTakesDashO() throws {
        let r = try CLI.run(["plot", "--help"])
        #expect(r.stdout.contains("-o, --output"), "\(r.stdout)")
    }

    /// Whatever the line was to be decoded as (a standard value, an Omron record, a vendor
    /// frame): stderr and the JSON's `raw` quote its start only.
    @Test(arguments: [[], ["--model", "HEM-7361T"], ["--protocol", "microlife"], ["--protocol", "yonker"]])
    func decodeQuotesOnlyTheStartOfALongBadLine(_ options: [String]) throws {
        let long = String(repeating: "zq", count: 50_000)
        let r = try CLI.run(["decode"] + options, stdin: long + "\n")
        #expect(r.status == 1)
        #expect(r.stderr.utf8.count < 300, "\(r.stderr.prefix(300))")
        #expect(r.stderr.contains("(100000 bytes)"), "\(r.stderr.prefix(300))")
        #expect(r.stderr.contains(String(long.prefix(64)) + "…"))
        #expect(r.stdout.utf8.count < 600, "\(r.stdout.prefix(600))")
        let line = try CLI.json(try #require(r.stdoutLines.first))
        #expect(line["raw"] as? String == String(long.prefix(64)) + "…", "\(line)")
        #expect((line["error"] as? [String: Any])?["code"] as? String == "invalid_hex")
    }

    @Test func delAndC1NeverReachStdoutRawInJSON() throws {
        let r = try CLI.run(["decode", "1E\u{7F}8A\u{85}00\u{9B}31m"])
        #expect(r.status == 1)
        #expect(r.stdout.contains(#"1E\u007f8A\u0085"#), "\(r.stdout)")
        #expect(!r.stdout.unicodeScalars.contains { $0.value == 0x7F || (0x80...0x9F).contains($0.value) })
    }

    @Test func aSessionWhoseReadingsWereAllKeptAlreadyIsAResult() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The simulated cuff dates its readings from the wall clock's second: two sessions started
        // within one second get the same stored and live readings, so the second has all of them
        // in the store already. Started just after a second begins; tried again if the clock
        // still crossed a second between them (then the second session's readings are new).
        let args = ["measure", "--simulated", "stored-records", "--speed", "0", "--store", dir + "/s.db"]
        for attempt in 1...5 {
            try? FileManager.default.removeItem(atPath: dir + "/s.db")
            let fraction = Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 1)
            usleep(UInt32((1.01 - fraction) * 1_000_000))
            let first = try CLI.run(args)
            #expect(first.status == 0, "\(first.stderr)")
            let again = try CLI.run(args)
            let printed = again.stdoutLines.filter { $0.contains("\"type\":\"measurement\"") }
            if !printed.isEmpty && attempt < 5 { continue }
            #expect(printed.isEmpty)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stderr.contains("0 new measurements; 4 results already kept"), "\(again.stderr)")
            break
        }
    }
}
