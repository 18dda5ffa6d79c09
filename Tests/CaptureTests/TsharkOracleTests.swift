// SPDX-License-Identifier: GPL-2.0-or-later

import CuffTestSupport
import Foundation
import Testing

/// An outside oracle: Wireshark's own Blood Pressure Measurement dissector (`btatt.blood_pressure_measurement.*`)
/// decodes the committed captures, and every value must agree with the committed NDJSON (what `cuff replay` prints).
@Suite("tshark oracle")
struct TsharkOracleTests {
    static let tshark: String? = ["/usr/bin/tshark", "/usr/local/bin/tshark"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    static let fields = [
        "frame.time_epoch",
        "btatt.blood_pressure_measurement.flags",
        "btatt.blood_pressure_measurement.compound_value.systolic.mmhg",
        "btatt.blood_pressure_measurement.compound_value.diastolic.mmhg",
        "btatt.blood_pressure_measurement.compound_value.arterial_pressure.mmhg",
        "btatt.blood_pressure_measurement.compound_value.systolic.kpa",
        "btatt.blood_pressure_measurement.compound_value.diastolic.kpa",
        "btatt.blood_pressure_measurement.compound_value.arterial_pressure.kpa",
        "btatt.year", "btatt.month", "btatt.day", "btatt.hours", "btatt.minutes", "btatt.seconds",
        "btatt.blood_pressure_measurement.pulse_rate",
        "btatt.blood_pressure_measurement.user_id",
        "btatt.blood_pressure_measurement.status",
    ]

    /// BPM indications as tshark decodes them, one dictionary per packet.
    static func tsharkMeasurements(_ path: String) throws -> [[String: String]] {
        let p = try runToCompletion(
            tshark!,
            [
                "-r", path, "-Y", "btatt.opcode == 0x1d && btatt.blood_pressure_measurement.flags", "-T", "fields",
                "-E", "separator=;",
            ]
                + fields.flatMap { ["-e", $0] }, timeout: nil)
        return p.stdout.split(separator: "\n").map { line in
            let v = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
            return Dictionary(uniqueKeysWithValues: zip(fields, v))
        }
    }

    /// tshark prints an SFLOAT as `119`, `15.9` or `NaN`; ours are JSON numbers or special names.
    static func same(_ ours: Any?, _ theirs: String?, _ what: String, _ context: String) {
        let t = theirs ?? ""
        switch ours {
        case let d as Double:
            #expect(Double(t).map { abs($0 - d) < 1e-9 } == true, "\(context): \(what) ours \(d), tshark '\(t)'")
        case let s as String:
            #expect(s == t, "\(context): \(what) ours \(s), tshark '\(t)'")
        case nil, is NSNull:
            #expect(t.isEmpty, "\(context): \(what) absent in ours, tshark '\(t)'")
        default:
            Issue.record("\(context): \(what) has an unexpected type \(String(describing: ours))")
        }
    }

    static let names: [String] = committedCaptures()

    @Test(arguments: names)
    func tsharkAgreesWithOurMeasurements(_ name: String) throws {
        guard Self.tshark != nil else {
            print("tshark oracle: skipped, tshark is not installed (apt-get install tshark)")
            return
        }
        let path = capturesDirectory.appendingPathComponent(name + ".btsnoop").path
        let theirs = try Self.tsharkMeasurements(path)
        let ours = try String(contentsOf: capturesDirectory.appendingPathComponent(name + ".ndjson"), encoding: .utf8)
            .split(separator: "\n")
            .map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
            .filter { $0["type"] as? String == "measurement" && $0["characteristic"] as? String == "2A35" }
        // Every BPM we report is a BPM indication tshark sees (deduplicated stored records aside, none here).
        #expect(
            ours.count == theirs.count,
            "\(name): \(ours.count) measurements, tshark sees \(theirs.count) BPM indications")
        // The Beurer BM85 quirk (user ID without its flag, big-endian pulse and status) is ours, not Wireshark's.
        let quirky = name.contains("beurer")
        for (i, (o, t)) in zip(ours, theirs).enumerated() {
            let ctx = "\(name) measurement \(i + 1)"
            let raw = try #require(o["raw"] as? String)
            let flags = UInt8(raw.prefix(2), radix: 16)!
            #expect(t["btatt.blood_pressure_measurement.flags"] == String(format: "0x%02x", flags), "\(ctx): flags")
            let kpa = o["unit"] as? String == "kPa"
            #expect(kpa == (flags & 1 == 1), "\(ctx): unit")
            let suffix = kpa ? "kpa" : "mmhg"
            Self.same(
                o["systolic"], t["btatt.blood_pressure_measurement.compound_value.systolic.\(suffix)"], "systolic", ctx)
            Self.same(
                o["diastolic"], t["btatt.blood_pressure_measurement.compound_value.diastolic.\(suffix)"], "diastolic",
                ctx)
            Self.same(
                o["mean_arterial_pressure"],
                t["btatt.blood_pressure_measurement.compound_value.arterial_pressure.\(suffix)"], "MAP", ctx)
            // received_at is the capture's timestamp (to the millisecond in ISO 8601).
            let epoch = try #require(Double(t["frame.time_epoch"] ?? ""))
            let iso = ISO8601DateFormatter()
            iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let receivedText = try #require(o["received_at"] as? String)
            let received = try #require(iso.date(from: receivedText))
            #expect(abs(received.timeIntervalSince1970 - epoch) < 0.001, "\(ctx): received_at")
            if let ts = o["timestamp"] as? String {
                let want = [
                    t["btatt.year"], t["btatt.month"], t["btatt.day"], t["btatt.hours"], t["btatt.minutes"],
                    t["btatt.seconds"],
                ]
                .map { Int($0 ?? "") ?? -1 }
                let f = String(
                    format: "%04d-%02d-%02dT%02d:%02d:%02d", want[0], want[1], want[2], want[3], want[4], want[5])
                #expect(ts == f, "\(ctx): timestamp")
            } else {
                #expect(flags & 0x02 == 0 || (t["btatt.year"] ?? "") == "0", "\(ctx): timestamp")
            }
            if quirky { continue }
            Self.same(o["pulse_rate"], t["btatt.blood_pressure_measurement.pulse_rate"], "pulse", ctx)
            if let u = o["user_id"] as? Int {
                #expect(t["btatt.blood_pressure_measurement.user_id"] == String(format: "0x%02x", u), "\(ctx): user id")
            } else {
                #expect((t["btatt.blood_pressure_measurement.user_id"] ?? "").isEmpty, "\(ctx): user id")
            }
            if let s = o["status"] as? [String: Any] {
                let v = try #require(
                    UInt16((t["btatt.blood_pressure_measurement.status"] ?? "").dropFirst(2), radix: 16),
                    "\(ctx): status")
                #expect(s["body_movement"] as? Bool == (v & 1 != 0), "\(ctx): body movement")
                #expect(s["cuff_too_loose"] as? Bool == (v & 2 != 0), "\(ctx): cuff fit")
                #expect(s["irregular_pulse"] as? Bool == (v & 4 != 0), "\(ctx): irregular pulse")
                let range = ["in_range", "above_upper_limit", "below_lower_limit", "reserved"][Int(v >> 3 & 3)]
                #expect(s["pulse_rate_range"] as? String == range, "\(ctx): pulse rate range")
                #expect(s["improper_position"] as? Bool == (v & 0x20 != 0), "\(ctx): position")
            } else {
                #expect((t["btatt.blood_pressure_measurement.status"] ?? "").isEmpty, "\(ctx): status")
            }
        }
    }
}
