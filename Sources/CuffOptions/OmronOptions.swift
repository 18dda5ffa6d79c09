// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffCommands
import CuffCore
import CuffSession
import CuffSimulator
import Omron

extension ScenarioName: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
    public static var allValueStrings: [String] { allNames }
    public var defaultValueDescription: String { rawValue }
}

/// `--model` for the Omron commands: a profile by id, alias or sales name.
public enum OmronModelOption {
    public static let help =
        "Be (or talk to) this Omron model: a profile id, equivalent model id or sales name (e.g. HEM-7361T, HEM-7155T_ESL1, Evolv); see the README's list."
    public static func profile(_ name: String) throws -> OmronProfile {
        try usage { try OmronOptionCheck.profile(name) }
    }
    public static func check(_ s: ScenarioName, model: String?) throws {
        try usage { try OmronOptionCheck.scenario(s, model: model) }
    }
}

/// The Omron options of `measure` and `watch`: which model, which records, which key.
public struct OmronSyncArguments: ParsableArguments {
    public init() {}

    @Option(help: ArgumentHelp(OmronModelOption.help, valueName: "name"))
    public var model: String?

    @Flag(
        name: .customLong("keep-unread"),
        help:
            "Omron: read the unread records but leave the cuff's counters as they were (the vendor app still gets them)."
    )
    public var keepUnread = false

    @Flag(name: .customLong("all-records"), help: "Omron: read every user's whole memory, not only the unread records.")
    public var allRecords = false

    @Option(
        name: .customLong("omron-key"),
        help: ArgumentHelp(
            "Omron custom-key cuffs: the 16-byte key as 32 hex digits (default deadbeaf12341234deadbeaf12341234, the key hass-omron and omblepy program).",
            valueName: "hex"))
    public var omronKey: String?

    public func validate() throws {
        if let model { _ = try OmronModelOption.profile(model) }
        if let omronKey { _ = try usage { try OmronOptionCheck.key(omronKey) } }
    }

    public var choice: OmronSyncChoice {
        OmronSyncChoice(
            model: model, keepUnread: keepUnread, allRecords: allRecords,
            key: omronKey.flatMap { try? OmronOptionCheck.key($0) })
    }
    public func configure(_ c: inout CuffSessionConfiguration) { choice.configure(&c) }
    public func simulation(_ scenario: ScenarioName) -> OmronSimulation? { choice.simulation(scenario) }
}
