// SPDX-License-Identifier: GPL-2.0-or-later

/// The history chart: stored readings over time in three panels sharing one time axis —
/// systolic against the guideline's systolic category bands, diastolic against its diastolic
/// bands, and pulse on its own axis — with the mean of each ISO week.
///
/// Structure the tests read: `g.panel.systolic|diastolic|pulse`; bands are `rect.band` with
/// `data-category` and `data-range`; readings are `.reading.systolic|diastolic|pulse` with
/// `data-value`; weekly means `line.weekly-mean` with `data-week` and `data-value`; readings
/// without a value are `.gap` marks; notes are `text.note`.
public enum HistoryChart {
    public static let width = 960.0
    static let plotLeft = 74.0
    static let plotRight = 780.0

    public struct Options: Sendable {
        public var guideline: Guideline
        /// Said in the title: which store, which user, since when.
        public var subtitle: String

        public init(guideline: Guideline = .default, subtitle: String) {
            self.guideline = guideline
            self.subtitle = subtitle
        }
    }

    /// Weekly means of one series: (Monday's day number, mean, how many readings).
    public static func weeklyMeans(_ readings: [HistoryReading], _ value: (HistoryReading) -> Double?) -> [(
        weekStart: Int, mean: Double, count: Int
    )] {
        var sums: [Int: (Double, Int)] = [:]
        for r in readings {
            guard let v = value(r) else { continue }
            let w = CivilTime.weekStart(days: CivilTime.day(r.time))
            sums[w, default: (0, 0)].0 += v
            sums[w, default: (0, 0)].1 += 1
        }
        return sums.keys.sorted().map { (weekStart: $0, mean: sums[$0]!.0 / Double(sums[$0]!.1), count: sums[$0]!.1) }
    }

    public static func document(_ readings: [HistoryReading], options: Options) -> SVGElement {
        let g = options.guideline
        var els: [SVGElement] = []
        let sorted = readings.sorted { $0.time < $1.time }
        let first = sorted.first?.time ?? 0, last = sorted.last?.time ?? 0
        let dateRange =
            sorted.isEmpty
            ? ""
            : CivilTime.dateText(days: CivilTime.day(first)) + " – " + CivilTime.dateText(days: CivilTime.day(last))
        els.append(
            SVG.text(
                "Blood pressure history: \(sorted.count) reading\(sorted.count == 1 ? "" : "s"), \(dateRange)",
                x: 16, y: 26, size: 16, weight: "bold", classes: "title"))
        els.append(
            SVG.text(
                options.subtitle + " · categories: \(g.name) (office blood pressure)",
                x: 16, y: 46, size: 12, fill: Style.muted, classes: "subtitle"))

        // Time scale, shared by the panels.
        let span = max(last - first, 0)
        let pad = max(43_200, span * 0.04)
        let x = LinearScale(domain: first - pad, last + pad, pixels: plotLeft, plotRight)
        let ticks = timeTicks(x)

        // Panels.
        let sys = sorted.compactMap(\.systolicMmHg), dia = sorted.compactMap(\.diastolicMmHg),
            pulse = sorted.compactMap(\.pulse)
        func lowHigh(_ v: [Double], _ lo: Double, _ hi: Double, step: Double) -> (Double, Double) {
            let a = min(lo, (((v.min() ?? lo) - step / 2) / step).rounded(.down) * step)
            let b = max(hi, (((v.max() ?? hi) + step / 2) / step).rounded(.up) * step)
            return (a, b)
        }
        var top = 64.0
        var panels: [SVGElement] = []
        let (sLo, sHi) = lowHigh(sys, 90, 190, step: 10)
        let (dLo, dHi) = lowHigh(dia, 50, 120, step: 10)
        let (pLo, pHi) = lowHigh(pulse, 50, 100, step: 10)
        let specs:
            [(
                kind: String, title: String, unit: String, lo: Double, hi: Double, height: Double,
                bands: [Guideline.Band],
                shape: MarkerShape, colour: String, value: (HistoryReading) -> Double?,
                raw: (HistoryReading) -> PlotValue
            )] = [
                (
                    "systolic", "systolic", "mmHg", sLo, sHi, 230, g.systolic, .triangleUp, Style.vermillion,
                    { $0.systolicMmHg }, { $0.result.systolic }
                ),
                (
                    "diastolic", "diastolic", "mmHg", dLo, dHi, 180, g.diastolic, .circle, Style.blue,
                    { $0.diastolicMmHg }, { $0.result.diastolic }
                ),
                (
                    "pulse", "pulse", "/min", pLo, pHi, 130, [], .square, Style.bluishGreen, { $0.pulse },
                    { $0.result.pulseRate }
                ),
            ]
        var gapCount: [String: Int] = [:]
        for (i, p) in specs.enumerated() {
            var pe: [SVGElement] = []
            let bottom = top + p.height
            let y = LinearScale(domain: p.lo, p.hi, pixels: bottom, top)
            // Category bands, then their names in the margin (moved apart, dropped if they cannot fit).
            var bandLabels: [(y: Double, text: String)] = []
            for b in p.bands {
                let lo = max(b.lower ?? p.lo, p.lo), hi = min(b.upper ?? p.hi, p.hi)
                guard hi > lo else { continue }
                let fill = Style.bandFills[
                    min(
                        Style.bandFills.count - 1,
                        b.level * (Style.bandFills.count - 1) / max(1, g.categories.count - 1))]
                pe.append(
                    SVG.rect(
                        x: plotLeft, y: y(hi), width: plotRight - plotLeft, height: y(lo) - y(hi), fill: fill,
                        classes: "band",
                        extra: [SVGAttribute("data-category", b.category), SVGAttribute("data-range", b.rangeText)]))
                bandLabels.append(((y(lo) + y(hi)) / 2, "\(b.category) \(b.rangeText)"))
            }
            let placed = LabelLayout.place(bandLabels.map(\.y), size: 13, lower: top, upper: bottom)
            for (j, l) in bandLabels.enumerated() {
                guard let ly = placed[j] else { continue }
                pe.append(SVG.text(l.text, x: plotRight + 8, y: ly + 4, size: 11, classes: "band-label"))
            }
            // Grid and y axis.
            let yTicks = Ticks.linear(y, minGap: 6) { _ in 12 }
            let step = yTicks.count > 1 ? yTicks[1] - yTicks[0] : 1
            for v in yTicks {
                pe.append(SVG.line(plotLeft, y(v), plotRight, y(v), stroke: Style.grid, width: 0.8, classes: "grid"))
                pe.append(
                    SVG.text(
                        Ticks.label(v, step: step), x: plotLeft - 6, y: y(v) + 4, size: 11, anchor: .end,
                        classes: "tick y"))
            }
            for t in ticks {
                pe.append(
                    SVG.line(x(t.value), top, x(t.value), bottom, stroke: Style.grid, width: 0.8, classes: "grid"))
            }
            pe.append(
                SVG.rect(
                    x: plotLeft, y: top, width: plotRight - plotLeft, height: p.height, fill: "none",
                    stroke: Style.axis, classes: "frame"))
            pe.append(
                SVG.text(
                    "\(p.title) (\(p.unit))", x: 22, y: (top + bottom) / 2, size: 12, anchor: .middle,
                    classes: "axis-title y", rotate: -90))
            // Weekly means, labelled above or below their line where no reading's marker is.
            let markers = sorted.compactMap { r in p.value(r).map { (x(r.time), y(min(max($0, p.lo), p.hi))) } }
            func free(_ x0: Double, _ x1: Double, _ y0: Double, _ y1: Double) -> Bool {
                y0 > top + 1 && y1 < bottom - 1
                    && !markers.contains { $0.0 + 5 > x0 && $0.0 - 5 < x1 && $0.1 + 5 > y0 && $0.1 - 5 < y1 }
            }
            for w in weeklyMeans(sorted, p.value) {
                let from = max(Double(w.weekStart) * 86_400, x.lower),
                    to = min(Double(w.weekStart + 7) * 86_400, x.upper)
                let wk = CivilTime.isoWeek(days: w.weekStart)
                let label = "\(wk.year)-W\(CivilTime.pad(wk.week, 2))"
                let py = y(w.mean)
                pe.append(
                    SVG.line(
                        x(from), py, x(to), py, stroke: Style.ink, width: 2, dash: "8 3 2 3",
                        classes: "weekly-mean \(p.kind)",
                        extra: [
                            SVGAttribute("data-week", label),
                            SVGAttribute("data-value", SVGNumber.format(w.mean, decimals: 1)),
                            SVGAttribute("data-count", String(w.count)),
                        ]))
                let text = "W\(wk.week) \(SVGNumber.format(w.mean, decimals: 0))"
                let tw = Style.textWidth(text, size: 10)
                if tw + 6 < x(to) - x(from) {
                    // Baselines above and below the line; the text spans 9 px above its baseline.
                    for (x0, base) in [
                        (x(from) + 4, py - 5), (x(from) + 4, py + 13), (x(to) - 4 - tw, py - 5),
                        (x(to) - 4 - tw, py + 13),
                    ]
                    where free(x0, x0 + tw, base - 9, base + 2) {
                        pe.append(SVG.text(text, x: x0, y: base, size: 10, classes: "weekly-label"))
                        break
                    }
                }
            }
            // Readings; a reading without a value is a gap mark on the panel's floor.
            for r in sorted {
                if let v = p.value(r) {
                    pe.append(
                        SVG.marker(
                            p.shape, x: x(r.time), y: y(min(max(v, p.lo), p.hi)), size: 9, fill: p.colour,
                            classes: "reading \(p.kind)",
                            extra: [
                                SVGAttribute("data-value", SVGNumber.format(v, decimals: 1)),
                                SVGAttribute("data-time", CivilTime.dateTimeText(r.time)),
                            ]))
                } else {
                    gapCount[p.kind, default: 0] += 1
                    pe.append(
                        SVG.marker(
                            .cross, x: x(r.time), y: bottom - 6, size: 8, fill: "none", stroke: Style.muted,
                            classes: "gap \(p.kind)",
                            extra: [SVGAttribute("data-value", p.raw(r).text)]))
                }
            }
            // Time labels under the last panel only.
            if i == specs.count - 1 {
                for t in ticks {
                    pe.append(
                        SVG.line(x(t.value), bottom, x(t.value), bottom + 5, stroke: Style.axis, classes: "tick-mark"))
                    pe.append(
                        SVG.text(t.label, x: x(t.value), y: bottom + 18, size: 11, anchor: .middle, classes: "tick x"))
                }
                pe.append(
                    SVG.text(
                        "date (the cuff's clock)", x: (plotLeft + plotRight) / 2, y: bottom + 36, size: 12,
                        anchor: .middle, classes: "axis-title x"))
            }
            panels.append(SVG.group("panel \(p.kind)", [], pe))
            top = bottom + (i == specs.count - 1 ? 48 : 14)
        }
        els.append(contentsOf: panels)

        // Legend.
        var flow = LegendFlow(left: plotLeft, right: width - 10, y: top + 10)
        func key(_ label: String, _ draw: (Double, Double) -> SVGElement) { flow.key(label, draw) }
        key("systolic") {
            SVG.marker(.triangleUp, x: $0 + 11, y: $1, size: 10, fill: Style.vermillion, classes: "legend-key")
        }
        key("diastolic") { SVG.marker(.circle, x: $0 + 11, y: $1, size: 10, fill: Style.blue, classes: "legend-key") }
        key("pulse") {
            SVG.marker(.square, x: $0 + 11, y: $1, size: 10, fill: Style.bluishGreen, classes: "legend-key")
        }
        key("mean of the ISO week (W47 = week 47)") {
            SVG.line($0, $1, $0 + 22, $1, stroke: Style.ink, width: 2, dash: "8 3 2 3", classes: "legend-key")
        }
        if !gapCount.isEmpty {
            key("no value (NaN, NRes…)") {
                SVG.marker(.cross, x: $0 + 11, y: $1, size: 8, fill: "none", stroke: Style.muted, classes: "legend-key")
            }
        }
        // The guideline's categories, each with its swatch and thresholds.
        flow.newLine(below: 24)
        flow.elements.append(
            SVG.text(
                "\(g.name) categories (systolic and/or diastolic, mmHg; a reading takes the higher):", x: plotLeft,
                y: flow.y, size: 12, weight: "bold", classes: "legend-title"))
        flow.newLine(below: 20)
        for (level, c) in g.categories.enumerated() {
            let s = g.systolic.first { $0.level == level }, d = g.diastolic.first { $0.level == level }
            var thr = [s.map { "SYS " + $0.rangeText }, d.map { "DIA " + $0.rangeText }].compactMap { $0 }.joined(
                separator: " / ")
            if d == nil, let s0 = g.diastolic.first(where: { $0.level < level && ($0.upper ?? 0) > 0 }) {
                thr += " with DIA " + s0.rangeText
            }
            let label = "\(c): \(thr)"
            let (lx, ly) = flow.place(width: Style.textWidth(label, size: 11) + 34)
            let fill = Style.bandFills[
                min(Style.bandFills.count - 1, level * (Style.bandFills.count - 1) / max(1, g.categories.count - 1))]
            flow.elements.append(
                SVG.rect(
                    x: lx, y: ly - 10, width: 18, height: 12, fill: fill, stroke: Style.axis, classes: "legend-band",
                    extra: [SVGAttribute("data-category", c)]))
            flow.elements.append(SVG.text(label, x: lx + 24, y: ly, size: 11, classes: "legend-label"))
        }
        flow.newLine(below: 18)
        flow.elements.append(
            SVG.text(
                "Source: " + g.source + ".", x: plotLeft, y: flow.y, size: 10, fill: Style.muted, classes: "source"))
        els.append(contentsOf: flow.elements)
        var ly = flow.y

        // Notes.
        var notes: [String] = []
        let gaps = ["systolic", "diastolic", "pulse"].compactMap { k in
            gapCount[k].map { "\(k) \($0) reading\($0 == 1 ? "" : "s")" }
        }
        if !gaps.isEmpty {
            notes.append(
                "No value (a special value such as NaN or NRes, or none sent) for \(gaps.joined(separator: ", ")): marked × on the panel's floor, never drawn as 0."
            )
        }
        let kpa = sorted.filter { $0.result.unit == .kPa }.count
        if kpa > 0 {
            notes.append(
                "\(kpa) reading\(kpa == 1 ? " was" : "s were") in kPa, converted to mmHg (1 kPa = 7.5006 mmHg).")
        }
        for n in notes {
            for l in TextWrap.lines(n, width: width - plotLeft - 20, size: 12) {
                ly += 18
                els.append(SVG.text(l, x: plotLeft, y: ly, size: 12, classes: "note"))
            }
        }
        return SVG.root(width: width, height: ly + 20, title: "cuff plot: blood pressure history", children: els)
    }

    /// Ticks on a time axis (seconds since 1970, local): the smallest step among hours, days,
    /// weeks, months and (52-week) years whose labels fit side by side; day-or-longer steps fall
    /// on midnights, weeks on Mondays. When not even a step of a thousand years fits (readings
    /// centuries apart, as a cuff's clock gone wrong gives), only the first label is drawn: labels
    /// are never printed over each other.
    public static func timeTicks(_ x: LinearScale) -> [(value: Double, label: String)] {
        let hour = 3600.0, day = 86_400.0, year = 364 * day
        let steps =
            [
                hour, 2 * hour, 3 * hour, 6 * hour, 12 * hour, day, 2 * day, 7 * day, 14 * day, 28 * day, 91 * day,
                182 * day,
            ]
            + [1.0, 2, 5, 10, 20, 50, 100, 200, 500, 1000].map { $0 * year }
        for step in steps {
            let subDay = step < day
            let sample = subDay ? "11-22 08:00" : "2026-11-22"
            let fits = step * x.pixelsPerUnit >= Style.textWidth(sample, size: 11) + 14
            guard fits || step == steps.last else { continue }
            var t: Double
            if step >= 7 * day {
                t = Double(CivilTime.weekStart(days: CivilTime.day(x.lower))) * day
            } else {
                t = (x.lower / step).rounded(.down) * step
            }
            var out: [(Double, String)] = []
            while t <= x.upper {
                if t >= x.lower {
                    let text: String
                    if subDay {
                        let full = CivilTime.dateTimeText(t)  // 2026-11-22 08:00
                        text = String(full.dropFirst(5))
                    } else {
                        text = CivilTime.dateText(days: CivilTime.day(t))
                    }
                    out.append((t, text))
                    if !fits { return out }  // the first only
                }
                t += step
            }
            return out
        }
        return []
    }
}
