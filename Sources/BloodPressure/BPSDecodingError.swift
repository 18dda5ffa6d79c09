// SPDX-License-Identifier: GPL-2.0-or-later

/// Why bytes could not be decoded, where, and in which field.
///
/// Equality compares `code`, `field` and `offset`, so tests can assert the exact failure.
public struct BPSDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, machine-readable reason.
    public enum Code: String, Sendable, Hashable {
        /// The value ended inside a field.
        case truncated
        /// The value has a length the characteristic never has.
        case invalidLength = "invalid_length"
        /// A field holds a value the layout forbids (e.g. a RACP response to op code 0).
        case invalidValue = "invalid_value"
        /// The input was not hex.
        case invalidHex = "invalid_hex"
        /// The op code, characteristic or layout is not one we know.
        case unsupported
    }

    public var code: Code
    /// The field that failed, e.g. `"Time Stamp"`.
    public var field: String
    /// Byte offset where the field starts.
    public var offset: Int
    /// Extra detail (what was expected).
    public var detail: String

    public init(_ code: Code, field: String, offset: Int, detail: String = "") {
        self.code = code
        self.field = field
        self.offset = offset
        self.detail = detail
    }

    @usableFromInline static func truncated(_ field: StaticString, at offset: Int, need: Int, have: Int) -> BPSDecodingError {
        BPSDecodingError(
            .truncated, field: "\(field)", offset: offset,
            detail: "needs \(need) byte\(need == 1 ? "" : "s"), \(have) left")
    }

    public var message: String {
        let base: String
        switch code {
        case .truncated: base = "value ends inside field \(field) at byte \(offset)"
        case .invalidLength: base = "invalid length for \(field) at byte \(offset)"
        case .invalidValue: base = "invalid \(field) at byte \(offset)"
        case .invalidHex: base = "not hex: \(field)"
        case .unsupported: base = "unsupported \(field) at byte \(offset)"
        }
        return detail.isEmpty ? base : "\(base): \(detail)"
    }

    public var description: String { "BPSDecodingError.\(code.rawValue): \(message)" }

    public static func == (a: BPSDecodingError, b: BPSDecodingError) -> Bool {
        a.code == b.code && a.field == b.field && a.offset == b.offset
    }

    public func hash(into h: inout Hasher) {
        h.combine(code)
        h.combine(field)
        h.combine(offset)
    }
}

/// Something decoded fine but deserves a note: RFU bits set, trailing bytes, a quirk applied.
public struct DecodeWarning: Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        case rfuFlags = "rfu_flags"
        case rfuStatus = "rfu_status"
        case rfuFeatures = "rfu_features"
        case trailingBytes = "trailing_bytes"
        case quirkApplied = "quirk_applied"
        case invalidDateTime = "invalid_date_time"
        case reservedPulseRateRange = "reserved_pulse_rate_range"
        /// A Blood Pressure Record's recorded value does not decode; the record's header stands.
        case invalidRecordedValue = "invalid_recorded_value"
        /// The cuff's error reading (a device profile says all-NaN pressures mean "Err"): no values.
        case errorReading = "error_reading"
    }
    public var code: Code
    public var message: String
    public var offset: Int?

    public init(_ code: Code, _ message: String, offset: Int? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
