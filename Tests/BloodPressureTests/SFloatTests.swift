import Testing
import CuffCore
@testable import BloodPressure

@Suite("SFLOAT")
struct SFloatTests {
    // V21: the five special words, compared on all 16 bits.
    @Test(arguments: [
        ("FF 07", SFloat.Value.nan, "NaN"), ("00 08", .nres, "NRes"), ("FE 07", .positiveInfinity, "+INF"),
        ("02 08", .negativeInfinity, "-INF"), ("01 08", .reserved, "reserved"),
    ])
    func specialValues(hex: String, expected: SFloat.Value, name: String) {
        var r = ByteReader(bytes(hex))
        let s = SFloat(rawValue: r.readUInt16()!)
        #expect(s.value == expected)
        #expect(s.doubleValue == nil)
        #expect(s.specialName == name)
        #expect(s.json == .string(name))
    }

    @Test func specialsAreExactWordsNotMantissaMasks() {
        // 0xF7FF is exponent −1, mantissa 2047 → 204.7, not NaN (PureSwift's mask bug).
        let s = SFloat(rawValue: 0xF7FF)
        #expect(s.value == .finite(mantissa: 2047, exponent: -1))
        #expect(approx(s.doubleValue, 204.7))
    }

    // V22 and V20.
    @Test(arguments: [
        ("72 00", 114.0), ("5E FF", -16.2), ("24 20", 3600.0), ("65 F0", 10.1), ("BD F0", 18.9), ("0B 00", 11.0),
    ])
    func finiteValues(hex: String, value: Double) {
        var r = ByteReader(bytes(hex))
        #expect(SFloat(rawValue: r.readUInt16()!).doubleValue == value)
    }

    @Test func encoderMatchesNordicVector() {
        #expect(SFloat(10.1).rawValue == 0xF065)  // V20: 65 F0
    }

    // V23: encoder rounding.
    @Test(arguments: [(123.45, 123.5), (0.12344, 0.1234), (1_000_400, 1_000_000), (1_000_500, 1_001_000), (1e7, 1e7)])
    func encoderRounding(input: Double, decoded: Double) {
        let s = SFloat(input)
        #expect(approx(s.doubleValue, decoded), "\(input) encoded as 0x\(String(s.rawValue, radix: 16))")
    }

    @Test func encoderSpecialsAndLimits() {
        #expect(SFloat(.nan) == .nan)
        #expect(SFloat(.infinity) == .positiveInfinity)
        #expect(SFloat(-.infinity) == .negativeInfinity)
        #expect(SFloat(1e12) == .positiveInfinity)
        #expect(SFloat(-1e12) == .negativeInfinity)
        #expect(SFloat(0).doubleValue == 0)
        #expect(SFloat(2045e7).doubleValue == 2045e7)
        #expect(SFloat(mantissa: 2046, exponent: 0) == nil)
        #expect(SFloat(mantissa: 1, exponent: 8) == nil)
    }

    @Test func everyFiniteWordRoundTripsByValue() {
        // For every 16-bit word that is not special: encode(decode(w)) decodes to the same value.
        for w in 0...UInt16.max {
            let s = SFloat(rawValue: w)
            guard let d = s.doubleValue else { continue }
            let again = SFloat(d)
            if abs(Int(s.mantissa)) <= SFloat.maxMantissa {
                #expect(approx(again.doubleValue, d), "word 0x\(String(w, radix: 16))")
            }
            #expect(!again.isSpecial || abs(Int(s.mantissa)) > SFloat.maxMantissa)
        }
    }

    /// `doubleValue` and `specialNameConstant` (each with a shortcut for the common words) against
    /// the word's meaning, for all 65,536 words.
    @Test func everyWordsNumberAndSpecialName() {
        var wrong = 0
        for w in 0...UInt16.max {
            let s = SFloat(rawValue: w)
            let number: Double?
            let name: String?
            switch s.value {
            case let .finite(m, e):
                number = e >= 0 ? Double(m) * pow10(Int(e)) : Double(m) / pow10(-Int(e))
                name = nil
            case .nan: (number, name) = (nil, "NaN")
            case .nres: (number, name) = (nil, "NRes")
            case .positiveInfinity: (number, name) = (nil, "+INF")
            case .negativeInfinity: (number, name) = (nil, "-INF")
            case .reserved: (number, name) = (nil, "reserved")
            }
            let got = s.doubleValue
            if got != number || got.map({ $0.sign }) != number.map({ $0.sign })
                || s.specialNameConstant?.description != name || s.specialName != name
            {
                wrong += 1
                if wrong <= 5 {
                    Issue.record("word 0x\(String(w, radix: 16)): \(String(describing: got)) \(s.specialName ?? "-")")
                }
            }
        }
        #expect(wrong == 0)
    }

    @Test func encoderNeverProducesSpecialWordsAndStaysInRange() {
        var g = SeededGenerator(seed: 42)
        for _ in 0..<20_000 {
            let v = Double.random(in: -2e10...2e10, using: &g) / pow10(Int.random(in: 0...12, using: &g))
            let s = SFloat(v)
            if case .finite(let m, _) = s.value {
                #expect(abs(Int(m)) <= 2045)
            } else {
                #expect(abs(v) > 2045e7, "\(v) became \(s)")
            }
        }
    }
}

func pow10(_ n: Int) -> Double { (0..<n).reduce(1.0) { a, _ in a * 10 } }
