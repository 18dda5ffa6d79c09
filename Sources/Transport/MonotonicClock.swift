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
}
