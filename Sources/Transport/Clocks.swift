// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CuffCore

/// The clock drivers pass to the state machines: `CLOCK_MONOTONIC`, which never jumps.
public enum MonotonicClock {
    /// Now, as nanoseconds since an arbitrary point (boot).
    public static func now() -> Timestamp {
        var ts = timespec()
        // Cannot fail for CLOCK_MONOTONIC with a valid pointer.
        _ = clock_gettime(CLOCK_MONOTONIC, &ts)
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }

    /// Sleeps for `nanoseconds` (nothing when 0 or less); a signal may end the sleep early.
    /// The corresponding C function is `nanosleep`.
    public static func sleep(nanoseconds: Int64) {
        guard nanoseconds > 0 else { return }
        Sys.sleep(.nanoseconds(nanoseconds))
    }
}

/// Wall-clock time (`CLOCK_REALTIME`) in microseconds since 1970, injectable so that tests get
/// fixed output: ``system`` reads the real clock, ``fixed(_:)`` always answers the same.
public struct WallClock: Sendable {
    public let nowMicros: @Sendable () -> Int64
    public init(_ nowMicros: @escaping @Sendable () -> Int64) { self.nowMicros = nowMicros }

    /// The system's real-time clock.
    public static let system = WallClock {
        var ts = timespec()
        _ = clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    public static func fixed(_ micros: Int64) -> WallClock { WallClock { micros } }

    /// The host's UTC offset in seconds right now (for the cuff's local clock).
    public static func localUTCOffsetSeconds() -> Int64 {
        var t = time(nil)
        var tmv = tm()
        localtime_r(&t, &tmv)
        return Int64(tmv.tm_gmtoff)
    }
}
