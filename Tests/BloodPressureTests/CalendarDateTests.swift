import Testing
import CuffCore
@testable import BloodPressure

/// Date Time values whose fields are each in range but whose day does not exist in its month.
@Suite("Calendar dates")
struct CalendarDateTests {
    /// 0x2A35, 120/80/93 mmHg with a time stamp: `02 78 00 50 00 5D 00` + the 7 Date Time bytes.
    static func bpm(_ dateTime: String) -> [UInt8] { bytes("02 78 00 50 00 5D 00 " + dateTime) }

    static let impossible: [(String, String)] = [
        ("E7 07 02 1D 0A 1E 00", "2023-02-29T10:30:00"),  // 2023 is not a leap year
        ("E8 07 04 1F 0A 1E 00", "2024-04-31T10:30:00"),  // April has 30 days
        ("0F 27 02 1F 0A 1E 00", "9999-02-31T10:30:00"),  // February never has 31
        ("6C 07 02 1D 0A 1E 00", "1900-02-29T10:30:00"),  // divisible by 100, not by 400
    ]

    @Test(arguments: impossible)
    func impossibleDatesAreNotTimestamps(hex: String, text: String) throws {
        let d = try DateTime.decode(bytes(hex)[...])
        #expect(!d.value.isValid)
        #expect(d.value.iso8601 == nil)
        #expect(d.value.description == text)
        #expect(d.warnings.map(\.code) == [.invalidDateTime])
        #expect(d.warnings.first?.offset == 0)

        let m = try BloodPressureMeasurement.decode(Self.bpm(hex)[...])
        #expect(m.value.timestamp?.iso8601 == nil)
        #expect(m.warnings.map(\.code) == [.invalidDateTime])
        #expect(m.warnings.first?.offset == 7)
        let json = m.value.json(as: .bloodPressureMeasurement, warnings: m.warnings, raw: .null).serialized()
        #expect(json.contains("\"timestamp\":null"))
        #expect(json.contains("\"timestamp_fields\":{"))
        #expect(json.contains("\"invalid_date_time\""))
    }

    @Test func leapDaysThatExistStayValid() throws {
        for (hex, text) in [
            ("E8 07 02 1D 0A 1E 00", "2024-02-29T10:30:00"), ("D0 07 02 1D 0A 1E 00", "2000-02-29T10:30:00"),
            ("E8 07 04 1E 0A 1E 00", "2024-04-30T10:30:00"), ("0F 27 0C 1F 17 3B 3B", "9999-12-31T23:59:59"),
        ] {
            let d = try DateTime.decode(bytes(hex)[...])
            #expect(d.value.iso8601 == text)
            #expect(d.warnings.isEmpty)
            let m = try BloodPressureMeasurement.decode(Self.bpm(hex)[...])
            #expect(m.value.timestamp?.iso8601 == text)
            #expect(m.warnings.isEmpty)
        }
    }

    @Test func unknownPartsNeverRuleADayOut() throws {
        // Year unknown: February 29 may exist; month unknown: day 31 may.
        for dt in [
            DateTime(year: 0, month: 2, day: 29, hours: 0, minutes: 0, seconds: 0),
            DateTime(year: 2023, month: 0, day: 31, hours: 0, minutes: 0, seconds: 0),
            DateTime(year: 2023, month: 2, day: 0, hours: 0, minutes: 0, seconds: 0),
        ] {
            #expect(dt.isValid)
            #expect(dt.iso8601 == nil)  // still not a timestamp: the date is not known
            var w = ByteWriter(capacity: 7)
            dt.encode(into: &w)
            #expect(try DateTime.decode(w.bytes[...]).warnings.isEmpty)
        }
        // Year unknown: February 30 never exists.
        #expect(!DateTime(year: 0, month: 2, day: 30, hours: 0, minutes: 0, seconds: 0).isValid)
    }

    /// Probe E3: a day of week the date contradicts, and Adjust Reason's reserved bits 4–7, went
    /// unsaid (every other reserved field warns).
    @Test func currentTimeWhoseDayOfWeekOrAdjustReasonIsWrongWarns() throws {
        // 2024-06-23 was a Sunday (7).
        let sunday = try CurrentTime.decode(bytes("E8 07 06 17 0E 23 0A 07 00 01")[...])
        #expect(sunday.warnings.isEmpty)
        let friday = try CurrentTime.decode(bytes("E8 07 06 17 0E 23 0A 05 00 01")[...])
        #expect(friday.warnings.map(\.code) == [.invalidDateTime])
        #expect(friday.warnings.first?.message.contains("day of week 5 is not the date's (7") == true)
        #expect(friday.warnings.first?.offset == 7)
        #expect(try CurrentTime.decode(bytes("E8 07 06 17 0E 23 0A 00 00 01")[...]).warnings.isEmpty)  // unknown
        let reserved = try CurrentTime.decode(bytes("E8 07 06 17 0E 23 0A 07 00 F1")[...])
        #expect(reserved.warnings.map(\.code) == [.rfuFlags] && reserved.warnings.first?.offset == 9)
        // What cuff writes to a cuff's clock says the right day, every day of a few years.
        for day in stride(from: Int64(-800), through: 20_000, by: 1) {
            let ct = CurrentTime(localSeconds: day * 86_400 + 45_000)
            #expect(try CurrentTime.decode(ct.encode()[...]).warnings.isEmpty)
        }
    }

    @Test func currentTimeWithAnImpossibleDateWarns() throws {
        let d = try CurrentTime.decode(bytes("E7 07 02 1D 0A 1E 00 03 00 00")[...])
        #expect(d.value.dateTime.iso8601 == nil)
        #expect(d.warnings.map(\.code) == [.invalidDateTime])
    }
}

/// `DateTime.description`'s fixed-width form (four-digit year, two-digit fields) is the format
/// spelled out (``DateTimeTextTests/reference(_:)``) wherever it applies, and the general form
/// takes over past it: every field at and across its edges.
@Suite struct DateTimeFixedWidthTests {
    static let years: [UInt16] = [0, 1, 9, 10, 99, 100, 999, 1000, 1582, 1970, 2026, 9998, 9999, 10000, 12345, .max]
    static let fields: [UInt8] = [0, 1, 9, 10, 12, 23, 31, 59, 60, 99, 100, 101, 199, 255]

    /// Every year against every month and day, each time field taking a spread of the values.
    static var grid: [DateTime] {
        var dates: [DateTime] = []
        for y in years {
            for (i, a) in fields.enumerated() {
                for (j, b) in fields.enumerated() {
                    // Each field takes every value against a spread of the others.
                    let c = fields[(i + j) % fields.count], d = fields[(i * 3 + j) % fields.count]
                    let e = fields[(i + 2 * j + 1) % fields.count]
                    dates.append(DateTime(year: y, month: a, day: b, hours: c, minutes: d, seconds: e))
                }
            }
        }
        return dates
    }

    /// Written to a writer, the date is ``DateTime/iso8601``: its text where it is a date of any
    /// width, null where it is unknown or invalid.
    @Test func writtenDateIsTheISOText() {
        let wrong = Self.grid.filter { t in
            JSON.build { t.writeISO8601(to: &$0) } != (t.iso8601.map(JSON.string) ?? .null)
        }
        #expect(wrong.count == 0, "first: \(wrong.prefix(5).map(\.description))")
    }

    @Test func fixedWidthTextIsThePaddedText() {
        var checked = 0, wrong: [String] = []
        for t in Self.grid {
            checked += 1
            if t.description != DateTimeTextTests.reference(t) { wrong.append(DateTimeTextTests.reference(t)) }
        }
        #expect(checked == Self.years.count * Self.fields.count * Self.fields.count)
        #expect(wrong.count == 0, "first: \(wrong.prefix(5))")
        #expect(
            DateTime(year: 2026, month: 11, day: 27, hours: 9, minutes: 5, seconds: 0).description
                == "2026-11-27T09:05:00")
        #expect(
            DateTime(year: 7, month: 1, day: 2, hours: 0, minutes: 0, seconds: 0).description == "0007-01-02T00:00:00")
        #expect(
            DateTime(year: 12345, month: 200, day: 2, hours: 0, minutes: 0, seconds: 0).description
                == "12345-200-02T00:00:00")
    }
}
