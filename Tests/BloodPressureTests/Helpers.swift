import CuffCore
@testable import BloodPressure

func bytes(_ hex: String) -> [UInt8] {
    guard let b = Hex.decode(hex) else { fatalError("bad hex in test: \(hex)") }
    return b
}

func approx(_ a: Double?, _ b: Double, tolerance: Double = 1e-9) -> Bool {
    guard let a else { return false }
    return abs(a - b) <= tolerance * max(1, abs(b))
}

/// The project's seeded generator, so property tests are reproducible.
typealias SeededGenerator = SeededRandom
