// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Plot
import PlotIO
import Testing

/// Every plot rendered by rsvg-convert (librsvg), the renderer `--output FILE.png` uses. Skipped
/// only on a developer machine without it; in CI (`CI` set) a missing rsvg-convert fails.
@Suite struct RenderTests {
    static let rsvg = PlotOutput.rsvgConvert()

    static func requireRenderer() throws -> String? {
        if let rsvg { return rsvg }
        if ProcessInfo.processInfo.environment["CI"] != nil {
            Issue.record(
                "rsvg-convert is not installed, and CI must render every plot: install librsvg2-bin (tools/install-deps.sh --test)"
            )
        }
        return nil
    }

    /// Renders `svg`; checks the PNG's dimensions and that it holds far more than a blank page of
    /// the same size (PNG compresses a blank page to almost nothing).
    static func check(_ svg: SVGElement, _ name: String, rsvg: String) throws {
        let dir = try Paths.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let png = dir.appendingPathComponent(name + ".png").path
        try PlotOutput.renderPNG(SVGWriter.document(svg), to: png, rsvg: rsvg)
        let data = try Data(contentsOf: URL(fileURLWithPath: png))
        let size = try PNG.size(data)
        let width = Double(svg[attribute: "width"]!)!, height = Double(svg[attribute: "height"]!)!
        #expect(size.width == Int(width.rounded()), "\(name)")
        #expect(abs(size.height - Int(height.rounded())) <= 1, "\(name)")
        let blankPath = dir.appendingPathComponent("blank.png").path
        try PlotOutput.renderPNG(
            SVGWriter.document(SVG.root(width: width, height: height, title: "blank", children: [])), to: blankPath,
            rsvg: rsvg)
        let blank = try Data(contentsOf: URL(fileURLWithPath: blankPath))
        #expect(data.count > 20_000, "\(name): \(data.count) bytes")
        #expect(data.count > blank.count * 8, "\(name): \(data.count) bytes, a blank page \(blank.count)")
        if let keep = ProcessInfo.processInfo.environment["CUFF_PLOT_PNG_DIR"] {
            try? data.write(to: URL(fileURLWithPath: keep).appendingPathComponent(name + ".png"))
        }
    }

    @Test(arguments: Paths.fixtures)
    func sessionPlotsRender(_ name: String) throws {
        guard let rsvg = try Self.requireRenderer() else { return }
        let sessions = try PlotInput.sessions(
            [UInt8](try Data(contentsOf: Paths.captures.appendingPathComponent(name + ".btsnoop"))))
        try Self.check(
            SessionChart.document(sessions.enumerated().map { ($0.offset + 1, $0.element) }, source: name),
            "session-" + name, rsvg: rsvg)
    }

    @Test(arguments: ["esc-esh-2018", "acc-aha-2017"])
    func historyPlotsRender(_ guideline: String) throws {
        guard let rsvg = try Self.requireRenderer() else { return }
        let dir = try Paths.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let readings = try PlotInput.history(store: try HistoryFixture.makeStore(in: dir))
        try Self.check(
            HistoryChart.document(
                readings, options: .init(guideline: Guideline.named(guideline)!, subtitle: "test store")),
            "history-" + guideline, rsvg: rsvg)
    }

    @Test func aMissingRendererIsAClearError() {
        #expect(throws: PlotOutputError.rsvgMissing) { try PlotOutput.renderPNG("<svg/>", to: "/tmp/x.png", rsvg: nil) }
        #expect(PlotOutput.rsvgConvert(path: "/nonexistent") == nil)
        #expect(throws: PlotOutputError.unsupportedExtension("a.jpg")) { try PlotOutput.kind(of: "a.jpg") }
    }
}
