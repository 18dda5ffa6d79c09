import Foundation
import Testing

@Suite("cuff decode")
struct DecodeCommandTests {
    @Test func decodesArgumentsOneJSONObjectEach() throws {
        let r = try CLI.run([
            "decode", "1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00", "15:BD:F0:0B:00:9F:F0:3C:00:12:00",
        ])
        #expect(r.status == 0)
        #expect(r.stderr.isEmpty)
        let lines = r.stdoutLines
        #expect(lines.count == 2)
        let a = try CLI.json(lines[0])
        #expect(a["type"] as? String == "measurement")
        #expect(a["characteristic"] as? String == "2A35")
        #expect(a["unit"] as? String == "mmHg")
        #expect(a["systolic"] as? Double == 138)
        #expect(a["pulse_rate"] as? Double == 60)
        #expect(a["user_id"] as? Int == 1)
        #expect(a["timestamp"] is NSNull)
        let status = try #require(a["status"] as? [String: Any])
        #expect(status["pulse_rate_range"] as? String == "in_range")
        #expect(status["improper_position"] as? Bool == true)
        #expect(a["raw"] as? String == "1e8a00580078000000041114293b3c00012700")
        let b = try CLI.json(lines[1])
        #expect(b["unit"] as? String == "kPa")
        #expect(b["systolic"] as? Double == 18.9)
        // Finite values print as JSON numbers with a decimal point.
        #expect(lines[1].contains("\"systolic\":18.9"))
        #expect(lines[1].contains("\"diastolic\":11.0"))
    }

    @Test func readsStdinLinesAndReportsErrorsOnBothStreams() throws {
        let r = try CLI.run(["decode", "--characteristic", "2a36"], stdin: "00 64 00 FF 07 FF 07\n\n03 02 03\nzz\n")
        #expect(r.status == 1)
        let lines = r.stdoutLines
        #expect(lines.count == 3)
        let ok = try CLI.json(lines[0])
        #expect(ok["type"] as? String == "cuff_pressure")
        #expect(ok["cuff_pressure"] as? Double == 100)
        let bad = try CLI.json(lines[1])
        let err = try #require(bad["error"] as? [String: Any])
        #expect(err["code"] as? String == "truncated")
        #expect(err["offset"] as? Int == 3)
        #expect(err["field"] as? String == "Diastolic")
        #expect(bad["raw"] as? String == "030203")
        let notHex = try CLI.json(lines[2])
        #expect((notHex["error"] as? [String: Any])?["code"] as? String == "invalid_hex")
        #expect((notHex["error"] as? [String: Any])?["offset"] as? Int == 0)
        #expect(r.stderr.split(separator: "\n").count == 2)
    }

    /// Where a line stops being hex: the offset (UTF-8 bytes into the line as given, leading blanks
    /// counted) and the text from there, also past the 64 bytes the line's excerpt quotes. It
    /// was always offset 0.
    @Test func notHexSaysWhere() throws {
        let long = String(repeating: "00", count: 100) + "zz"
        let r = try CLI.run(["decode"], stdin: "1e 8a 00 5g 00 78 00\n  \(long)\n1e 8a 0\n")
        #expect(r.status == 1)
        let errors = try r.stdoutLines.map { try #require(try CLI.json($0)["error"] as? [String: Any]) }
        #expect(errors.map { $0["offset"] as? Int } == [10, 202, 6])
        #expect(errors.allSatisfy { $0["code"] as? String == "invalid_hex" })
        #expect((errors[0]["message"] as? String)?.hasSuffix("at 10: 'g 00 78 00'") == true)
        #expect((errors[1]["message"] as? String)?.hasSuffix("at 202: 'zz'") == true)
        #expect(r.stderr.contains("at 202: 'zz'"))
    }

    @Test func specialValuesAreStringsNeverNumbers() throws {
        let r = try CLI.run(["decode", "14 FF 07 00 08 FE 07 02 08 00 00"])
        #expect(r.status == 0)
        let line = try #require(r.stdoutLines.first)
        #expect(line.contains("\"systolic\":\"NaN\""))
        #expect(line.contains("\"diastolic\":\"NRes\""))
        #expect(line.contains("\"mean_arterial_pressure\":\"+INF\""))
        #expect(line.contains("\"pulse_rate\":\"-INF\""))
        #expect(!line.contains("2047"))
    }

    @Test func quirkOptionAndUnknownQuirk() throws {
        let r = try CLI.run(["decode", "--quirk", "beurer-bm85", "14 80 00 55 00 65 00 00 48 02 00 04"])
        #expect(r.status == 0)
        let j = try CLI.json(try #require(r.stdoutLines.first))
        #expect(j["pulse_rate"] as? Double == 72)
        #expect(j["user_id"] as? Int == 2)
        let bad = try CLI.run(["decode", "--quirk", "nope", "00"])
        #expect(bad.status != 0 && bad.status != 1)
        #expect(bad.stderr.contains("beurer-bm85"))
    }

    @Test func everyCharacteristicDecodes() throws {
        let cases: [(String, String, String)] = [
            ("2a49", "FF 01", "feature"),
            ("2b34", "7E 78 00 50 00 64 00 80 51 01 00 48 00 05 03 00 00 A3 02 00", "measurement"),
            ("2b35", "00 78 00", "cuff_pressure"), ("2b36", "03 01 00 34 2B 00 78 00 50 00 5D 00", "record"),
            ("2a52", "06 00 01 01", "record_access_control_point"), ("2a08", "E3 07 0C 19 0A 1E 2D", "date_time"),
            ("2a2b", "E8 07 06 17 0E 23 0A 07 80 01", "current_time"),
        ]
        for (c, hex, type) in cases {
            let r = try CLI.run(["decode", "--characteristic", c, hex])
            #expect(r.status == 0, "\(c): \(r.stderr)")
            let j = try CLI.json(try #require(r.stdoutLines.first))
            #expect(j["type"] as? String == type, "\(c)")
        }
        let dt = try CLI.json(
            try CLI.run(["decode", "--characteristic", "2a08", "E3 07 0C 19 0A 1E 2D"]).stdoutLines[0])
        #expect(dt["timestamp"] as? String == "2019-12-25T10:30:45")
    }

    @Test func impossibleCalendarDatesAreNotTimestamps() throws {
        // 2023-02-29, 2024-04-31, 9999-02-31: each field in range, the day not in its month.
        let dates = ["E7 07 02 1D 0A 1E 00", "E8 07 04 1F 0A 1E 00", "0F 27 02 1F 0A 1E 00"]
        let texts = ["2023-02-29", "2024-04-31", "9999-02-31"]
        let r = try CLI.run(["decode"] + dates.map { "02 78 00 50 00 5D 00 " + $0 })
        #expect(r.status == 0)
        #expect(r.stdoutLines.count == 3)
        for (line, text) in zip(r.stdoutLines, texts) {
            let j = try CLI.json(line)
            #expect(j["timestamp"] is NSNull, "\(text)")
            let fields = try #require(j["timestamp_fields"] as? [String: Any])
            #expect(
                "\(fields["year"]!)-\(fields["month"]!)-\(fields["day"]!)"
                    == text.split(separator: "-").map { String(Int($0)!) }.joined(separator: "-"))
            let warnings = try #require(j["warnings"] as? [[String: Any]])
            #expect(warnings.map { $0["code"] as? String } == ["invalid_date_time"], "\(text)")
            #expect(warnings.first?["offset"] as? Int == 7)
        }
        let dt = try CLI.run(["decode", "--characteristic", "2a08"] + dates)
        for (line, text) in zip(dt.stdoutLines, texts) {
            let j = try CLI.json(line)
            #expect(j["timestamp"] is NSNull, "\(text)")
            #expect((j["warnings"] as? [[String: Any]])?.first?["code"] as? String == "invalid_date_time")
        }
        // A leap day that exists stays a timestamp, without a warning.
        let leap = try CLI.json(try CLI.run(["decode", "02 78 00 50 00 5D 00 E8 07 02 1D 0A 1E 00"]).stdoutLines[0])
        #expect(leap["timestamp"] as? String == "2024-02-29T10:30:00")
        #expect((leap["warnings"] as? [Any])?.isEmpty == true)
        #expect(leap["timestamp_fields"] == nil)
    }

    @Test func recordSegmentsDecode() throws {
        // V35 in three segments (first, middle, last), a whole one, and one with a damaged inner value.
        let r = try CLI.run([
            "decode", "--characteristic", "2b36", "01 01 00 34 2B 00 78 00", "04 50 00", "0A 5D 00",
            "03 01 00 34 2B 00 78 00 50 00 5D 00", "03 01 00 34 2B 00 78 00 50",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdoutLines
        #expect(lines.count == 5)
        let first = try CLI.json(lines[0])
        #expect(first["sequence_number"] as? Int == 1)
        #expect(first["recorded_characteristic"] as? String == "2B34")
        #expect(first["partial_record"] as? String == "007800")
        #expect(first["first_segment"] as? Bool == true && first["last_segment"] as? Bool == false)
        let middle = try CLI.json(lines[1])
        #expect(middle["continuation"] as? String == "5000")
        #expect(middle["segment_counter"] as? Int == 1)
        #expect(middle["sequence_number"] == nil)
        let last = try CLI.json(lines[2])
        #expect(last["continuation"] as? String == "5d00")
        #expect(last["last_segment"] as? Bool == true)
        // A whole record: as before.
        #expect(
            lines[3].hasPrefix(
                #"{"type":"record","characteristic":"2B36","first_segment":true,"last_segment":true,"segment_counter":0,"sequence_number":1,"recorded_characteristic":"2B34","record":{"type":"measurement""#
            ))
        let damaged = try CLI.json(lines[4])
        #expect(damaged["sequence_number"] as? Int == 1)
        #expect(damaged["record"] is NSNull)
        #expect(
            (damaged["record_error"] as? [String: Any])?["field"] as? String == "Recorded Characteristic: Diastolic")
        #expect((damaged["warnings"] as? [[String: Any]])?.first?["code"] as? String == "invalid_recorded_value")
    }

    @Test func prettyIndents() throws {
        let r = try CLI.run(["decode", "--pretty", "00 78 00 50 00 5D 00"])
        #expect(r.stdout.contains("\n  \"systolic\": 120.0"))
    }
}
