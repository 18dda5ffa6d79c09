// SPDX-License-Identifier: GPL-2.0-or-later

/// The session chart: one panel per session, each with the cuff pressure over time (inflating
/// and deflating drawn apart), the result marked where the deflating curve passes it, the pulse,
/// the status flags that were set, the device, the time and the unit.
///
/// Structure the tests read: each panel is `<g class="panel" data-session="N">`; curve runs are
/// `polyline.curve.inflating|deflating` with `data-samples` (the records drawn by that run);
/// result markers are `.result-marker.systolic|diastolic|map` with `data-value`; flags are
/// `text.flag`; notes (special values, stored readings, how the session ended) are `text.note`;
/// gaps in the curve are `.gap` marks on the time axis.
public enum SessionChart {
    public static let width = 960.0
    static let plotLeft = 74.0
    static let plotRight = 680.0
    static let plotHeight = 290.0
    static let boxLeft = 712.0

    /// The whole SVG document for `sessions`; `numbers[i]` is session i's number in its input
    /// (1-based), shown in the panel title.
    public static func document(_ sessions: [(number: Int, session: PlotSession)], source: String) -> SVGElement {
        var panels: [SVGElement] = []
        var y = 0.0
        for (number, s) in sessions {
            let (panel, height) = self.panel(s, number: number, of: sessions.count, source: source, top: y)
            panels.append(panel)
            y += height
        }
        let title = "cuff plot: " + source
        return SVG.root(width: width, height: y, title: title, children: panels)
    }

    struct Run {
        var phase: Phase
        var points: [(Double, Double)] = []
        var samples = 0
        /// Times and pressures of the run's own numeric samples (for finding where the result is crossed).
        var data: [(t: Double, p: Double)] = []
    }

    /// One panel, and its height.
    static func panel(_ s: PlotSession, number: Int, of count: Int, source: String, top: Double) -> (SVGElement, Double)
    {
        let unit = s.unit
        let unitText = unit.rawValue
        var els: [SVGElement] = []

        // Times: seconds since the first cuff-pressure record (its `elapsed` added back).
        let allTimed = !s.samples.isEmpty && s.samples.allSatisfy { $0.receivedAt != nil }
        let origin = allTimed ? s.samples[0].receivedAt! - s.samples[0].elapsed : nil
        let times = s.samples.map { sample in origin.map { sample.receivedAt! - $0 } ?? sample.elapsed }
        let live = s.results.filter { !$0.stored }
        let stored = s.results.filter(\.stored)
        func resultTime(_ r: PlotResult) -> Double? {
            if let origin, let at = r.receivedAt { return at - origin }
            return times.last
        }

        // Header.
        let header =
            count > 1 ? "Session \(number) of \(count): \(s.device.text)" : "Session \(number): \(s.device.text)"
        els.append(SVG.text(header, x: 16, y: top + 24, size: 15, weight: "bold", classes: "title"))
        var sub: [String] = []
        if let t = s.startedAt ?? s.samples.first?.receivedAt ?? s.results.first?.receivedAt {
            sub.append("started " + CivilTime.dateTimeText(t, seconds: true) + " UTC")
        }
        sub.append("cuff unit: " + unitText)
        if let o = s.outcome { sub.append("outcome: " + o.replacingUnderscores) }
        sub.append("source: " + source)
        els.append(
            SVG.text(sub.joined(separator: " · "), x: 16, y: top + 44, size: 12, fill: Style.muted, classes: "subtitle")
        )

        let plotTop = top + 64
        let plotBottom = plotTop + plotHeight

        // A result in the other unit (a kPa result in an mmHg session) is drawn where its value
        // lies in the session's unit; its labels keep the unit it came in.
        func inChartUnit(_ v: PlotValue, _ from: PressureUnitName) -> Double? {
            guard let n = v.number else { return nil }
            if from == unit { return n }
            return from == .kPa ? n * PressureUnitName.mmHgPerKPa : n / PressureUnitName.mmHgPerKPa
        }
        // Scales.
        let numbers =
            s.samples.compactMap(\.pressure.number)
            + live.flatMap { r in
                [r.systolic, r.diastolic, r.meanArterialPressure].compactMap { inChartUnit($0, r.unit) }
            }
        let maxP = numbers.max() ?? (unit == .kPa ? 24 : 180)
        let (_, yHi) = Ticks.niceDomain(0, max(maxP * 1.06, unit == .kPa ? 2 : 10), count: 6)
        let y = LinearScale(domain: 0, yHi, pixels: plotBottom, plotTop)
        let maxT = max((times + live.compactMap(resultTime)).max() ?? 1, 1)
        let (_, xHi) = Ticks.niceDomain(0, maxT, count: 8)
        let x = LinearScale(domain: 0, xHi, pixels: plotLeft, plotRight)

        // Phase bands behind everything.
        var spans: [(phase: Phase, from: Double, to: Double)] = []
        for (i, sample) in s.samples.enumerated() {
            if let last = spans.last, last.phase == sample.phase {
                spans[spans.count - 1].to = times[i]
            } else {
                if !spans.isEmpty { spans[spans.count - 1].to = times[i] }
                spans.append((sample.phase, times[i], times[i]))
            }
        }
        for span in spans {
            let x0 = x(span.from), x1 = x(span.to)
            let fill = span.phase == .inflating ? "#FCEFD6" : "#E4EFF7"
            els.append(
                SVG.rect(
                    x: x0, y: plotTop, width: x1 - x0, height: plotHeight, fill: fill,
                    classes: "phase \(span.phase.rawValue)"))
            let label = span.phase.rawValue
            if Style.textWidth(label, size: 11) + 6 < x1 - x0 {
                els.append(
                    SVG.text(
                        label, x: (x0 + x1) / 2, y: plotTop + 14, size: 11, anchor: .middle, fill: Style.muted,
                        classes: "phase-label"))
            }
        }

        // Grid and axes.
        let yTicks = Ticks.linear(y, minGap: 6) { _ in 12 }
        let yStep = yTicks.count > 1 ? yTicks[1] - yTicks[0] : 1
        for v in yTicks {
            els.append(SVG.line(plotLeft, y(v), plotRight, y(v), stroke: Style.grid, classes: "grid"))
            els.append(
                SVG.text(
                    Ticks.label(v, step: yStep), x: plotLeft - 6, y: y(v) + 4, size: 11, anchor: .end, classes: "tick y"
                ))
        }
        let xTicks = Ticks.linear(x, minGap: 12) { Style.textWidth(Ticks.label($0, step: 1), size: 11) }
        let xStep = xTicks.count > 1 ? xTicks[1] - xTicks[0] : 1
        for v in xTicks {
            els.append(SVG.line(x(v), plotBottom, x(v), plotBottom + 5, stroke: Style.axis, classes: "tick-mark"))
            els.append(
                SVG.text(
                    Ticks.label(v, step: xStep), x: x(v), y: plotBottom + 18, size: 11, anchor: .middle,
                    classes: "tick x"))
        }
        els.append(
            SVG.rect(
                x: plotLeft, y: plotTop, width: plotRight - plotLeft, height: plotHeight, fill: "none",
                stroke: Style.axis, classes: "frame"))
        els.append(
            SVG.text(
                "cuff pressure (\(unitText))", x: 22, y: (plotTop + plotBottom) / 2, size: 12, anchor: .middle,
                classes: "axis-title y", rotate: -90))
        els.append(
            SVG.text(
                "time since the cuff started (s)", x: (plotLeft + plotRight) / 2, y: plotBottom + 36, size: 12,
                anchor: .middle, classes: "axis-title x"))

        // The curve: one polyline per run of one phase without a special value; a special value is a gap.
        var runs: [Run] = []
        var gaps: [(t: Double, value: String)] = []
        var open: Run?
        var lastPoint: (Double, Double)?
        for (i, sample) in s.samples.enumerated() {
            guard let p = sample.pressure.number else {
                if let r = open { runs.append(r) }
                open = nil
                lastPoint = nil
                gaps.append((times[i], sample.pressure.text))
                continue
            }
            let pt = (x(times[i]), y(p))
            if open?.phase != sample.phase {
                if let r = open { runs.append(r) }
                open = Run(phase: sample.phase)
                // Join to the previous phase's last point so the curve stays continuous.
                if let lastPoint { open!.points.append(lastPoint) }
            }
            open!.points.append(pt)
            open!.samples += 1
            open!.data.append((times[i], p))
            lastPoint = pt
        }
        if let r = open { runs.append(r) }
        for r in runs {
            let inflating = r.phase == .inflating
            els.append(
                SVG.polyline(
                    r.points.count == 1 ? [r.points[0], (r.points[0].0 + 0.5, r.points[0].1)] : r.points,
                    stroke: inflating ? Style.orange : Style.blue, width: inflating ? 2 : 2.2,
                    dash: inflating ? "7 4" : nil, classes: "curve \(r.phase.rawValue)",
                    extra: [SVGAttribute("data-samples", String(r.samples))]))
        }
        for g in gaps {
            els.append(
                SVG.marker(
                    .cross, x: x(g.t), y: plotBottom - 6, size: 8, fill: "none", stroke: Style.muted,
                    classes: "gap", extra: [SVGAttribute("data-value", g.value)]))
        }

        // Result markers: where the deflating curve passes each value (else at the result's time).
        struct Mark {
            var kind: String; var label: String; var value: Double; var text: String; var shape: MarkerShape;
            var colour: String
        }
        var labelWanted: [(y: Double, x: Double, text: String, colour: String)] = []
        for r in live {
            let marks = [
                Mark(
                    kind: "systolic", label: "SYS", value: inChartUnit(r.systolic, r.unit) ?? .nan,
                    text: r.systolic.text,
                    shape: .triangleUp, colour: Style.vermillion),
                Mark(
                    kind: "map", label: "MAP", value: inChartUnit(r.meanArterialPressure, r.unit) ?? .nan,
                    text: r.meanArterialPressure.text, shape: .diamond, colour: Style.reddishPurple),
                Mark(
                    kind: "diastolic", label: "DIA", value: inChartUnit(r.diastolic, r.unit) ?? .nan,
                    text: r.diastolic.text,
                    shape: .triangleDown, colour: Style.skyBlue),
            ]
            let at = resultTime(r) ?? maxT
            for m in marks where m.value.isFinite {
                let t = crossing(of: m.value, in: runs.filter { $0.phase == .deflating }, before: at) ?? at
                let px = x(min(max(t, 0), xHi)), py = y(min(max(m.value, 0), yHi))
                els.append(
                    SVG.line(
                        plotLeft, py, px, py, stroke: m.colour, width: 1.2, dash: "2 3",
                        classes: "result-guide \(m.kind)"))
                els.append(
                    SVG.marker(
                        m.shape, x: px, y: py, size: 12, fill: m.colour, classes: "result-marker \(m.kind)",
                        extra: [SVGAttribute("data-value", m.text), SVGAttribute("data-time", SVGNumber.format(t))]))
                labelWanted.append((py, px, "\(m.label) \(m.text)", m.colour))
            }
        }
        // Labels right of their markers (left when there is no room), moved apart vertically.
        let placed = LabelLayout.place(labelWanted.map(\.y), size: 15, lower: plotTop, upper: plotBottom)
        for (i, w) in labelWanted.enumerated() {
            guard let ly = placed[i] else { continue }
            let tw = Style.textWidth(w.text, size: 12)
            let right = w.x + 12 + tw < plotRight
            let lx = right ? w.x + 10 : w.x - 10 - tw
            els.append(
                SVG.rect(
                    x: lx - 2, y: ly - 8, width: tw + 4, height: 16, fill: "#FFFFFF", classes: "label-backdrop",
                    extra: [SVGAttribute("fill-opacity", "0.85")]))
            els.append(SVG.text(w.text, x: lx, y: ly + 4, size: 12, weight: "bold", classes: "result-label"))
        }

        // The result box on the right.
        var box: [SVGElement] = []
        var by = plotTop + 4
        func line(
            _ s: String, size: Double = 12, weight: String? = nil, fill: String = Style.ink, classes: String,
            indent: Double = 0
        ) {
            for l in TextWrap.lines(s, width: width - boxLeft - 14 - indent, size: size) {
                by += size + 5
                box.append(
                    SVG.text(l, x: boxLeft + indent, y: by, size: size, weight: weight, fill: fill, classes: classes))
            }
        }
        if live.isEmpty {
            line(stored.isEmpty ? "No result" : "No new result", size: 14, weight: "bold", classes: "box-heading")
            if !stored.isEmpty { line("only stored readings (see the notes below)", classes: "box-line") }
            if let m = s.message ?? s.outcome { line(m.replacingUnderscores, classes: "box-line") }
        }
        for (i, r) in live.enumerated() {
            line(live.count > 1 ? "Result \(i + 1)" : "Result", size: 14, weight: "bold", classes: "box-heading")
            for (label, v, shape, colour) in [
                ("SYS", r.systolic, MarkerShape.triangleUp, Style.vermillion),
                ("DIA", r.diastolic, .triangleDown, Style.skyBlue),
                ("MAP", r.meanArterialPressure, .diamond, Style.reddishPurple),
            ] {
                by += 18
                box.append(SVG.marker(shape, x: boxLeft + 6, y: by - 4, size: 10, fill: colour, classes: "box-key"))
                var t = "\(label) \(v.text)"
                if v.number != nil { t += " " + r.unit.rawValue }
                if r.unit == .kPa, let mm = HistoryReading.mmHg(v, .kPa) {
                    t += " (\(SVGNumber.format(mm, decimals: 0)) mmHg)"
                }
                if v.number == nil { t += " (no value)" }
                box.append(SVG.text(t, x: boxLeft + 18, y: by, size: 13, classes: "box-value \(label.lowercased())"))
            }
            by += 18
            let pulse =
                r.pulseRate.number != nil
                ? "Pulse \(r.pulseRate.text) /min"
                : r.pulseRate == .missing ? "Pulse not sent" : "Pulse \(r.pulseRate.text) (no value)"
            box.append(SVG.text(pulse, x: boxLeft + 18, y: by, size: 13, classes: "box-value pulse"))
            if let t = r.deviceTime {
                line("cuff time " + t.replacingOccurrences(of: "T", with: " "), classes: "box-line")
            }
            if let u = r.userID { line("user \(u)", classes: "box-line") }
            let flags = r.status?.setNames ?? []
            if r.status == nil {
                line("status: not sent", classes: "box-line")
            } else if flags.isEmpty {
                line("status: no flag set", classes: "box-line")
            } else {
                line("status flags set:", classes: "box-line")
                for f in flags { line("⚠ " + f, weight: "bold", fill: Style.vermillion, classes: "flag", indent: 8) }
            }
            by += 6
        }

        // Legend under the plot.
        var flow = LegendFlow(left: plotLeft, right: width - 10, y: plotBottom + 58)
        func key(_ label: String, _ draw: (Double, Double) -> SVGElement) { flow.key(label, draw) }
        if runs.contains(where: { $0.phase == .inflating }) {
            key("inflating") {
                SVG.line($0, $1, $0 + 22, $1, stroke: Style.orange, width: 2, dash: "7 4", classes: "legend-key")
            }
        }
        if runs.contains(where: { $0.phase == .deflating }) {
            key("deflating") { SVG.line($0, $1, $0 + 22, $1, stroke: Style.blue, width: 2.2, classes: "legend-key") }
        }
        let drawn = Set(labelWanted.map { String($0.text.prefix(3)) })
        if drawn.contains("SYS") {
            key("systolic") {
                SVG.marker(.triangleUp, x: $0 + 11, y: $1, size: 11, fill: Style.vermillion, classes: "legend-key")
            }
        }
        if drawn.contains("MAP") {
            key("mean arterial pressure") {
                SVG.marker(.diamond, x: $0 + 11, y: $1, size: 11, fill: Style.reddishPurple, classes: "legend-key")
            }
        }
        if drawn.contains("DIA") {
            key("diastolic") {
                SVG.marker(.triangleDown, x: $0 + 11, y: $1, size: 11, fill: Style.skyBlue, classes: "legend-key")
            }
        }
        if !gaps.isEmpty {
            key("no value (gap)") {
                SVG.marker(.cross, x: $0 + 11, y: $1, size: 8, fill: "none", stroke: Style.muted, classes: "legend-key")
            }
        }

        var ly = flow.y
        let legend = flow.elements

        // Notes.
        var notes: [String] = []
        if s.samples.isEmpty { notes.append("No cuff-pressure values in this session: there is no curve to draw.") }
        if !gaps.isEmpty {
            let kinds = Set(gaps.map(\.value)).sorted().joined(separator: ", ")
            notes.append(
                "\(gaps.count) cuff-pressure value\(gaps.count == 1 ? " was" : "s were") a special value (\(kinds)): drawn as gaps in the curve (×), not as 0."
            )
        }
        for (i, r) in live.enumerated() {
            let special = [
                ("systolic", r.systolic), ("diastolic", r.diastolic),
                ("mean arterial pressure", r.meanArterialPressure), ("pulse", r.pulseRate),
            ]
            .filter { if case .special = $0.1 { true } else { false } }
            if !special.isEmpty {
                let list = special.map { "\($0.0) \($0.1.text)" }.joined(separator: ", ")
                notes.append(
                    "Result\(live.count > 1 ? " \(i + 1)" : ""): the cuff sent special values (\(list)); they are not marked, not plotted as 0."
                )
            }
        }
        if !stored.isEmpty {
            let list = stored.map { r in
                "\(r.systolic.text)/\(r.diastolic.text) \(r.unit.rawValue)"
                    + (r.deviceTime.map { " at " + $0.replacingOccurrences(of: "T", with: " ") } ?? "")
            }.joined(separator: "; ")
            notes.append(
                "\(stored.count) stored reading\(stored.count == 1 ? "" : "s") also came in this session (taken earlier, not on this curve): \(list)."
            )
        }
        if let o = s.outcome, o != "completed" {
            notes.append("The session ended: \(o.replacingUnderscores)" + (s.message.map { " (\($0))" } ?? "") + ".")
        }
        var noteEls: [SVGElement] = []
        for n in notes {
            for l in TextWrap.lines(n, width: width - plotLeft - 20, size: 12) {
                ly += 18
                noteEls.append(SVG.text(l, x: plotLeft, y: ly, size: 12, fill: Style.ink, classes: "note"))
            }
        }

        let bottom = max(ly, by) + 22
        els.append(contentsOf: box)
        els.append(contentsOf: legend)
        els.append(contentsOf: noteEls)
        // A rule between panels.
        els.append(SVG.line(0, bottom - 1, width, bottom - 1, stroke: Style.grid, classes: "panel-rule"))
        return (SVG.group("panel", [SVGAttribute("data-session", String(number))], els), bottom - top)
    }

    /// The first time the deflating curve falls through `value`, searching the runs that end by
    /// `before` from the last one back; nil when no run crosses it.
    static func crossing(of value: Double, in runs: [Run], before: Double) -> Double? {
        for r in runs.reversed() where (r.data.first?.t ?? .infinity) <= before + 1e-9 {
            for i in r.data.indices.dropLast() {
                let a = r.data[i], b = r.data[i + 1]
                if a.p >= value && b.p <= value && a.p != b.p {
                    return a.t + (a.p - value) / (a.p - b.p) * (b.t - a.t)
                }
                if a.p == value { return a.t }
            }
        }
        return nil
    }
}

extension String {
    var replacingUnderscores: String { split(separator: "_", omittingEmptySubsequences: false).joined(separator: " ") }

    func replacingOccurrences(of a: Character, with b: Character) -> String { String(map { $0 == a ? b : $0 }) }

    func replacingOccurrences(of a: String, with b: String) -> String {
        guard a.count == 1, b.count == 1 else { return self }
        return replacingOccurrences(of: Character(a), with: Character(b))
    }
}
