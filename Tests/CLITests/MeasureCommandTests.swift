import CuffTestSupport
import Foundation
import Testing

/// `cuff measure` as a user runs it, on the real binary.
@Suite("cuff measure", .serialized)
struct MeasureCommandTests {
    static let scenarios: [String] = [
        "normal", "hypertensive", "irregular-pulse", "body-movement", "cuff-loose", "improper-position", "error", "kpa",
        "stored-records", "disconnect", "slow-confirm", "beurer-bm85", "rfu-bits", "hypotensive", "multi-user",
    ]

    func records(_ r: CLIResult) throws -> [[String: Any]] { try r.stdoutLines.map(CLI.json) }

    @Test func recordSegmentLengthIsChecked() throws {
        for bad in ["5", "513", "-1"] {
            let r = try CLI.run(["simulate", "--listen", "unix:/nonexistent/cuff.sock", "--record-segment", bad])
            #expect(r.status != 0 && r.status != 1, "\(bad)")
            #expect(r.stderr.contains("--record-segment"), "\(bad): \(r.stderr)")
        }
    }

    @Test func listMatchesTheScenariosWeTest() throws {
        let r = try CLI.run(["simulate", "--list"])
        #expect(r.status == 0)
        #expect(r.stdoutLines.map { String($0.split(separator: "\t")[0]) } == Self.scenarios)
    }

    @Test(arguments: scenarios, ["bps-1.0", "bps-1.1"])
    func inProcess(scenario: String, persona: String) throws {
        let r = try CLI.run(["measure", "--simulated", scenario, "--persona", persona, "--speed", "0", "--seed", "5"])
        let recs = try records(r)
        let types = recs.map { $0["type"] as? String ?? "?" }
        #expect(types.first == "session" && types.last == "session")
        let end = recs.last!
        let progress = recs.filter { $0["type"] as? String == "progress" }
        let measurements = recs.filter { $0["type"] as? String == "measurement" }
        // Progress: every notification, 5 per simulated second, elapsed never goes back, inflate before deflate.
        #expect(progress.count > (scenario == "disconnect" ? 80 : 150))
        let elapsed = progress.compactMap { $0["elapsed"] as? Double }
        #expect(zip(elapsed, elapsed.dropFirst()).allSatisfy { $0 <= $1 })
        let phases = progress.compactMap { $0["phase"] as? String }
        #expect(phases.first == "inflating")
        if let firstDeflate = phases.firstIndex(of: "deflating") {
            #expect(!phases[firstDeflate...].contains("inflating"))
        }
        if scenario == "disconnect" {
            #expect(r.status == 4)
            #expect(end["outcome"] as? String == "disconnected")
            #expect(measurements.isEmpty)
            return
        }
        #expect(r.status == 0, "\(r.stderr.suffix(400))")
        #expect(end["outcome"] as? String == "completed")
        let live = measurements.filter { $0["stored"] as? Bool == false }
        #expect(live.count == 1)
        let stored = measurements.count - live.count
        #expect(stored == ["stored-records": 3, "slow-confirm": 5, "multi-user": 1][scenario, default: 0])
        // The live result comes after the last progress record.
        let lastProgress = types.lastIndex(of: "progress")!
        let liveIndex = recs.firstIndex { $0["type"] as? String == "measurement" && $0["stored"] as? Bool == false }!
        #expect(liveIndex > lastProgress)
        let m = live[0]
        #expect((m["device"] as? [String: Any])?["address"] as? String == "simulated:\(scenario)")
        #expect(m["received_at"] is String)
        if scenario == "error" {
            #expect(
                m["systolic"] as? String == "NaN" && m["diastolic"] as? String == "NaN"
                    && m["pulse_rate"] as? String == "NaN")
        } else if scenario == "kpa" {
            #expect(m["unit"] as? String == "kPa")
        } else {
            #expect((m["systolic"] as? Double ?? 0) > (m["diastolic"] as? Double ?? 1000))
        }
    }

    /// BPS 1.1 Time Stamps are UTC: the simulated cuff's records name the same instants whatever
    /// the host's zone (probe P: the local time was sent as UTC, 5 hours early in New York).
    @Test func bps11TimeStampsAreTheSameInstantsInEveryHostZone() throws {
        func instants(_ zone: String) throws -> [Date] {
            let r = try CLI.run(
                [
                    "measure", "--simulated", "stored-records", "--persona", "bps-1.1", "--speed", "0", "--quiet",
                    "--no-gatt-cache", "--seed", "3",
                ], environment: ["TZ": zone])
            #expect(r.status == 0, "\(r.stderr)")
            // (The stored records are 2B34s; the live result is a 2A35, in the cuff's local time.)
            return try r.stdoutLines.filter { $0.contains("\"characteristic\":\"2B34\"") }.map {
                let ts = try #require(try CLI.json($0)["timestamp"] as? String)
                return try #require(ISO8601DateFormatter().date(from: ts), "\(ts)")
            }
        }
        let utc = try instants("UTC")
        #expect(!utc.isEmpty)
        for zone in ["America/New_York", "Asia/Tokyo"] {
            let other = try instants(zone)
            #expect(other.count == utc.count, "\(zone)")
            for (a, b) in zip(utc, other) {
                #expect(abs(a.timeIntervalSince(b)) < 120, "\(zone): \(a) against \(b) in UTC")
            }
        }
    }

    @Test func sameSeedSameReadings() throws {
        func values(_ seed: String) throws -> [String] {
            let r = try CLI.run(["measure", "--simulated", "normal", "--speed", "0", "--seed", seed, "--quiet"])
            return try records(r).filter { $0["type"] as? String == "measurement" }.map {
                "\($0["systolic"]!)/\($0["diastolic"]!)/\($0["pulse_rate"]!)"
            }
        }
        #expect(try values("11") == values("11"))
        #expect(try values("11") != values("12"))
    }

    @Test(arguments: ["fhir", "omh"])
    func formatsValidateAgainstTheOfficialSchemas(format: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-\(format)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var all = ""
        for s in Self.scenarios {
            let r = try CLI.run([
                "measure", "--simulated", s, "--persona", "bps-1.1", "--speed", "0", "--format", format, "--quiet",
            ])
            #expect(r.status == (s == "disconnect" ? 4 : 0))
            all += r.stdout
        }
        let file = dir.appendingPathComponent("out.ndjson")
        try all.write(to: file, atomically: true, encoding: .utf8)
        #expect(all.split(separator: "\n").count >= 20)
        let validator = CLI.packageRoot.deletingLastPathComponent().appendingPathComponent("shared/schemas/validate.py")
        guard FileManager.default.fileExists(atPath: validator.path) else {
            Issue.record("the schema validator \(validator.path) is missing")
            return
        }
        let report = dir.appendingPathComponent("validate.out")
        let p = try ChildProcess(
            [validator.path, format, file.path], executable: "/usr/bin/python3", stdout: report.path)
        let status = p.wait(timeout: 120)
        let text = (try? String(contentsOf: report, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(text)")
        #expect(text.contains(" 0 failed"))
    }

    @Test func storeDeduplicatesAcrossRunsAndHistoryPrintsIt() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = dir.appendingPathComponent("bp.sqlite").path
        let first = try CLI.run([
            "measure", "--simulated", "stored-records", "--persona", "bps-1.1", "--speed", "0", "--store", db,
            "--quiet",
        ])
        #expect(first.status == 0)
        let attrs = try FileManager.default.attributesOfItem(atPath: db)
        #expect((attrs[.posixPermissions] as? Int) == 0o600)
        // The same cuff again: its three stored records (same sequence numbers) are not repeated.
        let second = try CLI.run([
            "measure", "--simulated", "stored-records", "--persona", "bps-1.1", "--speed", "0", "--seed", "2",
            "--store", db, "--quiet",
        ])
        #expect(second.status == 0)
        let secondMeasurements = try records(second).filter { $0["type"] as? String == "measurement" }
        #expect(secondMeasurements.count == 1)
        #expect(secondMeasurements.allSatisfy { $0["stored"] as? Bool == false })
        let h = try CLI.run(["history", "--store", db])
        #expect(h.status == 0)
        #expect(h.stdoutLines.count == 5)  // 3 stored + 2 live
        let fhir = try CLI.run(["history", "--store", db, "--format", "fhir"])
        #expect(fhir.stdoutLines.count == 10)  // each measurement: a BP panel and a heart-rate Observation
        let missing = try CLI.run(["history", "--store", dir.appendingPathComponent("nope.sqlite").path])
        #expect(missing.status != 0)
    }
}
