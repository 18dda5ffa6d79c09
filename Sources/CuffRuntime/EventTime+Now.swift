// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession
import Transport

extension WallClock {
    /// Now on both clocks (monotonic and wall), for a live session's events.
    public static func eventTime() -> EventTime {
        EventTime(monotonic: MonotonicClock.now(), wallMicros: system.nowMicros())
    }
}
