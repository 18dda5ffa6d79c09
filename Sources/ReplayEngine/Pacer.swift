// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Transport

/// `--realtime`: sleeps so records go out at the pace of their timestamps.
///
/// Each record is due the capture's gap after the one before it (due times are chained, so the
/// sleeps' overshoot does not add up). A record stamped before the one ahead of it (a clock that
/// ran backwards) is due at once; a gap longer than ``longestPause`` (between sessions, or a
/// clock that jumped ahead by years) is shortened to it. So any timestamps a capture holds give a
/// bounded wait per record, and the arithmetic saturates.
final class Pacer {
    static let longestPause = Duration.seconds(5)
    var previous: (capture: Timestamp, due: Timestamp)?

    func wait(until t: Timestamp) {
        let now = MonotonicClock.now()
        guard let p = previous else { previous = (t, now); return }
        var gap = t - p.capture
        if gap < .zero { gap = .zero } else if gap > Pacer.longestPause { gap = Pacer.longestPause }
        let due = p.due + gap
        previous = (t, due)
        MonotonicClock.sleep(nanoseconds: (due - now).nanoseconds)
    }
}
