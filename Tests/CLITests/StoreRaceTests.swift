import CuffTestSupport
import Foundation
import Testing

/// Processes creating the same new store at once: every one opens it and keeps its reading.
@Suite("store created by several processes at once")
struct StoreRaceTests {
    @Test func everyProcessOpensTheNewStoreAndKeepsItsReading() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-race-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var failures: [String] = []
        for round in 0..<8 {
            let store = dir.appendingPathComponent("race-\(round).sqlite").path
            let errs = (0..<4).map { dir.appendingPathComponent("err-\(round)-\($0)").path }
            // Different seeds: four different readings, so none is skipped as one the store already holds.
            let processes = try errs.enumerated().map { i, err in
                try ChildProcess(
                    [
                        "measure", "--simulated", "normal", "--speed", "0", "--seed", "\(i + 1)", "--quiet", "--store",
                        store,
                    ], stderr: err)
            }
            for (p, err) in zip(processes, errs) {
                let status = p.wait(timeout: 120)
                if status != 0 {
                    failures.append(
                        "round \(round): status \(status.map(String.init) ?? "none"): \(try String(contentsOfFile: err, encoding: .utf8))"
                    )
                }
            }
            let history = try CLI.run(["history", "--store", store])
            #expect(history.status == 0)
            #expect(history.stdoutLines.count == 4, "each process's reading stored once")
        }
        #expect(failures.isEmpty, "\(failures.count) of 32 runs failed; first: \(failures.first ?? "")")
    }
}
