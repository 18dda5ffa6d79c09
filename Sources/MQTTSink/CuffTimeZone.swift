// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession
import Foundation
import Sinks

extension UTCOffsetPolicy {
    /// `--cuff-timezone ZONE`: the zone the cuffs' clocks are set in. `UTC`, `Z` or a fixed offset
    /// (`+01:00`, `-0530`, `+02`) is that offset always; a zone name (`Europe/Berlin`) gives its
    /// offset at the reading's wall time (summer time included), or at its arrival when it has none.
    /// Nil for a name the system's zone database does not know.
    public static func cuffTimeZone(_ name: String) -> UTCOffsetPolicy? {
        if let seconds = fixedOffset(name) { return .fixed(seconds) }
        guard let zone = TimeZone(identifier: name) else { return nil }
        return UTCOffsetPolicy { m in
            var at = Date(timeIntervalSince1970: Double(m.receivedAt.wallMicros) / 1e6)
            if let ts = m.timestamp, !ts.hasSuffix("Z"), let wall = wallClockAsUTC(ts) {
                // The wall time read as UTC, moved back by the zone's offset there: the instant.
                at = wall.addingTimeInterval(-Double(zone.secondsFromGMT(for: wall)))
            }
            return zone.secondsFromGMT(for: at)
        }
    }

    /// `--cuff-timezone ZONE`'s offset at `unixSeconds` (summer time included): the offset cuff
    /// sets the cuffs' clocks with, so that the time it publishes with that zone's offset is the
    /// instant the cuff measured. Nil for a zone the system does not know.
    public static func cuffClockOffset(zone name: String, atUnixSeconds s: Int64) -> Int? {
        if let seconds = fixedOffset(name) { return seconds }
        return TimeZone(identifier: name)?.secondsFromGMT(for: Date(timeIntervalSince1970: Double(s)))
    }

    /// `UTC`, `Z`, `+01:00`, `-0530`, `+02`: seconds east of UTC.
    static func fixedOffset(_ s: String) -> Int? {
        if s == "UTC" || s == "Z" { return 0 }
        guard let sign = s.first, sign == "+" || sign == "-" else { return nil }
        let digits = s.dropFirst().filter { $0 != ":" }
        guard digits.count == 4 || digits.count == 2, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
            let v = Int(digits)
        else { return nil }
        let (h, m) = digits.count == 4 ? (v / 100, v % 100) : (v, 0)
        guard h <= 14, m < 60 else { return nil }
        return (sign == "-" ? -1 : 1) * (h * 3600 + m * 60)
    }

    /// `YYYY-MM-DDTHH:MM:SS…` as if it were UTC.
    static func wallClockAsUTC(_ ts: String) -> Date? {
        let u = Array(ts.utf8)
        guard u.count >= 19 else { return nil }
        func n(_ r: Range<Int>) -> Int? {
            var v = 0
            for i in r {
                guard u[i] >= 48 && u[i] <= 57 else { return nil }
                v = v * 10 + Int(u[i] - 48)
            }
            return v
        }
        guard let y = n(0..<4), let mo = n(5..<7), let d = n(8..<10), let h = n(11..<13), let mi = n(14..<16),
            let s = n(17..<19)
        else { return nil }
        var c = DateComponents()
        (c.year, c.month, c.day, c.hour, c.minute, c.second) = (y, mo, d, h, mi, s)
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = TimeZone(secondsFromGMT: 0)!
        return cal.date(from: c)
    }
}
