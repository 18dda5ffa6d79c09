// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffCommands
import BloodPressure
import Capture
import CuffCore
import CuffSession
import CuffSimulator
import Plot
import PlotIO
import Sinks

// The values options take, parsed by argument-parser itself: `--help` lists them, and a wrong one
// is refused with the list of right ones (no `transform:` closures with hand-kept lists).
// argument-parser prints an integer-backed enum's default as its raw value (`default: 1`), so
// options of those types (SecurityLevel, BPSCharacteristic) are optional with the default in code
// and named in their help.

extension Scenario: ExpressibleByArgument {}

extension Persona: ExpressibleByArgument {}

extension CaptureFormat: ExpressibleByArgument {}

extension PlotInputFormat: ExpressibleByArgument {}

extension Guideline: ExpressibleByArgument {
    public init?(argument: String) {
        guard let g = Guideline.named(argument) else { return nil }
        self = g
    }

    public static var allValueStrings: [String] { all.map(\.id) }
    public var defaultValueDescription: String { id }
}

extension SecurityLevel: ExpressibleByArgument {
    public init?(argument: String) {
        guard let level = Self.allCases.first(where: { $0.description == argument }) else { return nil }
        self = level
    }

    public static var allValueStrings: [String] { allCases.map(\.description) }
    public static var allValueDescriptions: [String: String] { [:] }
    public var defaultValueDescription: String { description }
}

extension BPSCharacteristic: ExpressibleByArgument {
    public static var allValueStrings: [String] { allCases.map { $0.uuidString.lowercased() } }
    public static var allValueDescriptions: [String: String] { [:] }
    public var defaultValueDescription: String { uuidString.lowercased() }
}

extension OutputFormat: ExpressibleByArgument {
    public init?(argument: String) {
        guard let format = try? OutputFormat(parsing: argument) else { return nil }
        self = format
    }

    public static var allValueStrings: [String] { allCases.map(\.rawValue) }
    public var defaultValueDescription: String { rawValue }
}

extension QuirkProfile: ExpressibleByArgument {
    public init?(argument: String) {
        guard let profile = QuirkProfile.named(argument) else { return nil }
        self = profile
    }

    public static var allValueStrings: [String] { all.map(\.name) }
}

/// `--persona`, `--seed`, `--speed`: the simulated cuff's options that `cuff measure --simulated`
/// and `cuff simulate` share, with the same names, meanings and defaults.
public struct SimulationOptions: ParsableArguments {
    public init() {}

    // (Optional, their defaults below: whether one was given at all matters to `simulate
    // --from-capture`, which refuses them even with their default values.)
    @Option(
        name: .customLong("persona"),
        help: ArgumentHelp(
            "Blood Pressure Service version of the simulated cuff (bps-1.1 adds Enhanced BPM/ICP, Record and RACP). (default: bps-1.0)",
            valueName: "persona"))
    public var personaGiven: Persona?

    @Option(
        name: .customLong("seed"),
        help: ArgumentHelp("Seed of the simulated readings (same seed, same readings). (default: 1)", valueName: "seed")
    )
    public var seedGiven: UInt64?

    public var persona: Persona {
        get { personaGiven ?? .bps10 }
        set { personaGiven = newValue }
    }
    public var seed: UInt64 {
        get { seedGiven ?? 1 }
        set { seedGiven = newValue }
    }

    @Option(
        name: .customLong("speed"),
        help: ArgumentHelp(
            "How many times faster than real time the simulated cuff runs, 0.001 to 1000000 (1: real time; 0, for measure --simulated only: as fast as possible). (default: 10)",
            valueName: "speed"))
    public var speedGiven: Double?

    public var speed: Double {
        get { speedGiven ?? 10 }
        set { speedGiven = newValue }
    }

    /// The options given that shape a simulated cuff (`cuff measure` refuses them without one).
    public var given: [String] {
        [("--persona", personaGiven != nil), ("--seed", seedGiven != nil), ("--speed", speedGiven != nil)]
            .filter(\.1).map(\.0)
    }

    /// The speeds a simulated cuff runs at besides 0: a thousand times slower than real time up
    /// to a million times faster. Outside that, its times no longer fit a clock of nanoseconds.
    public static let speeds: ClosedRange<Double> = 0.001...1_000_000

    public func validate() throws {
        guard speed == 0 || Self.speeds.contains(speed) else {
            throw ValidationError("--speed takes 0 or a number from 0.001 to 1000000")
        }
    }
}

/// A number of seconds an option takes (`--timeout`, `--stop-after`, `--every`): checked, then
/// turned into a `Duration` that cannot trap.
public enum SecondsOption {
    /// The most any option takes: 100 years (a `Duration` in nanoseconds holds 292).
    public static let maximum: Double = 3_155_760_000

    /// Throws unless `value` is a number of seconds from 0 (above 0 when `zero` is false) up to
    /// ``maximum``.
    public static func check(_ value: Double, option: String, zero: Bool = true) throws(ValidationError) {
        guard zero ? value >= 0 : value > 0, value <= maximum else {
            throw ValidationError(
                "\(option) takes a number of seconds \(zero ? "from 0" : "above 0") up to \(Int(maximum)) (100 years)")
        }
    }

    /// `seconds` as a `Duration` (saturating: never traps, whatever the Double).
    public static func duration(_ seconds: Double) -> Duration { .nanoseconds(Timestamp.saturating(seconds * 1e9)) }
}

extension CuffProtocolID: ExpressibleByArgument {
    public init?(argument: String) {
        guard CuffProtocolRegistry.builtIn[CuffProtocolID(rawValue: argument)] != nil else { return nil }
        self.init(rawValue: argument)
    }

    public static var allValueStrings: [String] { CuffProtocolRegistry.builtIn.ids.map(\.rawValue) }
    public var defaultValueDescription: String { rawValue }
}

/// `--protocol`: the cuff protocol to speak (or follow, or simulate) instead of the one chosen
/// from what the device offers.
public struct ProtocolOption: ParsableArguments {
    public init() {}

    @Option(
        name: .customLong("protocol"),
        help: "Cuff protocol to use instead of the one chosen from what the device offers.")
    public var forced: CuffProtocolID?
}

/// `body`'s value; what it throws becomes a usage error (exit status 64) saying the same.
public func usage<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw ValidationError("\(error)") }
}
