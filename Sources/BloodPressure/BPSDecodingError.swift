// SPDX-License-Identifier: GPL-2.0-or-later

/// Why bytes could not be decoded, where, and in which field.
///
/// Equality compares `code`, `field` and `offset`, so tests can assert the exact failure.
public struct BPSDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, machine-readable reason.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The value ended inside a field.
        public static let truncated = Code(rawValue: "truncated")
        /// The value has a length the characteristic never has.
        public static let invalidLength = Code(rawValue: "invalid_length")
        /// A field holds a value the layout forbids (e.g. a RACP response to op code 0).
        public static let invalidValue = Code(rawValue: "invalid_value")
        /// The input was not hex.
        public static let invalidHex = Code(rawValue: "invalid_hex")
        /// The op code, characteristic or layout is not one we know.
        public static let unsupported = Code(rawValue: "unsupported")
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

    @usableFromInline static func truncated(_ field: StaticString, at offset: Int, need: Int, have: Int)
        -> BPSDecodingError
    {
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
        default: base = "\(code.rawValue) at \(field), byte \(offset)"
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
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let rfuFlags = Code(rawValue: "rfu_flags")
        public static let rfuStatus = Code(rawValue: "rfu_status")
        public static let rfuFeatures = Code(rawValue: "rfu_features")
        public static let trailingBytes = Code(rawValue: "trailing_bytes")
        public static let quirkApplied = Code(rawValue: "quirk_applied")
        public static let invalidDateTime = Code(rawValue: "invalid_date_time")
        public static let reservedPulseRateRange = Code(rawValue: "reserved_pulse_rate_range")
        /// A Blood Pressure Record's recorded value does not decode; the record's header stands.
        public static let invalidRecordedValue = Code(rawValue: "invalid_recorded_value")
        /// A Blood Pressure Record holds a characteristic other than the Enhanced Blood Pressure
        /// Measurement (0x2B34) or its cuff-pressure form (0x2B35): the header stands, the recorded
        /// value is not decoded.
        public static let unknownRecordedCharacteristic = Code(rawValue: "unknown_recorded_characteristic")
        /// The cuff's error reading (a device profile says all-NaN pressures mean "Err"): no values.
        public static let errorReading = Code(rawValue: "error_reading")
        /// A value the device sent as an integer that an SFLOAT cannot hold exactly (above 2045):
        /// it is recorded rounded; the message and `raw` keep the integer.
        public static let valueRounded = Code(rawValue: "value_rounded")
        /// A pressure or pulse rate no cuff measures (below 0, or above 300 mmHg / 40 kPa or 300
        /// bpm): decoded as sent, and flagged, since it is a fault, not a reading to trust.
        public static let implausibleValue = Code(rawValue: "implausible_value")
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

    /// A warning about the values, not the layout (``Code/implausibleValue``).
    public var isAboutValues: Bool { code == .implausibleValue }
}
