import Foundation
import Testing

/// `cuff simulate --from-capture FILE` in one process, `cuff measure --connect` in another: the
/// measurements `cuff replay` reads from the same capture.
@Suite("simulate --from-capture over a Unix socket", .serialized)
struct FromCaptureTests {
    static let captures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("captures")

    /// raw value and sequence number of each measurement line.
    static func results(_ r: CLIResult) throws -> [String] {
        try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
            .map { "\($0["raw"] as? String ?? "?") \($0["sequence_number"].map { "\($0)" } ?? "-")" }.sorted()
    }

    @Test(arguments: ["normal", "stored-records", "stored-records-bps-1.1", "kpa", "disconnect", "beurer-bm85"])
    func measureAgainstTheServedCaptureGivesTheReplaysMeasurements(_ name: String) throws {
        let file = Self.captures.appendingPathComponent(name + ".btsnoop").path
        let sim = try TwoProcessTests.Simulator(["--from-capture", file, "--speed", "1000"])
        let live = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--timeout", "60"])
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(log.contains("session 1 of \(file)"), "\(log)")
        let replayed = try CLI.run(["replay", file, "--quiet"])
        #expect(try Self.results(live) == Self.results(replayed), "\(name): \(live.stderr)")
        #expect(name == "disconnect" ? live.status == 4 : live.status == 0, "\(name): \(live.stderr)")
    }

    /// A cuff that cuff did not make: bluetoothd serving a Blood Pressure Service through its own
    /// GATT server, recorded in the VM (tools/vm/make-foreign-capture.sh). Its peripheral also runs a
    /// GATT client of its own against the central, in the same connection. Both controllers' views
    /// of the one connection can be served.
    @Test(arguments: [1, 2])
    func aBluetoothdGATTServerCapturedInTheVMServesTheReplaysMeasurements(_ session: Int) throws {
        let file = Self.captures.appendingPathComponent("foreign/bluetoothd-gatt-server.btsnoop").path
        let list = try CLI.run(["simulate", "--from-capture", file, "--list-sessions"])
        #expect(
            list.stdoutLines.count == 2 && list.stdoutLines.allSatisfy { $0.hasSuffix("servable") }, "\(list.stdout)")
        let sim = try TwoProcessTests.Simulator(["--from-capture", file, "--session", "\(session)", "--speed", "1000"])
        let live = try CLI.run(["measure", "--connect", "unix:\(sim.path)", "--timeout", "60"])
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(live.status == 0, "\(live.stderr)")
        let replayed = try CLI.run(["replay", file, "--quiet"])
        #expect(try Self.results(live) == Self.results(replayed))
        #expect(try Self.results(live).count == 2)
        // The whole records, device names included, as the session recorded in the VM printed them.
        func records(_ lines: [String]) throws -> [String] {
            try lines.map(CLI.json).filter { $0["type"] as? String == "measurement" }.map { r in
                var r = r
                r["received_at"] = nil
                var d = r["device"] as? [String: Any] ?? [:]
                d["address"] = nil
                r["device"] = d
                return String(
                    decoding: try JSONSerialization.data(withJSONObject: r, options: [.sortedKeys]), as: UTF8.self)
            }
        }
        let recorded = try String(
            contentsOfFile: Self.captures.appendingPathComponent("foreign/bluetoothd-gatt-server.live.ndjson").path,
            encoding: .utf8
        )
        .split(separator: "\n").map(String.init)
        #expect(try records(replayed.stdoutLines) == records(recorded), "cuff replay differs from the live session")
        #expect(try records(live.stdoutLines) == records(recorded), "the served capture differs from the live session")
    }

    @Test func listSessionsAndErrors() throws {
        let file = Self.captures.appendingPathComponent("normal.btsnoop").path
        let list = try CLI.run(["simulate", "--from-capture", file, "--list-sessions"])
        #expect(list.status == 0)
        #expect(list.stdoutLines.count == 1 && list.stdout.contains("servable"), "\(list.stdout)")
        // Not a capture: exit 1 and the reader's error; a session that is not there: exit 7.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-fc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let junk = dir.appendingPathComponent("junk.btsnoop").path
        FileManager.default.createFile(atPath: junk, contents: Data("not a capture at all".utf8))
        let bad = try CLI.run([
            "simulate", "--from-capture", junk, "--listen", "unix:" + dir.appendingPathComponent("s").path,
        ])
        #expect(bad.status == 1 && bad.stderr.contains(junk), "\(bad.stderr)")
        let missing = try CLI.run([
            "simulate", "--from-capture", file, "--session", "9", "--listen",
            "unix:" + dir.appendingPathComponent("s").path,
        ])
        #expect(missing.status == 7 && missing.stderr.contains("no session 9"), "\(missing.stderr)")
        let misuse = try CLI.run(["simulate", "--listen", "unix:/tmp/x", "--loop"])
        #expect(misuse.status == 64)
        // Options that shape a simulated cuff would be ignored by a captured one: refused, named.
        let shaped = try CLI.run([
            "simulate", "--from-capture", file, "--listen", "unix:/tmp/x", "--persona", "bps-1.1", "--every", "5",
        ])
        #expect(shaped.status == 64, "\(shaped.stderr)")
        #expect(
            shaped.stderr.contains("--persona, --every shape a simulated cuff; --from-capture serves the captured one"),
            "\(shaped.stderr)")
        let scenario = try CLI.run(["simulate", "--from-capture", file, "--list-sessions", "--scenario", "kpa"])
        #expect(scenario.status == 64 && scenario.stderr.contains("--scenario shapes"), "\(scenario.stderr)")
        // Also with their default values (probe U: `--scenario normal`, `--seed 1` and `--persona
        // bps-1.0` were taken, and the capture served).
        for (option, value) in [
            ("--scenario", "normal"), ("--seed", "1"), ("--persona", "bps-1.0"), ("--handle-gap", "0"),
        ] {
            let given = try CLI.run(["simulate", "--from-capture", file, "--list-sessions", option, value])
            #expect(given.status == 64 && given.stderr.contains("\(option) shapes"), "\(option): \(given.stderr)")
        }
    }
}
