// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Date Time (0x2A08): 7 bytes, no time zone — the cuff's local wall clock.
///
/// Year, month or day 0 means "not known" and is representable, not an error.
public struct DateTime: Sendable, Hashable, CustomStringConvertible {
    public var year: UInt16
    public var month: UInt8
    public var day: UInt8
    public var hours: UInt8
    public var minutes: UInt8
    public var seconds: UInt8

    public static let byteCount = 7

    public init(year: UInt16, month: UInt8, day: UInt8, hours: UInt8, minutes: UInt8, seconds: UInt8) {
        self.year = year
        self.month = month
        self.day = day
        self.hours = hours
        self.minutes = minutes
        self.seconds = seconds
    }

    @inlinable
    init(reading r: inout ByteReader) throws(BPSDecodingError) {
        guard r.remaining >= DateTime.byteCount else {
            throw .truncated("Time Stamp", at: r.offset, need: DateTime.byteCount, have: r.remaining)
        }
        year = r.readUInt16()!
        month = r.readUInt8()!
        day = r.readUInt8()!
        hours = r.readUInt8()!
        minutes = r.readUInt8()!
        seconds = r.readUInt8()!
    }

    /// Decodes a stand-alone Date Time value (exactly 7 bytes; more is a warning).
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(BPSDecodingError) -> Decoded<DateTime> {
        var r = ByteReader(bytes)
        guard bytes.count >= byteCount else {
            throw BPSDecodingError(
                .invalidLength, field: "Date Time", offset: 0, detail: "needs 7 bytes, got \(bytes.count)")
        }
        let v = try DateTime(reading: &r)
        var w: [DecodeWarning] = []
        v.validate(at: 0, &w)
        r.noteTrailing(&w)
        return Decoded(value: v, warnings: w)
    }

    public func encode(into w: inout ByteWriter) {
        w.write(year)
        w.write(month)
        w.write(day)
        w.write(hours)
        w.write(minutes)
        w.write(seconds)
    }

    /// True when year, month and day are all known.
    public var isDateKnown: Bool { year != 0 && month != 0 && day != 0 }

    /// Fields are within the GSS ranges (unknown 0 allowed for year/month/day) and the day exists in
    /// its month (Gregorian leap years). An unknown part never rules a date out: with the month
    /// unknown any day 1–31 may exist, with the year unknown February 29 may.
    public var isValid: Bool {
        areFieldsInRange && day <= DateTime.lastDay(ofMonth: month, year: year)
    }

    /// Each field within its GSS range, without asking whether the day exists in its month.
    var areFieldsInRange: Bool {
        (year == 0 || (1582...9999).contains(year)) && month <= 12 && day <= 31 && hours <= 23 && minutes <= 59
            && seconds <= 59
    }

    /// The last day of `month` (1–12) in `year` (proleptic Gregorian); 31 when the month is unknown
    /// (0) or out of range, 29 for February of an unknown year (0).
    public static func lastDay(ofMonth month: UInt8, year: UInt16) -> UInt8 {
        switch month {
        case 4, 6, 9, 11: return 30
        case 2:
            if year == 0 { return 29 }
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            return leap ? 29 : 28
        default: return 31
        }
    }

    @usableFromInline func validate(at offset: Int, _ w: inout [DecodeWarning]) {
        if !areFieldsInRange {
            w.append(DecodeWarning(.invalidDateTime, "Date Time fields out of range: \(description)", offset: offset))
        } else if !isValid {
            w.append(
                DecodeWarning(.invalidDateTime, "Date Time is not a calendar date: \(description)", offset: offset))
        }
    }

    /// `2020-05-21T10:30:45` (ISO 8601 local time, no offset), or nil when the date is unknown or invalid.
    public var iso8601: String? {
        guard hasISO8601 else { return nil }
        return description
    }

    /// Whether ``iso8601`` is a date (the date is known and valid).
    public var hasISO8601: Bool { isDateKnown && isValid }

    /// ``iso8601`` written to `w` (a string, or null), without making a String of it where the
    /// date has the common widths. (A result's record carries one; its JSON writes another.)
    @inlinable public func writeISO8601<W: JSONWriter>(to w: inout W) {
        guard hasISO8601 else { return w.null() }
        guard hasCommonWidths else { return w.string(description) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 19) { b in
            fillCommonWidths(b.baseAddress!)
            w.plainText(UnsafeBufferPointer(b))
        }
    }

    /// Nearly every date: a four-digit year and two-digit fields (19 bytes of ``description``).
    @usableFromInline var hasCommonWidths: Bool {
        year <= 9999 && month <= 99 && day <= 99 && hours <= 99 && minutes <= 99 && seconds <= 99
    }

    /// ``description`` of a date with ``hasCommonWidths``, as 19 bytes at `b`.
    @usableFromInline func fillCommonWidths(_ b: UnsafeMutablePointer<UInt8>) {
        let (y, mo, d, h, mi, s) = (Int(year), Int(month), Int(day), Int(hours), Int(minutes), Int(seconds))
        @inline(__always) func two(_ v: Int, _ at: Int) {
            b[at] = UInt8(truncatingIfNeeded: 0x30 + v / 10)
            b[at + 1] = UInt8(truncatingIfNeeded: 0x30 + v % 10)
        }
        two(y / 100, 0); two(y % 100, 2); b[4] = 0x2D
        two(mo, 5); b[7] = 0x2D
        two(d, 8); b[10] = 0x54
        two(h, 11); b[13] = 0x3A
        two(mi, 14); b[16] = 0x3A
        two(s, 17)
    }

    /// `YYYY-MM-DDTHH:MM:SS` with unknown parts as zeros.
    public var description: String {
        // Nearly every date: 19 bytes written in place. (The general form below cost about 700
        // instructions.)
        if hasCommonWidths {
            return String(unsafeUninitializedCapacity: 19) { b in
                fillCommonWidths(b.baseAddress!)
                return 19
            }
        }
        return paddedDescription
    }

    /// ``description`` in general: each field zero-padded to its width, wider when it needs more.
    var paddedDescription: String {
        // One buffer, one String (records carry several of these).
        // at most 5+3+3+3+3+3 digits and 5 separators
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { b in
            var n = 0
            func put(_ v: Int, _ width: Int) {
                var digits = 1, t = v / 10
                while t > 0 { digits += 1; t /= 10 }
                for _ in digits..<max(width, digits) { b[n] = 0x30; n += 1 }
                var i = n + digits
                n = i
                var x = v
                repeat { i -= 1; b[i] = UInt8(0x30 + x % 10); x /= 10 } while x > 0
            }
            func sep(_ c: UInt8) { b[n] = c; n += 1 }
            put(Int(year), 4); sep(0x2D); put(Int(month), 2); sep(0x2D); put(Int(day), 2); sep(0x54)
            put(Int(hours), 2); sep(0x3A); put(Int(minutes), 2); sep(0x3A); put(Int(seconds), 2)
            return String(decoding: UnsafeBufferPointer(rebasing: b[0..<n]), as: UTF8.self)
        }
    }

    /// Every field, unknown ones as null.
    public var json: JSON { JSON.build { write(to: &$0) } }

    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        w.beginObject()
        w.key("year"); if year == 0 { w.null() } else { w.int(Int64(year)) }
        w.key("month"); if month == 0 { w.null() } else { w.int(Int64(month)) }
        w.key("day"); if day == 0 { w.null() } else { w.int(Int64(day)) }
        w.key("hours"); w.int(Int64(hours))
        w.key("minutes"); w.int(Int64(minutes))
        w.key("seconds"); w.int(Int64(seconds))
        w.endObject()
    }

    /// Civil date of `secondsSince1970` (UTC, proleptic Gregorian).
    public init(unixSeconds: Int64) {
        // Floor division without an intermediate that can overflow (any Int64 will do).
        let rest = unixSeconds % 86400
        let days = unixSeconds / 86400 - (rest < 0 ? 1 : 0)
        let secs = rest < 0 ? rest + 86400 : rest
        let (y, m, d) = CivilCalendar.civil(fromDays: days)
        self.init(
            year: UInt16(clamping: y), month: UInt8(m), day: UInt8(d), hours: UInt8(secs / 3600),
            minutes: UInt8(secs % 3600 / 60), seconds: UInt8(secs % 60))
    }

    /// Seconds since 1970-01-01T00:00:00 if the fields were UTC, or nil when the date is unknown.
    public var unixSeconds: Int64? {
        guard isDateKnown else { return nil }
        let days = CivilCalendar.days(fromCivil: Int64(year), Int64(month), Int64(day))
        return days * 86400 + Int64(hours) * 3600 + Int64(minutes) * 60 + Int64(seconds)
    }
}

func pad(_ v: Int, _ width: Int) -> String {
    let s = String(v)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}

/// Days ⇄ proleptic Gregorian civil dates (the well-known era-based algorithm).
public enum CivilCalendar {
    /// Days since 1970-01-01 of the civil date `y0`-`m`-`d`.
    public static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (m + 9) % 12
        let doy = (153 * mp + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}

/// A decoded value with the warnings its decoding raised.
public struct Decoded<Value: Sendable>: Sendable {
    public var value: Value
    public var warnings: [DecodeWarning]
    public init(value: Value, warnings: [DecodeWarning]) {
        self.value = value
        self.warnings = warnings
    }
}
extension Decoded: Equatable where Value: Equatable {}
