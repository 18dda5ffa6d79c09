// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Foundation
import Plot
import PlotIO
import Sinks
import Testing

/// A store filled through the SQLiteStore API with readings over several weeks, as a cuff sends
/// them (encoded, then decoded by the codec).
enum HistoryFixture {
    struct Row {
        var day: (Int, Int)  // month, day of 2026
        var hour: Int
        var sys: SFloat, dia: SFloat, map: SFloat, pulse: SFloat?
        var unit: PressureUnit = .mmHg
        var user: UInt8 = 1
    }

    static let rows: [Row] = [
        Row(day: (10, 5), hour: 8, sys: SFloat(118), dia: SFloat(76), map: SFloat(90), pulse: SFloat(70)),
        Row(day: (10, 7), hour: 20, sys: SFloat(126), dia: SFloat(82), map: SFloat(97), pulse: SFloat(74)),
        Row(day: (10, 14), hour: 8, sys: SFloat(134), dia: SFloat(86), map: SFloat(102), pulse: SFloat(77)),
        Row(day: (10, 15), hour: 8, sys: .nan, dia: .nan, map: .nan, pulse: .nan),  // the cuff failed: no values
        Row(day: (10, 22), hour: 9, sys: SFloat(145), dia: SFloat(92), map: SFloat(110), pulse: SFloat(81)),
        Row(
            day: (10, 29), hour: 7, sys: SFloat(18.9), dia: SFloat(12.0), map: SFloat(14.3), pulse: SFloat(80),
            unit: .kPa),  // ≈142/90
        Row(day: (11, 3), hour: 8, sys: SFloat(162), dia: SFloat(101), map: SFloat(121), pulse: .nres),
        Row(day: (11, 10), hour: 8, sys: SFloat(128), dia: SFloat(79), map: SFloat(95), pulse: SFloat(66)),
        Row(day: (11, 12), hour: 21, sys: SFloat(122), dia: SFloat(78), map: SFloat(93), pulse: SFloat(68)),
        Row(day: (11, 20), hour: 8, sys: SFloat(140), dia: SFloat(88), map: SFloat(105), pulse: SFloat(72), user: 2),
    ]

    static func makeStore(in dir: URL) throws -> String {
        let path = dir.appendingPathComponent("history.sqlite").path
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        let device = DeviceInfo(
            address: "00:AA:01:00:00:00", name: "cuff-sim", manufacturer: "cuff project", model: "CUFF-SIM 1",
            serial: "SIM-000001", firmware: "0.1.0")
        for (i, r) in rows.enumerated() {
            let v = BloodPressureMeasurement(
                unit: r.unit, systolic: r.sys, diastolic: r.dia, meanArterialPressure: r.map,
                timestamp: DateTime(
                    year: 2026, month: UInt8(r.day.0), day: UInt8(r.day.1), hours: UInt8(r.hour), minutes: 5, seconds: 0
                ),
                pulseRate: r.pulse, userID: r.user, status: MeasurementStatus(rawValue: 0))
            let raw = v.encode()
            let d = try BloodPressureMeasurement.decode(raw[...])
            let at = EventTime(
                monotonic: .seconds(Double(i)), wallMicros: 1_790_000_000_000_000 + Int64(i) * 86_400_000_000)
            try store.insert(
                MeasurementRecord.from(
                    bpm: d.value, warnings: d.warnings, raw: raw, device: device, at: at, stored: false))
        }
        try store.finish()
        return path
    }
}

@Suite struct HistoryChartTests {
    @Test func readingsBandsAndWeeklyMeans() throws {
        let dir = try Paths.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let readings = try PlotInput.history(store: try HistoryFixture.makeStore(in: dir), user: 1)
        #expect(readings.count == 9)
        let root = try SVGParse.parse(
            SVGWriter.document(HistoryChart.document(readings, options: .init(subtitle: "test"))))

        // ESC/ESH 2018 bands: six systolic, six diastolic, in their panels, named with their ranges.
        let sysBands = root.having("panel", "systolic").first?.having("band") ?? []
        let diaBands = root.having("panel", "diastolic").first?.having("band") ?? []
        #expect(
            sysBands.map { "\($0.attributes["data-category"]!) \($0.attributes["data-range"]!)" } == [
                "optimal <120", "normal 120–129", "high normal 130–139", "grade 1 140–159", "grade 2 160–179",
                "grade 3 ≥180",
            ])
        #expect(diaBands.map { $0.attributes["data-range"]! } == ["<80", "80–84", "85–89", "90–99", "100–109", "≥110"])
        #expect(root.having("panel", "pulse").first?.having("band").isEmpty == true)
        // Band y extents follow the thresholds: the 140–159 band is twice as tall as 130–139.
        let h = sysBands.map { $0.number("height")! }
        #expect(abs(h[3] - 2 * h[2]) < 0.05)

        // Readings: the failed one is a gap in every panel, the kPa one converted, the NRes pulse a gap.
        let sys = root.having("reading", "systolic").map { $0.attributes["data-value"]! }
        #expect(sys == ["118", "126", "134", "145", "141.8", "162", "128", "122"])
        #expect(root.having("reading", "diastolic").count == 8)
        #expect(root.having("reading", "pulse").count == 7)
        #expect(root.having("gap", "systolic").map { $0.attributes["data-value"] } == ["NaN"])
        #expect(Set(root.having("gap", "pulse").compactMap { $0.attributes["data-value"] }) == ["NaN", "NRes"])
        let notes = root.having("note").map(\.text).joined(separator: " ")
        #expect(
            notes.contains(
                "for systolic 1 reading, diastolic 1 reading, pulse 2 readings: marked × on the panel's floor, never drawn as 0"
            ))
        #expect(notes.contains("1 reading was in kPa, converted to mmHg"))

        // Weekly means, ISO weeks: W41 (118, 126), W42 (134; the failed reading does not count), …
        let weeks = root.having("weekly-mean", "systolic").map {
            "\($0.attributes["data-week"]!)=\($0.attributes["data-value"]!)/\($0.attributes["data-count"]!)"
        }
        #expect(
            weeks == [
                "2026-W41=122/2", "2026-W42=134/1", "2026-W43=145/1", "2026-W44=141.8/1", "2026-W45=162/1",
                "2026-W46=125/2",
            ])
        // Time ticks: dates, spaced so their labels do not overlap.
        let ticks = root.having("tick", "x")
        #expect(ticks.count >= 3)
        let xs = ticks.map { $0.number("x")! }
        for (a, b) in zip(xs, xs.dropFirst()) { #expect(b - a > Style.textWidth("2026-11-22", size: 11) + 4) }
        #expect(ticks.allSatisfy { CivilTime.seconds($0.text) != nil })
        // The legend names every category with its thresholds.
        #expect(root.having("legend-band").map { $0.attributes["data-category"]! } == Guideline.escEsh2018.categories)
    }

    @Test func guidelineAndFiltersChangeWhatIsDrawn() throws {
        let dir = try Paths.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = try HistoryFixture.makeStore(in: dir)
        let all = try PlotInput.history(store: path)
        #expect(all.count == 10)
        let since = try PlotInput.history(store: path, since: CivilTime.seconds("2026-11-01"))
        #expect(since.count == 4)
        #expect(try PlotInput.history(store: path, user: 2).count == 1)
        #expect(throws: PlotInputError.emptyStore(path: path, filtered: true)) {
            try PlotInput.history(store: path, user: 7)
        }
        #expect(throws: PlotInputError.storeURL("postgres://db/cuff")) {
            try PlotInput.history(store: "postgres://db/cuff")
        }

        let root = try SVGParse.parse(
            SVGWriter.document(HistoryChart.document(all, options: .init(guideline: .accAha2017, subtitle: "t"))))
        #expect(
            root.having("panel", "systolic").first!.having("band").map { $0.attributes["data-category"]! } == [
                "normal", "elevated", "stage 1", "stage 2",
            ])
        #expect(
            root.having("panel", "diastolic").first!.having("band").map { $0.attributes["data-range"]! } == [
                "<80", "80–89", "≥90",
            ])
    }

    /// Readings years apart (a cuff's clock fallen back to 2000; dates from 1582 to 9999) once
    /// fell through to a 364-day step whatever it gave: 28 labels 25 px apart, or 8,783 labels
    /// 0.08 px apart. Labels now stay a label's width apart, on any span; past a thousand years a
    /// step, only the first is drawn.
    @Test(arguments: [1.0, 31, 365, 3650, 9496, 50_000, 3_056_000])
    func timeLabelsNeverOverlap(_ days: Double) {
        let start = Double(CivilTime.days(year: 2000, month: 1, day: 1)) * 86_400
        let x = LinearScale(domain: start, start + days * 86_400, pixels: 80, 880)
        let ticks = HistoryChart.timeTicks(x)
        #expect(!ticks.isEmpty)
        let width = Style.textWidth("2026-11-22", size: 11)
        for (a, b) in zip(ticks, ticks.dropFirst()) { #expect(x(b.value) - x(a.value) >= width + 14, "\(days) days") }
        #expect(ticks.count <= 60)
    }

    @Test func bandLabelsDoNotOverlap() throws {
        let dir = try Paths.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let readings = try PlotInput.history(store: try HistoryFixture.makeStore(in: dir))
        let root = try SVGParse.parse(
            SVGWriter.document(HistoryChart.document(readings, options: .init(subtitle: "t"))))
        for panel in root.having("panel") {
            let ys = panel.having("band-label").map { $0.number("y")! }.sorted()
            for (a, b) in zip(ys, ys.dropFirst()) { #expect(b - a >= 13) }
        }
    }
}

extension HistoryChartTests {
    /// The centre of a marker: a circle, a square (rect) or a triangle (polygon).
    static func centre(_ m: XNode) -> (Double, Double) {
        if let cx = m.number("cx"), let cy = m.number("cy") { return (cx, cy) }
        if let x = m.number("x"), let w = m.number("width") {
            return (x + w / 2, m.number("y")! + m.number("height")! / 2)
        }
        let pts = (m.attributes["points"] ?? "").split(separator: " ").map {
            $0.split(separator: ",").map { Double($0)! }
        }
        return (pts.map { $0[0] }.reduce(0, +) / Double(pts.count), pts.map { $0[1] }.reduce(0, +) / Double(pts.count))
    }

    /// Weekly-mean labels never sit on a reading's marker, and every label stays inside its panel.
    @Test func weeklyLabelsAvoidMarkers() throws {
        let dir = try Paths.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let readings = try PlotInput.history(store: try HistoryFixture.makeStore(in: dir))
        let root = try SVGParse.parse(
            SVGWriter.document(HistoryChart.document(readings, options: .init(subtitle: "t"))))
        var labels = 0
        for panel in root.having("panel") {
            let frame = try #require(panel.having("frame").first)
            let top = frame.number("y")!, bottom = top + frame.number("height")!
            let marks = panel.having("reading").map(Self.centre)
            #expect(marks.count >= 7)
            for l in panel.having("weekly-label") {
                labels += 1
                let x0 = l.number("x")!, base = l.number("y")!, x1 = x0 + Style.textWidth(l.text, size: 10)
                #expect(base - 9 > top && base + 2 < bottom)
                for (mx, my) in marks {
                    #expect(
                        !(mx + 4 > x0 && mx - 4 < x1 && my + 4 > base - 9 && my - 4 < base + 2), "\(l.text) on a marker"
                    )
                }
            }
        }
        #expect(labels >= 12)
    }
}
