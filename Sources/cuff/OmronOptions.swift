// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffCore
import CuffSession
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

/// The Omron options of `measure` and `watch`: which model, which records, which key.
struct OmronSyncArguments: ParsableArguments {
    @Option(help: ArgumentHelp(OmronModelOption.help, valueName: "name"))
    var model: String?

    @Flag(name: .customLong("keep-unread"), help: "Omron: read the unread records but leave the cuff's counters as they were (the vendor app still gets them).")
    var keepUnread = false

    @Flag(name: .customLong("all-records"), help: "Omron: read every user's whole memory, not only the unread records.")
    var allRecords = false

    @Option(name: .customLong("omron-key"), help: ArgumentHelp(
        "Omron custom-key cuffs: the 16-byte key as 32 hex digits (default deadbeaf12341234deadbeaf12341234, the key hass-omron and omblepy program).",
        valueName: "hex"))
    var omronKey: String?

    func validate() throws {
        if let model { _ = try OmronModelOption.profile(model) }
        if let omronKey { _ = try Self.key(omronKey) }
    }

    static func key(_ text: String) throws -> [UInt8] {
        guard let k = Hex.decode(text), k.count == 16 else {
            throw ValidationError("--omron-key takes 16 bytes as 32 hex digits, e.g. deadbeaf12341234deadbeaf12341234")
        }
        return k
    }

    /// Puts the Omron choices into a session configuration: `--model` means the Omron protocol
    /// (unless `--protocol` says otherwise).
    func configure(_ c: inout CuffSessionConfiguration) {
        c.omronModel = model
        c.omronSync = options(setTime: c.setTime)
        if model != nil, c.forcedProtocol == nil { c.forcedProtocol = .omron }
    }

    /// The Omron cuff `--simulated` plays with `--model`, or nil.
    func simulation(_ scenario: ScenarioName) -> OmronSimulation? {
        guard let model, let p = OmronCatalog.profile(named: model) else { return nil }
        return OmronSimulation(profile: p, scenario: scenario.omron ?? .normal)
    }

    /// The sync options (`setTime` from the command's own --no-set-time).
    func options(setTime: Bool, pair: Bool = false) -> OmronSyncOptions {
        var o = OmronSyncOptions(allRecords: allRecords, keepUnread: keepUnread, setTime: setTime, pair: pair)
        if let omronKey, let k = try? Self.key(omronKey) { o.key = k }
        return o
    }
}
