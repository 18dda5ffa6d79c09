// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import CuffCore
import CuffSession
import Transport

/// The system's real-time clock.
public enum WallClock {
    /// Microseconds since 1970-01-01T00:00:00Z.
    public static func nowMicros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    /// The host's UTC offset in seconds right now (for the cuff's local clock).
    public static func localUTCOffsetSeconds() -> Int64 {
        var t = time(nil)
        var tmv = tm()
        localtime_r(&t, &tmv)
        return Int64(tmv.tm_gmtoff)
    }

    /// Now, for a live session.
    public static func eventTime() -> EventTime {
        EventTime(monotonic: MonotonicClock.now(), wallMicros: nowMicros())
    }
}
