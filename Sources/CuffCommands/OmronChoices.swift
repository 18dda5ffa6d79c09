// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSession
import CuffSimulator
import Omron
import Transport

/// A scenario name: one of the Blood Pressure Service cuff's (`cuff simulate --list`) or, with
/// `--model`, one of the Omron cuff's (full-memory, empty-user, clock-reset, dropped-link, refused-key).
public struct ScenarioName: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public let bps: Scenario?
    public let omron: OmronScenario?

    /// Nil when neither kind of cuff plays `name`.
    public init?(_ name: String) {
        rawValue = name
        bps = Scenario(rawValue: name)
        omron = OmronScenario(rawValue: name)
        if bps == nil && omron == nil { return nil }
    }

    public static let normal = ScenarioName("normal")!
    /// Every name, each once.
    public static var allNames: [String] {
        Scenario.allCases.map(\.rawValue)
            + OmronScenario.allCases.map(\.rawValue).filter { Scenario(rawValue: $0) == nil }
    }
    public var description: String { rawValue }
}

/// The Omron choices of `measure`, `watch` and `pair`: which model, which records, which key.
public struct OmronSyncChoice: Sendable {
    public var model: String?
    public var keepUnread = false
    public var allRecords = false
    /// The custom key (default: the sync's own).
    public var key: [UInt8]?

    public init(model: String?, keepUnread: Bool, allRecords: Bool, key: [UInt8]?) {
        (self.model, self.keepUnread, self.allRecords, self.key) = (model, keepUnread, allRecords, key)
    }

    /// Puts the choices into a session configuration: `--model` means the Omron protocol (unless
    /// `--protocol` says otherwise); the sync sets the clock as the configuration says.
    public func configure(_ c: inout CuffSessionConfiguration) {
        c.omronModel = model
        var o = OmronSyncOptions(allRecords: allRecords, keepUnread: keepUnread, setTime: c.setTime, pair: false)
        if let key { o.key = key }
        c.omronSync = o
        if model != nil, c.forcedProtocol == nil { c.forcedProtocol = .omron }
    }

    /// The Omron cuff `--simulated` plays with `--model`, or nil.
    public func simulation(_ scenario: ScenarioName) -> OmronSimulation? {
        guard let model, let p = OmronCatalog.profile(named: model) else { return nil }
        return OmronSimulation(profile: p, scenario: scenario.omron ?? .normal)
    }

    /// The host's local time as seconds since 1970 read as UTC (what an Omron clock holds).
    public static func localSeconds() -> Int64 {
        WallClock.eventTime().wallMicros / 1_000_000 + WallClock.localUTCOffsetSeconds()
    }
}

/// What a command line says about an Omron cuff, checked: a model by id, alias or sales name, a
/// scenario that goes with the kind of cuff chosen, a custom key. Each failure says what to give
/// instead (the CLI shows it as a usage error).
public enum OmronOptionCheck {
    public struct Refused: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The profile, or a refusal naming the closest one.
    public static func profile(_ name: String) throws(Refused) -> OmronProfile {
        guard let p = OmronCatalog.profile(named: name) else {
            throw Refused(
                description:
                    "unknown Omron model '\(name)' (closest profile: \(OmronCatalog.closest(to: name).id)); see the README's list"
            )
        }
        return p
    }

    /// A scenario goes with the kind of cuff chosen (an Omron model or a standard cuff).
    public static func scenario(_ s: ScenarioName, model: String?) throws(Refused) {
        if model != nil, s.omron == nil {
            let omron = OmronScenario.allCases.dropFirst().map(\.rawValue).joined(separator: ", ")
            throw Refused(
                description:
                    "'\(s.rawValue)' is a Blood Pressure Service scenario; an Omron cuff plays normal, \(omron)")
        }
        if model == nil, s.bps == nil {
            throw Refused(description: "'\(s.rawValue)' is an Omron scenario: give --model NAME")
        }
        // (Probe B3: refused-key on a token or bond-only model was taken and played as normal.)
        if s.omron == .refusedKey, let model, let p = OmronCatalog.profile(named: model), p.pairing != .customKey {
            throw Refused(
                description:
                    "'refused-key' needs a cuff that pairs with a key; \(p.id) pairs by \(p.pairing == .token ? "a token" : "the bond alone"), with no key to refuse"
            )
        }
    }

    /// `--omron-key`: 16 bytes as 32 hex digits.
    public static func key(_ text: String) throws(Refused) -> [UInt8] {
        guard let k = Hex.decode(text), k.count == 16 else {
            throw Refused(
                description: "--omron-key takes 16 bytes as 32 hex digits, e.g. deadbeaf12341234deadbeaf12341234")
        }
        return k
    }
}
