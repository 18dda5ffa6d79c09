// SPDX-License-Identifier: GPL-2.0-or-later

/// A point on a monotonic time line, in nanoseconds from an arbitrary origin.
///
/// State machines never read a clock: drivers pass the current `Timestamp` with each event, and
/// tests pass whatever they like, so nothing sleeps.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var nanoseconds: Int64

    @inlinable public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public static let zero = Timestamp(nanoseconds: 0)

    public static func seconds(_ s: Double) -> Timestamp { Timestamp(nanoseconds: Int64((s * 1e9).rounded())) }
    public static func milliseconds(_ ms: Int64) -> Timestamp { Timestamp(nanoseconds: ms * 1_000_000) }

    public var seconds: Double { Double(nanoseconds) / 1e9 }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.nanoseconds < b.nanoseconds }
    public static func + (a: Timestamp, d: Duration) -> Timestamp { Timestamp(nanoseconds: a.nanoseconds + d.nanoseconds) }
    public static func - (a: Timestamp, b: Timestamp) -> Duration { Duration.nanoseconds(a.nanoseconds - b.nanoseconds) }
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
