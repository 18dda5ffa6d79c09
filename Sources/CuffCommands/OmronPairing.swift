// SPDX-License-Identifier: GPL-2.0-or-later
import BluetoothLive
import CuffCore
import CuffRuntime
import CuffSession
import Omron
import Transport

/// `cuff pair --connect unix:PATH --model NAME`: an Omron cuff on a Unix socket paired by the
/// model's variant (key programmed in pairing mode, token, or bond) and one start/end exchange,
/// through the same session as a sync; prints the `paired` record.
public enum OmronPairing {
    /// `configuration`: the session's, with ``OmronSyncOptions/pair`` set; `connect` is `unix:PATH`.
    public static func run(_ configuration: CuffSessionConfiguration, connect: String) throws {
        let bearer = try Opening.socket("cuff pair", connect)
        let (outcome, message) = LiveBluetooth.omronPair(
            over: bearer, configuration: configuration, log: Console.logger("cuff pair"))
        guard outcome == .completed else {
            // (The session's log said its reason already: probe Z saw each message twice.)
            if message == nil { Console.log("cuff pair: \(outcome.rawValue)") }
            throw outcome.exitStatus
        }
        let p = OmronCatalog.profile(named: configuration.omronModel ?? "")
        try Console.print(
            [
                JSON.object([
                    ("type", .string("paired")), ("address", .string(connect)), ("protocol", .string("omron")),
                    ("model", p.map { .string($0.id) } ?? .null),
                    ("pairing", p.map { .string($0.pairing.rawValue) } ?? .null),
                ]).serialized()
            ], command: "cuff pair")
    }
}
