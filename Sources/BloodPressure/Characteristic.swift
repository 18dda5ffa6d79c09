// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// The characteristics `cuff` decodes, by 16-bit UUID.
public enum BPSCharacteristic: UInt16, Sendable, Hashable, CaseIterable {
    case bloodPressureMeasurement = 0x2A35
    case intermediateCuffPressure = 0x2A36
    case bloodPressureFeature = 0x2A49
    case enhancedBloodPressureMeasurement = 0x2B34
    case enhancedIntermediateCuffPressure = 0x2B35
    case bloodPressureRecord = 0x2B36
    case recordAccessControlPoint = 0x2A52
    case dateTime = 0x2A08
    case currentTime = 0x2A2B

    /// `"2A35"`.
    public var uuidString: String { uuidName.description }

    /// ``uuidString`` as a constant (for `JSONWriter.constant`): every measurement line names
    /// its characteristic.
    public var uuidName: StaticString {
        switch self {
        case .bloodPressureMeasurement: "2A35"
        case .intermediateCuffPressure: "2A36"
        case .bloodPressureFeature: "2A49"
        case .enhancedBloodPressureMeasurement: "2B34"
        case .enhancedIntermediateCuffPressure: "2B35"
        case .bloodPressureRecord: "2B36"
        case .recordAccessControlPoint: "2A52"
        case .dateTime: "2A08"
        case .currentTime: "2A2B"
        }
    }

    /// Parses `2a35`, `2A35` or `0x2a35`.
    public init?(argument: String) {
        var s = argument.lowercased()
        if s.hasPrefix("0x") { s.removeFirst(2) }
        guard s.count == 4, let v = UInt16(s, radix: 16), let c = BPSCharacteristic(rawValue: v) else { return nil }
        self = c
    }

    public var name: String {
        switch self {
        case .bloodPressureMeasurement: "Blood Pressure Measurement"
        case .intermediateCuffPressure: "Intermediate Cuff Pressure"
        case .bloodPressureFeature: "Blood Pressure Feature"
        case .enhancedBloodPressureMeasurement: "Enhanced Blood Pressure Measurement"
        case .enhancedIntermediateCuffPressure: "Enhanced Intermediate Cuff Pressure"
        case .bloodPressureRecord: "Blood Pressure Record"
        case .recordAccessControlPoint: "Record Access Control Point"
        case .dateTime: "Date Time"
        case .currentTime: "Current Time"
        }
    }

    /// Decodes `bytes` as this characteristic into the JSON object `cuff decode` prints.
    public func decodeJSON(_ bytes: ArraySlice<UInt8>, quirks: QuirkProfile.Options = []) throws(BPSDecodingError)
        -> JSON
    {
        let raw = JSON.string(Hex.encode(bytes))
        switch self {
        case .bloodPressureMeasurement, .intermediateCuffPressure:
            let d = try BloodPressureMeasurement.decode(
                bytes, quirks: quirks, cuffPressure: self == .intermediateCuffPressure)
            return d.value.json(as: self, warnings: d.warnings, raw: raw)
        case .enhancedBloodPressureMeasurement, .enhancedIntermediateCuffPressure:
            let d = try EnhancedBloodPressureMeasurement.decode(
                bytes, cuffPressure: self == .enhancedIntermediateCuffPressure)
            return d.value.json(warnings: d.warnings, raw: raw)
        case .bloodPressureFeature:
            let d = try BloodPressureFeature.decode(bytes)
            return .object([
                ("type", .string("feature")), ("characteristic", .string(uuidString)),
                ("features", d.value.json), ("value", .int(Int64(d.value.rawValue))),
                ("warnings", d.warnings.json), ("raw", raw),
            ])
        case .dateTime:
            let d = try DateTime.decode(bytes)
            return .object([
                ("type", .string("date_time")), ("characteristic", .string(uuidString)),
                ("timestamp", JSON.from(d.value.iso8601, JSON.string)), ("fields", d.value.json),
                ("warnings", d.warnings.json), ("raw", raw),
            ])
        case .currentTime:
            let d = try CurrentTime.decode(bytes)
            return .object([
                ("type", .string("current_time")), ("characteristic", .string(uuidString)),
                ("timestamp", JSON.from(d.value.dateTime.iso8601, JSON.string)), ("fields", d.value.dateTime.json),
                ("day_of_week", d.value.dayOfWeek == 0 ? .null : .int(Int64(d.value.dayOfWeek))),
                ("fractions256", .int(Int64(d.value.fractions256))),
                ("adjust_reason", .int(Int64(d.value.adjustReason))),
                ("warnings", d.warnings.json), ("raw", raw),
            ])
        case .recordAccessControlPoint:
            let d = try RecordAccessControlPoint.decode(bytes)
            var pairs: [(String, JSON)] = [
                ("type", .string("record_access_control_point")), ("characteristic", .string(uuidString)),
            ]
            if case let .object(inner) = d.value.json { pairs += inner }
            pairs += [("warnings", d.warnings.json), ("raw", raw)]
            return .object(pairs)
        case .bloodPressureRecord:
            let f = try RecordSegment.decodeFields(bytes)
            let seg = f.segment
            var pairs: [(String, JSON)] = [
                ("type", .string("record")), ("characteristic", .string(uuidString)),
                ("first_segment", .bool(seg.isFirst)), ("last_segment", .bool(seg.isLast)),
                ("segment_counter", .int(Int64(seg.counter))),
            ]
            var warnings: [DecodeWarning] = []
            if seg.isFirst && seg.isLast {
                let d = try BloodPressureRecord.decode(bytes)
                warnings = d.warnings
                pairs.append(("sequence_number", .int(Int64(d.value.sequenceNumber))))
                pairs.append(("recorded_characteristic", .string(Hex.digits(d.value.recordedUUID, 4))))
                do {
                    if let inner = try d.value.enhancedMeasurement() {
                        pairs.append(
                            (
                                "record",
                                inner.value.json(warnings: inner.warnings, raw: .string(Hex.encode(d.value.recorded)))
                            ))
                    } else {
                        pairs.append(("record", .null))
                        warnings.append(
                            DecodeWarning(
                                .unknownRecordedCharacteristic,
                                "recorded characteristic \(Hex.digits(d.value.recordedUUID, 4)) is not one cuff decodes in a Blood Pressure Record (2B34, 2B35); its value is left undecoded",
                                offset: 3))
                    }
                } catch {
                    // The header (sequence number, UUID) stands; the recorded value is reported, not decoded.
                    let inner = BPSDecodingError(
                        error.code, field: "Recorded Characteristic: " + error.field, offset: error.offset + 5,
                        detail: error.detail)
                    pairs.append(("record", .null))
                    pairs.append(("record_error", inner.json))
                    warnings.append(DecodeWarning(.invalidRecordedValue, inner.message, offset: inner.offset))
                }
            } else if let seq = f.sequenceNumber, let uuid = f.recordedUUID {
                // The first of several segments: the header, and the start of the recorded value.
                pairs.append(("sequence_number", .int(Int64(seq))))
                pairs.append(("recorded_characteristic", .string(Hex.digits(uuid, 4))))
                pairs.append(("segment", .string(Hex.encode(seg.data))))
                pairs.append(("partial_record", .string(Hex.encode(f.recordedData))))
            } else {
                // A middle or last segment: more of the recorded value (and the E2E-CRC, if any).
                pairs.append(("segment", .string(Hex.encode(seg.data))))
                pairs.append(("continuation", .string(Hex.encode(f.recordedData))))
            }
            pairs += [("warnings", warnings.json), ("raw", raw)]
            return .object(pairs)
        }
    }
}

extension Array where Element == DecodeWarning {
    public var json: JSON { JSON.build { write(to: &$0) } }

    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        w.beginArray()
        for warning in self {
            w.beginObject()
            w.key("code"); w.string(warning.code.rawValue)
            w.key("message"); w.string(warning.message)
            w.key("offset"); if let o = warning.offset { w.int(Int64(o)) } else { w.null() }
            w.endObject()
        }
        w.endArray()
    }
}

extension BPSDecodingError {
    /// `{"code": ..., "message": ..., "offset": N}`.
    public var json: JSON {
        .object([
            ("code", .string(code.rawValue)), ("field", .string(field)), ("message", .string(message)),
            ("offset", .int(Int64(offset))),
        ])
    }
}

extension BloodPressureMeasurement {
    /// The keys of `cuff decode` for 0x2A35 / 0x2A36.
    public func json(as characteristic: BPSCharacteristic, warnings: [DecodeWarning], raw: JSON) -> JSON {
        JSON.build { write(as: characteristic, warnings: warnings, to: &$0) { $0.value(raw) } }
    }

    /// ``json(as:warnings:raw:)`` written to `w`; `raw` writes the `raw` key's value, `more` any keys
    /// that follow the codec's own.
    @inlinable
    public func write<W: JSONWriter>(
        as characteristic: BPSCharacteristic, warnings: [DecodeWarning], to w: inout W, raw: (inout W) -> Void,
        more: (inout W) -> Void = { _ in }
    ) {
        let isICP = characteristic == .intermediateCuffPressure
        w.beginObject()
        w.key("type"); w.constant(isICP ? "cuff_pressure" : "measurement")
        w.key("characteristic"); w.constant(characteristic.uuidName)
        w.key("unit"); w.constant(unit.name)
        if isICP {
            w.key("cuff_pressure"); systolic.write(to: &w)
        } else {
            w.key("systolic"); systolic.write(to: &w)
            w.key("diastolic"); diastolic.write(to: &w)
            w.key("mean_arterial_pressure");
            if meanArterialPressureAbsent { w.null() } else { meanArterialPressure.write(to: &w) }
        }
        w.key("pulse_rate"); if let pulseRate { pulseRate.write(to: &w) } else { w.null() }
        w.key("timestamp"); if let timestamp { timestamp.writeISO8601(to: &w) } else { w.null() }
        w.key("user_id"); if let userID, userID != 0xFF { w.int(Int64(userID)) } else { w.null() }
        w.key("status"); if let status { status.write(to: &w) } else { w.null() }
        w.key("warnings"); warnings.write(to: &w)
        w.key("raw"); raw(&w)
        if let timestamp, !timestamp.hasISO8601 {
            w.key("timestamp_fields"); timestamp.write(to: &w)
        }
        if userID == 0xFF { w.key("user_unknown"); w.bool(true) }
        more(&w)
        w.endObject()
    }
}

extension EnhancedBloodPressureMeasurement {
    /// The keys of `cuff decode` for 0x2B34 / 0x2B35, plus `user_facing_time` and `epoch`.
    public func json(warnings: [DecodeWarning], raw: JSON) -> JSON {
        JSON.build { write(warnings: warnings, to: &$0) { $0.value(raw) } }
    }

    /// ``json(warnings:raw:)`` written to `w`; `raw` writes the `raw` key's value, `more` any keys
    /// that follow the codec's own.
    @inlinable
    public func write<W: JSONWriter>(
        warnings: [DecodeWarning], to w: inout W, raw: (inout W) -> Void, more: (inout W) -> Void = { _ in }
    ) {
        w.beginObject()
        w.key("type"); w.constant(isCuffPressure ? "cuff_pressure" : "measurement")
        w.key("characteristic"); w.constant(isCuffPressure ? "2B35" : "2B34")
        w.key("unit"); w.constant(unit.name)
        switch kind {
        case let .measurement(s, d, m):
            w.key("systolic"); s.write(to: &w)
            w.key("diastolic"); d.write(to: &w)
            w.key("mean_arterial_pressure"); m.write(to: &w)
        case let .cuffPressure(p):
            w.key("cuff_pressure"); p.write(to: &w)
        }
        w.key("pulse_rate"); if let pulseRate { pulseRate.write(to: &w) } else { w.null() }
        w.key("timestamp"); w.optional(timestampISO8601)
        w.key("user_id"); if let userID, userID != 0xFF { w.int(Int64(userID)) } else { w.null() }
        w.key("status"); if let status { status.write(to: &w) } else { w.null() }
        w.key("warnings"); warnings.write(to: &w)
        w.key("raw"); raw(&w)
        w.key("user_facing_time"); w.optional(userFacingTimeISO8601)
        w.key("epoch"); w.int(Int64(epoch.rawValue))
        if userID == 0xFF { w.key("user_unknown"); w.bool(true) }
        more(&w)
        w.endObject()
    }
}
