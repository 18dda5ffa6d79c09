// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// `--timeout` as the Omron and vendor sessions apply it, after the standard session's rule: the
/// limit counts from the start, whatever the stage. A session without a reading by then times
/// out; one with readings stops there, or with `--follow` goes on.
struct SessionTimeLimit: Sendable {
    let limit: Duration?
    let follow: Bool
    /// When the limit comes due; nil before the start, once it was looked at, and after the end.
    private(set) var deadline: Timestamp?

    init(_ limit: Duration?, follow: Bool) {
        self.limit = limit
        self.follow = follow
    }

    /// The session started (or a link another session discovered was adopted) at `start`.
    mutating func start(at start: Timestamp) { deadline = limit.map { start + $0 } }

    /// The session ended by itself: no limit is left to look at.
    mutating func stop() { deadline = nil }

    /// At `now`, with `readings` so far: how and why the session ends, once the limit came due
    /// (nil before, and for a following session that has readings).
    mutating func expired(at now: Timestamp, readings: Int) -> (outcome: SessionOutcome, why: String)? {
        guard let d = deadline, now >= d else { return nil }
        deadline = nil
        let seconds = limit.map { "\($0.secondsDouble)" } ?? "?"
        if readings == 0 { return (.timedOut, "no result within \(seconds) s") }
        return follow ? nil : (.completed, "time limit reached (\(seconds) s)")
    }
}
