// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CuffSession
import Foundation
import Plot
import PlotIO
import Sinks
import Testing

/// The history of a store filled by replaying every capture in captures/ (what the README's
/// picture shows), checked against a golden summary of the SVG's structure.
@Suite struct HistoryGoldenTests {
    static func storeFromCaptures(in dir: URL) throws -> String {
        let path = dir.appendingPathComponent("captures.sqlite").path
        // A fixed host offset: readings without a time stamp are placed the same on every machine.
        let store = try SQLiteStore(path: path, utcOffset: .fixed(0), warn: SinkWarnings.ignore)
        for name in Paths.fixtures {
            var reader = try CaptureReader(path: Paths.captures.appendingPathComponent(name + ".btsnoop").path)
            try reader.readHeader()
            var replay = CaptureReplay()
            var out: [CaptureReplay.Output] = []
            _ = replay.replay(&reader, into: &out) { _ in true }
            replay.finish(into: &out)
            for case let .emit(e) in out { try store.write(e) }
        }
        try store.finish()
        return path
    }

    static func summary(_ root: XNode) -> String {
        var out: [String] = []
        for panel in root.having("panel") {
            let kind = panel.classes.subtracting(["panel"]).sorted().joined()
            out.append("panel \(kind)")
            for b in panel.having("band") {
                out.append("  band \(b.attributes["data-category"]!) \(b.attributes["data-range"]!)")
            }
            for r in panel.having("reading") {
                out.append("  reading \(r.attributes["data-time"]!) \(r.attributes["data-value"]!)")
            }
            for g in panel.having("gap") { out.append("  gap \(g.attributes["data-value"]!)") }
            for w in panel.having("weekly-mean") {
                out.append(
                    "  week \(w.attributes["data-week"]!) mean \(w.attributes["data-value"]!) of \(w.attributes["data-count"]!)"
                )
            }
            for l in panel.having("band-label") { out.append("  band-label \(l.text)") }
            for t in panel.having("tick", "x") { out.append("  x-tick \(t.text)") }
        }
        for n in root.having("note") { out.append("note \(n.text)") }
        return out.joined(separator: "\n") + "\n"
    }

    @Test(arguments: ["esc-esh-2018", "acc-aha-2017"])
    func capturesStoreHistory(_ guideline: String) throws {
        let dir = try Paths.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let readings = try PlotInput.history(store: try Self.storeFromCaptures(in: dir))
        #expect(readings.count == 27)
        let svg = HistoryChart.document(
            readings, options: .init(guideline: Guideline.named(guideline)!, subtitle: "captures"))
        let summary = Self.summary(try SVGParse.parse(SVGWriter.document(svg)))
        let file = Paths.golden.appendingPathComponent("history-\(guideline).txt")
        if ProcessInfo.processInfo.environment["CUFF_UPDATE_GOLDEN"] != nil {
            try summary.write(to: file, atomically: true, encoding: .utf8)
        }
        #expect(summary == (try String(contentsOf: file, encoding: .utf8)))
    }
}
