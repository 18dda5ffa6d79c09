// SPDX-License-Identifier: GPL-2.0-or-later

/// Why a value did not decode: the codec's own error, matched by its `code`.
public enum DecodeFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// A Blood Pressure Service value, or a vendor protocol's frame.
    case bloodPressure(BPSDecodingError)
    /// An Omron memory record.
    case omron(OmronError)

    /// The code `cuff decode` prints in the error object (`truncated`, `invalid_length`,
    /// `empty_record`, …).
    public var code: String {
        switch self {
        case let .bloodPressure(e): e.code.rawValue
        case let .omron(e): e.code.rawValue
        }
    }

    /// What was wrong and where, for people.
    public var message: String {
        switch self {
        case let .bloodPressure(e): e.message
        case let .omron(e): e.message
        }
    }

    /// The codec error's own description.
    public var description: String {
        switch self {
        case let .bloodPressure(e): e.description
        case let .omron(e): e.description
        }
    }

    /// `cuff decode`'s `error` object.
    var json: JSON {
        switch self {
        case let .bloodPressure(e): e.json
        case let .omron(e): e.json
        }
    }
}

/// One value decoded: the object `cuff decode` prints for it, and the failure when it did not
/// decode.
public struct DecodedValue: Sendable, Equatable {
    /// The object `cuff decode` prints: the decoded fields, or `{"error": …, "raw": …}`.
    public var json: JSON
    /// Why the value did not decode (`cuff decode` then exits 1), or nil.
    public var failure: DecodeFailure?

    /// Makes a decoded value.
    ///
    /// - Parameters:
    ///   - json: the printed object.
    ///   - failure: the reason it failed, or nil.
    public init(json: JSON, failure: DecodeFailure? = nil) {
        self.json = json
        self.failure = failure
    }

    /// The line `cuff decode` prints for it (compact JSON, without the newline).
    public var line: String { json.serialized() }

    /// The failure's object: `{"error": …, "raw": "hex"}`.
    static func failed(_ failure: DecodeFailure, raw: [UInt8]) -> DecodedValue {
        DecodedValue(json: .object([("error", failure.json), ("raw", .string(Hex.encode(raw)))]), failure: failure)
    }
}

/// A vendor protocol's value decoded: one object per reading, and the Microlife record slots
/// that held no reading.
public struct DecodedFrame: Sendable, Equatable {
    /// One object per reading (a Microlife frame may hold several, or none), or one error object
    /// with ``DecodedValue/failure`` set.
    public var values: [DecodedValue]
    /// The Microlife record slots left out, in payload order: empty (all values zero) or with an
    /// impossible date. Always empty for Yonker.
    public var skipped: [Microlife.SkippedSlot]

    /// Makes a decoded frame.
    ///
    /// - Parameters:
    ///   - values: the objects.
    ///   - skipped: the slots left out.
    public init(values: [DecodedValue], skipped: [Microlife.SkippedSlot] = []) {
        self.values = values
        self.skipped = skipped
    }
}

/// Decodes one value into the object `cuff decode` prints: a Blood Pressure Service
/// characteristic value, an Omron memory record of a model, or a vendor protocol's frame. (`cuff
/// decode` itself decodes through it, so the two cannot differ.)
///
/// ```swift
/// let v = CuffDecoder.decode([0x1E, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00])
/// // v.line == what `cuff decode '1E 78 00 50 00 5D 00'` prints
/// ```
public enum CuffDecoder {
    /// The vendor protocols with public descriptions (`cuff decode --protocol NAME`).
    public enum VendorProtocol: String, Sendable, Hashable, CaseIterable {
        /// Microlife: one whole "get measurements" response frame, header to checksum; one
        /// object per record.
        case microlife
        /// Yonker: the 15-byte result notification.
        case yonker
    }

    /// Decodes a Blood Pressure Service characteristic value (`cuff decode --characteristic …
    /// [--quirk …] HEX`).
    ///
    /// - Parameters:
    ///   - value: the attribute value's bytes.
    ///   - characteristic: the characteristic it is from (default 0x2A35, Blood Pressure Measurement).
    ///   - quirk: a device family whose value layout differs from the standard, or nil.
    /// - Returns: the decoded object, or the error object with ``DecodedValue/failure`` set.
    public static func decode(
        _ value: [UInt8], characteristic: BPSCharacteristic = .bloodPressureMeasurement,
        quirk: QuirkProfile? = nil
    ) -> DecodedValue {
        decode(value, characteristic: characteristic, quirks: quirk?.options ?? [])
    }

    /// Decodes a Blood Pressure Service characteristic value with a set of quirk options (those
    /// of a ``QuirkProfile`` or any other combination).
    ///
    /// - Parameters:
    ///   - value: the attribute value's bytes.
    ///   - characteristic: the characteristic it is from.
    ///   - quirks: the layout differences from the standard to apply.
    /// - Returns: the decoded object, or the error object with ``DecodedValue/failure`` set.
    public static func decode(
        _ value: [UInt8], characteristic: BPSCharacteristic = .bloodPressureMeasurement,
        quirks: QuirkProfile.Options
    ) -> DecodedValue {
        do {
            return DecodedValue(json: try characteristic.decodeJSON(value[...], quirks: quirks))
        } catch {
            return .failed(.bloodPressure(error), raw: value)
        }
    }

    /// Decodes one Omron memory record of a model's layout (`cuff decode --model NAME HEX`).
    ///
    /// - Parameters:
    ///   - record: the record's bytes, as read from the cuff's memory.
    ///   - model: a profile id, equivalent model id or sales name (e.g. `HEM-7361T`).
    /// - Returns: the `measurement` object, or the error object with ``DecodedValue/failure`` set
    ///   (`empty_record` for a never-written slot).
    /// - Throws: `OmronError` with code `unknownModel` when no profile has that name.
    public static func decode(omronRecord record: [UInt8], model: String) throws(OmronError) -> DecodedValue {
        guard let profile = OmronCatalog.profile(named: model) else {
            let closest = OmronCatalog.closest(to: model).id
            throw OmronError(.unknownModel, field: "'\(model)'", offset: 0, detail: "closest profile: \(closest)")
        }
        return decode(omronRecord: record, profile: profile)
    }

    /// Decodes one Omron memory record of a profile's layout.
    ///
    /// - Parameters:
    ///   - record: the record's bytes, as read from the cuff's memory.
    ///   - profile: the model's profile (``OmronCatalog`` has them all).
    /// - Returns: the `measurement` object, or the error object with ``DecodedValue/failure`` set
    ///   (`empty_record` for a never-written slot).
    public static func decode(omronRecord record: [UInt8], profile: OmronProfile) -> DecodedValue {
        do {
            let r = try OmronRecordCodec.decode(record[...], layout: profile.layout, slotSize: profile.slotSize)
            return DecodedValue(json: r.json(profile: profile, user: nil, slot: nil, raw: record))
        } catch {
            return .failed(.omron(error), raw: record)
        }
    }

    /// Decodes a vendor protocol's value (`cuff decode --protocol NAME HEX`).
    ///
    /// - Parameters:
    ///   - frame: a Microlife response frame (header to checksum) or a Yonker notification.
    ///   - vendorProtocol: which protocol.
    /// - Returns: one object per reading (a Microlife frame may hold several, or none: empty
    ///   slots are left out), or one error object with ``DecodedValue/failure`` set.
    public static func decode(frame: [UInt8], protocol vendorProtocol: VendorProtocol) -> [DecodedValue] {
        decodeFrame(frame, protocol: vendorProtocol).values
    }

    /// Decodes a vendor protocol's value, with the Microlife record slots it left out.
    ///
    /// - Parameters:
    ///   - frame: a Microlife response frame (header to checksum) or a Yonker notification.
    ///   - vendorProtocol: which protocol.
    /// - Returns: the objects and the skipped slots.
    public static func decodeFrame(_ frame: [UInt8], protocol vendorProtocol: VendorProtocol) -> DecodedFrame {
        do throws(BPSDecodingError) {
            switch vendorProtocol {
            case .microlife:
                let payload = try Microlife.payload(ofFrame: frame[...])
                let (records, skipped) = Microlife.records(inPayload: payload)
                // A frame with not one whole record slot is no measurement list (probe E3: it
                // printed nothing and exited 0). One whose slots were all skipped (an empty
                // memory) says so per slot on stderr.
                if records.isEmpty, !skipped.contains(where: { $0.reason != .truncated }) {
                    throw BPSDecodingError(
                        .truncated, field: "records", offset: Microlife.recordsOffset,
                        detail:
                            "expected records of \(Microlife.recordValueBytes) bytes or more from payload offset \(Microlife.recordsOffset), the payload has \(payload.count) bytes"
                    )
                }
                return DecodedFrame(values: records.map { DecodedValue(json: $0.json) }, skipped: skipped)
            case .yonker:
                let d = try Yonker.decode(frame[...])
                return DecodedFrame(values: [DecodedValue(json: d.value.json(warnings: d.warnings, raw: frame[...]))])
            }
        } catch {
            return DecodedFrame(values: [.failed(.bloodPressure(error), raw: frame)])
        }
    }
}
