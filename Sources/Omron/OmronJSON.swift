// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

extension OmronError {
    /// `{"code": ..., "field": ..., "message": ..., "offset": N}`, as the BPS decoders' errors.
    public var json: JSON {
        .object([
            ("code", .string(code.rawValue)), ("field", .string(field)), ("message", .string(message)),
            ("offset", .int(Int64(offset))),
        ])
    }
}

extension OmronReading {
    /// The `measurement` object of `cuff decode --model` and of a sync: the keys of a BPS
    /// measurement (`characteristic` "omron", `timestamp` the cuff's local time, no mean arterial
    /// pressure), then an `omron` object with the profile, layout and the cuff's other fields.
    public func json(profile: OmronProfile, user: Int?, slot: Int?, raw: [UInt8]) -> JSON {
        func opt(_ b: Bool?) -> JSON { b.map(JSON.bool) ?? .null }
        var omron: [(String, JSON)] = [
            ("model", .string(profile.id)), ("layout", .string(profile.layout.rawValue)),
            ("slot", slot.map { .int(Int64($0)) } ?? .null),
            ("position", position.map { .int(Int64($0)) } ?? .null),
            ("sequence", sequence.map { .int(Int64($0)) } ?? .null),
        ]
        if let ihbCount { omron.append(("irregular_pulse_count", .int(Int64(ihbCount)))) }
        if let movementCount { omron.append(("body_movement_count", .int(Int64(movementCount)))) }
        return .object([
            ("type", .string("measurement")), ("characteristic", .string("omron")), ("unit", .string("mmHg")),
            ("systolic", .double(Double(systolic))), ("diastolic", .double(Double(diastolic))),
            ("mean_arterial_pressure", .null), ("pulse_rate", .double(Double(pulse))),
            ("timestamp", time.iso8601.map(JSON.string) ?? .null),
            ("user_id", user.map { .int(Int64($0)) } ?? .null),
            (
                "status",
                .object([
                    ("body_movement", .bool(bodyMovement)), ("cuff_too_loose", cuffOK.map { .bool(!$0) } ?? .null),
                    ("irregular_pulse", .bool(irregularPulse)),
                    ("improper_position", position.map { .bool($0 != 0) } ?? .null),
                    ("battery_low", opt(batteryLow)),
                ])
            ),
            ("omron", .object(omron)),
            ("warnings", .array([])), ("raw", .string(Hex.encode(raw))),
        ])
    }
}
