// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffCore
import CuffSimulator
import Omron
import Transport

/// A scenario name: one of the Blood Pressure Service cuff's (`cuff simulate --list`) or, with
/// `--model`, one of the Omron cuff's (full-memory, empty-user, clock-reset, dropped-link, refused-key).
struct ScenarioName: ExpressibleByArgument, Hashable, CustomStringConvertible {
    let rawValue: String
    let bps: Scenario?
    let omron: OmronScenario?

    init?(argument: String) {
        rawValue = argument
        bps = Scenario(rawValue: argument)
        omron = OmronScenario(rawValue: argument)
        if bps == nil && omron == nil { return nil }
    }

    static let normal = ScenarioName(argument: "normal")!
    static var allValueStrings: [String] {
        Scenario.allCases.map(\.rawValue) + OmronScenario.allCases.map(\.rawValue).filter { Scenario(rawValue: $0) == nil }
    }
    var defaultValueDescription: String { rawValue }
    var description: String { rawValue }
}

/// `--model` for the Omron commands: a profile by id, alias or sales name.
enum OmronModelOption {
    static let help = "Be (or talk to) this Omron model: a profile id, equivalent model id or sales name (e.g. HEM-7361T, HEM-7155T_ESL1, Evolv); see the README's list."

    /// The profile, or a usage error naming the closest one.
    static func profile(_ name: String) throws -> OmronProfile {
        guard let p = OmronCatalog.profile(named: name) else {
            throw ValidationError("unknown Omron model '\(name)' (closest profile: \(OmronCatalog.closest(to: name).id)); see the README's list")
        }
        return p
    }

    /// Checks a scenario goes with the kind of cuff chosen.
    static func check(_ s: ScenarioName, model: String?) throws {
        if model != nil, s.omron == nil {
            throw ValidationError("'\(s.rawValue)' is a Blood Pressure Service scenario; an Omron cuff plays normal, \(OmronScenario.allCases.dropFirst().map(\.rawValue).joined(separator: ", "))")
        }
        if model == nil, s.bps == nil { throw ValidationError("'\(s.rawValue)' is an Omron scenario: give --model NAME") }
    }

    /// The host's local time as seconds since 1970 read as UTC (what an Omron clock holds).
    static func localSeconds() -> Int64 {
        WallClock.eventTime().wallMicros / 1_000_000 + WallClock.localUTCOffsetSeconds()
    }
}
