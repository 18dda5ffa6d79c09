// SPDX-License-Identifier: GPL-2.0-or-later

/// A linear map from a data interval to a pixel interval (which may run backwards, as a y axis does).
public struct LinearScale: Sendable, Hashable {
    public let lower: Double
    public let upper: Double
    public let pixelStart: Double
    public let pixelEnd: Double

    public init(domain lower: Double, _ upper: Double, pixels start: Double, _ end: Double) {
        self.lower = lower
        self.upper = upper == lower ? lower + 1 : upper
        self.pixelStart = start
        self.pixelEnd = end
    }

    public func callAsFunction(_ v: Double) -> Double {
        pixelStart + (v - lower) / (upper - lower) * (pixelEnd - pixelStart)
    }

    /// Pixels per data unit (absolute).
    public var pixelsPerUnit: Double { abs(pixelEnd - pixelStart) / (upper - lower) }

    public func contains(_ v: Double) -> Bool { v >= lower && v <= upper }
}

/// Tick positions: "nice" steps (1, 2, 2.5 or 5 times a power of ten) chosen so that the labels,
/// at their measured width, do not overlap.
public enum Ticks {
    /// The smallest nice step at least `raw`.
    public static func niceStep(_ raw: Double) -> Double {
        guard raw.isFinite, raw > 0 else { return 1 }
        var p = 1.0
        while p > raw { p /= 10 }
        while p * 10 <= raw { p *= 10 }
        for m in [1.0, 2.0, 2.5, 5.0, 10.0] where p * m >= raw * (1 - 1e-9) { return p * m }
        return p * 10
    }

    /// A domain widened outward to multiples of a nice step, for about `count` intervals.
    public static func niceDomain(_ lo: Double, _ hi: Double, count: Int = 6) -> (Double, Double) {
        var lo = lo, hi = hi
        if hi <= lo { hi = lo + 1 }
        let step = niceStep((hi - lo) / Double(max(1, count)))
        lo = (lo / step).rounded(.down) * step
        hi = (hi / step).rounded(.up) * step
        return (lo, hi)
    }

    /// Ticks in `scale`'s domain, every nice step, with at least `minGap` pixels between labels
    /// (or between tick lines, on a vertical axis: give the font's line height).
    /// - Parameter labelSize: the pixel extent of a label along the axis, from its text.
    /// A domain no nice step can divide into a few thousand ticks (a span past the Double range,
    /// or ends so large that a step no longer moves them) gets its two ends only.
    public static func linear(_ scale: LinearScale, minGap: Double = 10, labelSize: (Double) -> Double) -> [Double] {
        let span = scale.upper - scale.lower
        guard span.isFinite, span > 0, span / max(abs(scale.lower), abs(scale.upper)) > 1e-12 else {
            return [scale.lower, scale.upper].filter(\.isFinite)
        }
        var step = niceStep(span / 12)
        for _ in 0..<40 {
            let ticks = values(scale.lower, scale.upper, step)
            // Neighbouring labels, centred on their ticks, must not touch.
            let px = step * scale.pixelsPerUnit
            let widest = ticks.map(labelSize).max() ?? 0
            if px >= widest + minGap || ticks.count <= 2 { return ticks }
            let next = niceStep(step * 1.0001 * 1.5)
            guard next.isFinite, next > step else { break }  // past the largest Double
            step = next
        }
        return [scale.lower, scale.upper]
    }

    /// Every multiple of `step` in [lo, hi]; at most `limit` of them (a step too small for the
    /// domain, or one that no longer moves numbers this large, stops there instead of looping).
    static func values(_ lo: Double, _ hi: Double, _ step: Double, limit: Int = 10_000) -> [Double] {
        var out: [Double] = []
        var i = (lo / step - 1e-9).rounded(.up)
        let slack = hi + step * 1e-9
        let top = slack.isFinite ? slack : hi  // (near the largest Double the slack overflows)
        guard i.isFinite else { return out }
        while i * step <= top, out.count < limit, i + 1 != i {
            let v = i * step
            out.append(abs(v) < step * 1e-9 ? 0 : v)
            i += 1
        }
        return out
    }

    /// A tick label: as few decimals as the step needs.
    public static func label(_ v: Double, step: Double) -> String {
        var decimals = 0
        var s = step
        while decimals < 4 && abs(s - s.rounded()) > 1e-9 {
            s *= 10
            decimals += 1
        }
        return SVGNumber.format(v, decimals: decimals)
    }
}

/// One-dimensional label placement: labels wanted at positions along an axis, each `size`
/// pixels long, moved apart by the least amount so none overlap, within [lower, upper]. When they
/// cannot all fit, the label that would have to move furthest is dropped (nil) and the rest
/// placed again, so crowded labels never print on top of each other.
public enum LabelLayout {
    public static func place(_ wanted: [Double], size: Double, gap: Double = 2, lower: Double, upper: Double)
        -> [Double?]
    {
        var keep = wanted.indices.sorted { wanted[$0] < wanted[$1] }
        while !keep.isEmpty {
            var p = keep.map { wanted[$0] }
            // Forward: push down past the previous label; backward: pull up under the next one.
            for i in p.indices { p[i] = max(p[i], lower + size / 2, i > 0 ? p[i - 1] + size + gap : -Double.infinity) }
            for i in p.indices.reversed() {
                p[i] = min(p[i], upper - size / 2, i + 1 < p.count ? p[i + 1] - size - gap : Double.infinity)
            }
            if p[0] >= lower + size / 2 - 1e-9 {
                var out = [Double?](repeating: nil, count: wanted.count)
                for (k, i) in keep.enumerated() { out[i] = p[k] }
                return out
            }
            // Does not fit: drop the label moved furthest from where it was wanted.
            let worst = p.indices.max { abs(p[$0] - wanted[keep[$0]]) < abs(p[$1] - wanted[keep[$1]]) }!
            keep.remove(at: worst)
        }
        return [Double?](repeating: nil, count: wanted.count)
    }
}
