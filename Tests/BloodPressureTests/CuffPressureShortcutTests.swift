import Testing
import CuffCore
@testable import BloodPressure

/// `cuffPressure(in:)` (the replay's short path) succeeds exactly when the full decoder does, with
/// the same pressure and unit: every flags byte, every length up to 26 bytes, every quirk set.
@Suite("Cuff pressure without the full decode")
struct CuffPressureShortcutTests {
    static let quirkSets: [QuirkProfile.Options] = [
        [], [.userIDWithoutFlag], [.bigEndianPulseAndStatus], [.userIDWithoutFlag, .bigEndianPulseAndStatus],
    ]

    /// Calls `body` with a seeded random value for every flags byte and every length 0–26 (the
    /// first byte set to the flags when there is one).
    static func everyFlagsAndLength(seed: UInt64, _ body: (_ flags: Int, _ value: [UInt8]) -> Void) {
        var g = SeededGenerator(seed: seed)
        for flags in 0...255 {
            for length in 0...26 {
                var value = (0..<length).map { _ in UInt8.random(in: 0...255, using: &g) }
                if length > 0 { value[0] = UInt8(flags) }
                body(flags, value)
            }
        }
    }

    @Test func intermediateCuffPressureAgreesWithDecode() {
        var succeeded = 0, failed = 0
        Self.everyFlagsAndLength(seed: 36) { flags, value in
            let short = value.withUnsafeBytes { BloodPressureMeasurement.cuffPressure(in: $0) }
            for quirks in Self.quirkSets {
                let full = try? BloodPressureMeasurement.decode(value[...], quirks: quirks)
                #expect(
                    short?.pressure == full?.value.cuffPressure && short?.unit == full?.value.unit,
                    "flags \(flags), \(value.count) bytes, quirks \(quirks.rawValue)")
                if full == nil { failed += 1 } else { succeeded += 1 }
            }
        }
        #expect(succeeded > 10_000 && failed > 10_000)  // both outcomes are covered
    }

    @Test func enhancedIntermediateCuffPressureAgreesWithDecode() {
        var succeeded = 0, failed = 0
        Self.everyFlagsAndLength(seed: 235) { flags, value in
            let short = value.withUnsafeBytes { EnhancedBloodPressureMeasurement.cuffPressure(in: $0) }
            let full = try? EnhancedBloodPressureMeasurement.decode(value[...], cuffPressure: true)
            var fullPressure: SFloat?
            if case let .cuffPressure(p)? = full?.value.kind { fullPressure = p }
            #expect(
                short?.pressure == fullPressure && short?.unit == full?.value.unit,
                "flags \(flags), \(value.count) bytes")
            if full == nil { failed += 1 } else { succeeded += 1 }
        }
        #expect(succeeded > 2_000 && failed > 2_000)
    }
}

@Suite("Date Time text")
struct DateTimeTextTests {
    /// The format spelled out: each field zero-padded to its width, longer numbers kept whole.
    static func reference(_ d: DateTime) -> String {
        func pad(_ v: Int, _ w: Int) -> String {
            let s = String(v); return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return
            "\(pad(Int(d.year), 4))-\(pad(Int(d.month), 2))-\(pad(Int(d.day), 2))T\(pad(Int(d.hours), 2)):\(pad(Int(d.minutes), 2)):\(pad(Int(d.seconds), 2))"
    }

    @Test func descriptionMatchesTheFormat() {
        var g = SeededGenerator(seed: 7)
        var cases = [
            DateTime(year: 0, month: 0, day: 0, hours: 0, minutes: 0, seconds: 0),
            DateTime(year: 65535, month: 255, day: 255, hours: 255, minutes: 255, seconds: 255),
            DateTime(year: 2026, month: 11, day: 22, hours: 7, minutes: 5, seconds: 9),
            DateTime(year: 999, month: 1, day: 1, hours: 10, minutes: 10, seconds: 10),
        ]
        for _ in 0..<2000 {
            cases.append(
                DateTime(
                    year: UInt16.random(in: 0...UInt16.max, using: &g), month: UInt8.random(in: 0...255, using: &g),
                    day: UInt8.random(in: 0...255, using: &g), hours: UInt8.random(in: 0...255, using: &g),
                    minutes: UInt8.random(in: 0...255, using: &g), seconds: UInt8.random(in: 0...255, using: &g)))
        }
        for d in cases { #expect(d.description == Self.reference(d)) }
        #expect(cases[2].description == "2026-11-22T07:05:09")
    }
}

@Suite("Characteristic identity")
struct CuffCharacteristicIdentityTests {
    @Test func uuidLookupAndHashingByCase() {
        var seen = Set<CuffCharacteristic>()
        for c in CuffCharacteristic.allCases {
            if let u = c.uuid16 { #expect(CuffCharacteristic(uuid16: u) == c) }
            #expect(seen.insert(c).inserted)
            #expect(CuffCharacteristic(rawValue: c.rawValue) == c)
        }
        #expect(seen.count == CuffCharacteristic.allCases.count)
        let known = Set(CuffCharacteristic.allCases.compactMap(\.uuid16))
        for u in UInt16(0)...UInt16.max where !known.contains(u) {
            if CuffCharacteristic(uuid16: u) != nil {
                Issue.record("0x\(String(u, radix: 16)) maps to a characteristic"); break
            }
        }
    }
}
