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
        let bad = try CLI.run(["simulate", "--from-capture", junk, "--listen", "unix:" + dir.appendingPathComponent("s").path])
        #expect(bad.status == 1 && bad.stderr.contains(junk), "\(bad.stderr)")
        let missing = try CLI.run(["simulate", "--from-capture", file, "--session", "9", "--listen", "unix:" + dir.appendingPathComponent("s").path])
        #expect(missing.status == 7 && missing.stderr.contains("no session 9"), "\(missing.stderr)")
        let misuse = try CLI.run(["simulate", "--listen", "unix:/tmp/x", "--loop"])
        #expect(misuse.status == 64)
    }
}
