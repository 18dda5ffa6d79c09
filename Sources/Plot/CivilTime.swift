// SPDX-License-Identifier: GPL-2.0-or-later

/// Calendar arithmetic on the proleptic Gregorian calendar, without a clock or a time zone:
/// times are seconds since 1970-01-01T00:00:00 of whatever zone the text was in.
public enum CivilTime {
    /// Days since 1970-01-01 of a calendar date (month 1–12, day 1–31).
    public static func days(year: Int, month: Int, day: Int) -> Int {
        // Count from March 1 of year 0 so the leap day falls at the end of a counted year.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The calendar date of a day number (days since 1970-01-01).
    public static func date(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// ISO weekday, 1 = Monday … 7 = Sunday.
    public static func weekday(days: Int) -> Int {
        ((days % 7 + 7 + 3) % 7) + 1  // 1970-01-01 was a Thursday
    }

    /// The Monday that starts the ISO 8601 week holding `days`.
    public static func weekStart(days: Int) -> Int { days - (weekday(days: days) - 1) }

    /// ISO 8601 week-numbering year and week (1–53) of a day.
    public static func isoWeek(days: Int) -> (year: Int, week: Int) {
        let thursday = weekStart(days: days) + 3
        let year = date(days: thursday).year
        let week = (thursday - CivilTime.days(year: year, month: 1, day: 1)) / 7 + 1
        return (year, week)
    }

    /// Parses `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM`, `…:SS`, `…:SS.fff` with an optional `Z` or
    /// `±HH:MM` (an offset is applied, giving UTC; text without one is taken as it is).
    /// Returns seconds since 1970-01-01T00:00:00, or nil for anything else.
    public static func seconds(_ text: String) -> Double? {
        let b = Array(text.utf8)
        func num(_ from: Int, _ n: Int) -> Int? {
            guard from + n <= b.count else { return nil }
            var v = 0
            for i in from..<from + n {
                guard (0x30...0x39).contains(b[i]) else { return nil }
                v = v * 10 + Int(b[i] - 0x30)
            }
            return v
        }
        guard let y = num(0, 4), b.count >= 10, b[4] == 0x2D, let mo = num(5, 2), b[7] == 0x2D, let d = num(8, 2),
            (1...12).contains(mo), (1...31).contains(d)
        else { return nil }
        var t = Double(days(year: y, month: mo, day: d)) * 86_400
        var i = 10
        if i < b.count, b[i] == 0x54 || b[i] == 0x20 {
            guard let h = num(11, 2), 13 < b.count, b[13] == 0x3A, let mi = num(14, 2), h < 24, mi < 60 else {
                return nil
            }
            t += Double(h * 3600 + mi * 60)
            i = 16
            if i < b.count, b[i] == 0x3A {
                guard let s = num(17, 2), s < 61 else { return nil }
                t += Double(s)
                i = 19
                if i < b.count, b[i] == 0x2E {
                    i += 1
                    var scale = 0.1
                    let start = i
                    while i < b.count, (0x30...0x39).contains(b[i]) {
                        t += Double(b[i] - 0x30) * scale
                        scale /= 10
                        i += 1
                    }
                    guard i > start else { return nil }
                }
            }
        }
        if i < b.count {
            if b[i] == 0x5A, i + 1 == b.count { return t }
            guard b[i] == 0x2B || b[i] == 0x2D, let oh = num(i + 1, 2), i + 3 < b.count, b[i + 3] == 0x3A,
                let om = num(i + 4, 2),
                i + 6 == b.count
            else { return nil }
            let off = Double(oh * 3600 + om * 60)
            return b[i] == 0x2B ? t - off : t + off
        }
        return t
    }

    /// `2026-11-22` for a day number.
    public static func dateText(days: Int) -> String {
        let d = date(days: days)
        return pad(d.year, 4) + "-" + pad(d.month, 2) + "-" + pad(d.day, 2)
    }

    /// `2026-11-22 08:13` (or with `:SS`) for seconds since 1970.
    public static func dateTimeText(_ t: Double, seconds: Bool = false) -> String {
        let whole = Int((t).rounded(.down))
        let day = Int((Double(whole) / 86_400).rounded(.down))
        let s = whole - day * 86_400
        var out = dateText(days: day) + " " + pad(s / 3600, 2) + ":" + pad(s / 60 % 60, 2)
        if seconds { out += ":" + pad(s % 60, 2) }
        return out
    }

    /// Day number of seconds since 1970.
    public static func day(_ t: Double) -> Int { Int((t / 86_400).rounded(.down)) }

    static func pad(_ v: Int, _ n: Int) -> String {
        let s = String(abs(v))
        return (v < 0 ? "-" : "") + String(repeating: "0", count: max(0, n - s.count)) + s
    }
}
