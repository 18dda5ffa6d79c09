// SPDX-License-Identifier: GPL-2.0-or-later

/// A point on a monotonic time line, in nanoseconds from an arbitrary origin.
///
/// State machines never read a clock: drivers pass the current `Timestamp` with each event, and
/// tests pass whatever they like, so nothing sleeps.
///
/// Arithmetic saturates at the ends of the 64-bit range (about 1677 to 2262 as time since 1970):
/// a capture may hold any timestamp, and a sum or a difference of two never traps.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var nanoseconds: Int64

    @inlinable public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public static let zero = Timestamp(nanoseconds: 0)

    /// `s` seconds (saturating; NaN is zero).
    public static func seconds(_ s: Double) -> Timestamp { Timestamp(nanoseconds: saturating(s * 1e9)) }
    /// `ms` milliseconds (saturating).
    public static func milliseconds(_ ms: Int64) -> Timestamp {
        let (v, o) = ms.multipliedReportingOverflow(by: 1_000_000)
        return Timestamp(nanoseconds: o ? (ms < 0 ? .min : .max) : v)
    }

    /// Whole microseconds, rounded towards −∞ (what a wall clock in µs shows at this instant).
    @inlinable public var flooredMicroseconds: Int64 {
        let q = nanoseconds / 1000
        return nanoseconds % 1000 < 0 ? q - 1 : q  // no overflow: |q| ≤ Int64.max / 1000
    }

    public var seconds: Double { Double(nanoseconds) / 1e9 }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.nanoseconds < b.nanoseconds }
    /// `a` moved by `d`, saturating at the ends of the range.
    public static func + (a: Timestamp, d: Duration) -> Timestamp {
        a.adding(nanoseconds: d.nanoseconds)
    }

    /// `self` + `step` ns, saturating (for a duration converted once with `Duration.nanoseconds`).
    @inlinable public func adding(nanoseconds step: Int64) -> Timestamp {
        let (v, o) = nanoseconds.addingReportingOverflow(step)
        return Timestamp(nanoseconds: o ? (step < 0 ? .min : .max) : v)
    }
    /// The time from `b` to `a`; saturating (two timestamps far apart are more than 292 years apart).
    public static func - (a: Timestamp, b: Timestamp) -> Duration {
        Duration.nanoseconds(Timestamp.difference(a.nanoseconds, b.nanoseconds))
    }

    /// `a − b` in nanoseconds, saturating.
    @inlinable public static func difference(_ a: Int64, _ b: Int64) -> Int64 {
        let (v, o) = a.subtractingReportingOverflow(b)
        return o ? (b < 0 ? .max : .min) : v
    }

    /// A Double of nanoseconds as a whole number of nanoseconds: rounded, saturating, NaN → 0.
    public static func saturating(_ ns: Double) -> Int64 {
        let r = ns.rounded()
        if r.isNaN { return 0 }
        if r >= 9_223_372_036_854_775_807.0 { return .max }  // 2^63, the first Double past Int64.max
        if r <= -9_223_372_036_854_775_808.0 { return .min }
        return Int64(r)
    }
    public var description: String { String(seconds) + "s" }
}

extension Duration {
    /// Whole nanoseconds in this duration (saturating).
    public var nanoseconds: Int64 {
        let (s, atto) = components
        let (ns, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if o1 { return s < 0 ? .min : .max }
        let (total, o2) = ns.addingReportingOverflow(atto / 1_000_000_000)
        if o2 { return s < 0 ? .min : .max }
        return total
    }

    /// Seconds as a Double.
    public var secondsDouble: Double { Double(nanoseconds) / 1e9 }
}
