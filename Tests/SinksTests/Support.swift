// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import Foundation
import Testing

@testable import Sinks

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Public vectors and records built from them through the codec, as a session would.
enum Vectors {
    /// Flags 0x1E: 138/88/120 mmHg, Date Time with year 0 (unknown → no timestamp), pulse 60, user 1, status 0x0027.
    static let mmHgFull = "1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00"
    /// Flags 0x15: kPa 18.9 / 11 / 15.9, pulse 60, status 0x0012.
    static let kPa = "15 BD F0 0B 00 9F F0 3C 00 12 00"
    /// Flags 0x14: everything NaN, pulse NaN, status 0.
    static let errorFrame = "14 FF 07 FF 07 FF 07 FF 07 00 00"
    /// 0x2B34 flags 0x7E: 120/80/100, Time Stamp 86400 s after 2000 (UTC), pulse 72, user 5, status 3, UFT.
    static let enhanced = "7E 78 00 50 00 64 00 80 51 01 00 48 00 05 03 00 00 A3 02 00"
    /// output-formats.md C.0 worked example: 120/80/93, 2024-06-23T14:35:10 device-local, pulse 72, user 1.
    static let withDateTime = "1E 78 00 50 00 5D 00 E8 07 06 17 0E 23 0A 48 00 01 00 00"

    static let device = DeviceInfo(
        address: "AA:BB:CC:DD:EE:FF", name: "BPM-1", manufacturer: "Acme", model: "M7", serial: "SN42", firmware: "1.0")
    /// 2026-11-22T07:31:54.123Z
    static let receivedMicros: Int64 = 1_795_332_714_123_000
    static let at = EventTime(monotonic: .seconds(12.5), wallMicros: receivedMicros)

    static func bytes(_ hex: String) throws -> [UInt8] {
        guard let b = Hex.decode(hex) else { throw TestFailure("bad hex \(hex)") }
        return b
    }

    static func bpm(
        _ hex: String, quirks: QuirkProfile.Options = [], device: DeviceInfo = device, at: EventTime = at,
        stored: Bool = false
    ) throws -> MeasurementRecord {
        let raw = try bytes(hex)
        let d = try BloodPressureMeasurement.decode(raw[...], quirks: quirks)
        return MeasurementRecord.from(
            bpm: d.value, warnings: d.warnings, raw: raw, device: device, at: at, stored: stored)
    }

    static func enhancedRecord(_ hex: String = enhanced, sequenceNumber: UInt16? = nil, at: EventTime = at) throws
        -> MeasurementRecord
    {
        let raw = try bytes(hex)
        let d = try EnhancedBloodPressureMeasurement.decode(raw[...], cuffPressure: false)
        guard
            let m = MeasurementRecord.from(
                enhanced: d.value, warnings: d.warnings, raw: raw, device: device, at: at,
                stored: sequenceNumber != nil,
                sequenceNumber: sequenceNumber)
        else { throw TestFailure("not a measurement") }
        return m
    }

    /// A 0x2A35 record whose systolic/diastolic/MAP/pulse words are set directly.
    static func withWords(
        sys: SFloat, dia: SFloat, map: SFloat = .nan, pulse: SFloat? = nil, unit: PressureUnit = .mmHg
    ) throws -> MeasurementRecord {
        let v = BloodPressureMeasurement(
            unit: unit, systolic: sys, diastolic: dia, meanArterialPressure: map, pulseRate: pulse)
        let raw = v.encode()
        return try bpm(Hex.encode(raw))
    }
}

/// Parses NDJSON lines with Foundation.
func parseLines(_ lines: [String]) throws -> [[String: Any]] {
    try lines.map { line in
        guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw TestFailure("not an object: \(line)")
        }
        return o
    }
}

/// Runs `/work/shared/schemas/validate.py` (found next to the package root) on `lines`.
/// Records an Issue when python3 or the validator is missing; returns (exit status, stdout).
@discardableResult
func validate(_ kind: String, _ lines: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> (
    Int32, String
)? {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let script = root.deletingLastPathComponent().appendingPathComponent("shared/schemas/validate.py")
    guard FileManager.default.fileExists(atPath: script.path) else {
        Issue.record("validator missing at \(script.path)", sourceLocation: sourceLocation)
        return nil
    }
    // python3 as PATH finds it (the one with jsonschema may be a pyenv shim), then the usual places.
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { String($0) + "/python3" }
    guard
        let python = (path + ["/usr/bin/python3", "/usr/local/bin/python3"]).first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        })
    else {
        Issue.record("python3 not found", sourceLocation: sourceLocation)
        return nil
    }
    let file = FileManager.default.temporaryDirectory.appendingPathComponent(
        "sinks-\(kind)-\(UUID().uuidString).ndjson")
    try Data(lines.map { $0 + "\n" }.joined().utf8).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let r = try runToCompletion(python, [script.path, kind, file.path])
    if r.status == 2 {
        Issue.record("validator could not run (exit 2): \(r.stdout) \(r.stderr)", sourceLocation: sourceLocation)
    }
    return (r.status, r.stdout)
}

extension Dictionary where Key == String, Value == Any {
    func obj(_ k: String) -> [String: Any]? { self[k] as? [String: Any] }
    func arr(_ k: String) -> [[String: Any]]? { self[k] as? [[String: Any]] }
}

/// Codes of a CodeableConcept as `system|code`.
func codings(_ concept: [String: Any]?) -> [String] {
    (concept?.arr("coding") ?? []).map { "\($0["system"] as? String ?? "?")|\($0["code"] as? String ?? "?")" }
}
