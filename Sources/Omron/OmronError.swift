// SPDX-License-Identifier: GPL-2.0-or-later

/// Why Omron bytes or a model name were refused: a stable code, the field, and the byte offset.
///
/// Equality compares `code`, `field` and `offset`, so tests can assert the exact failure.
public struct OmronError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The bytes ended inside a field.
        public static let truncated = Code(rawValue: "truncated")
        /// A length byte (or the input's length) the protocol never has.
        public static let invalidLength = Code(rawValue: "invalid_length")
        /// The XOR check of a frame is not zero.
        public static let badChecksum = Code(rawValue: "bad_checksum")
        /// A field holds a value the layout forbids (month 13, minute 61 on a layout that rejects it).
        public static let invalidValue = Code(rawValue: "invalid_value")
        /// A reply of another type than the command asked for.
        public static let unexpectedType = Code(rawValue: "unexpected_type")
        /// A reply for another address than the command asked for.
        public static let addressMismatch = Code(rawValue: "address_mismatch")
        /// The cuff answered with a non-zero status byte.
        public static let deviceStatus = Code(rawValue: "device_status")
        /// A never-written memory slot.
        public static let emptyRecord = Code(rawValue: "empty_record")
        /// A notification on a channel out of order.
        public static let outOfOrder = Code(rawValue: "out_of_order")
        /// A model name no profile knows.
        public static let unknownModel = Code(rawValue: "unknown_model")
    }

    public var code: Code
    public var field: String
    public var offset: Int
    public var detail: String

    public init(_ code: Code, field: String, offset: Int, detail: String = "") {
        self.code = code
        self.field = field
        self.offset = offset
        self.detail = detail
    }

    static func truncated(_ field: String, at offset: Int, need: Int, have: Int) -> OmronError {
        OmronError(
            .truncated, field: field, offset: offset, detail: "needs \(need) byte\(need == 1 ? "" : "s"), \(have) left")
    }

    public var message: String {
        let base: String
        switch code {
        case .truncated: base = "bytes end inside field \(field) at byte \(offset)"
        case .invalidLength: base = "invalid length for \(field) at byte \(offset)"
        case .badChecksum:
            base = field == "check" ? "bad XOR check at byte \(offset)" : "bad XOR check of \(field) at byte \(offset)"
        case .invalidValue: base = "invalid \(field) at byte \(offset)"
        case .unexpectedType: base = "unexpected reply type in \(field) at byte \(offset)"
        case .addressMismatch: base = "reply for another address in \(field) at byte \(offset)"
        case .deviceStatus: base = "cuff reported an error in \(field) at byte \(offset)"
        case .emptyRecord: base = "empty memory slot (\(field))"
        case .outOfOrder: base = "notification out of order on \(field)"
        case .unknownModel: base = "unknown Omron model \(field)"
        default: base = "\(code.rawValue) at \(field), byte \(offset)"
        }
        return detail.isEmpty ? base : "\(base): \(detail)"
    }

    public var description: String { "OmronError.\(code.rawValue): \(message)" }

    public static func == (a: OmronError, b: OmronError) -> Bool {
        a.code == b.code && a.field == b.field && a.offset == b.offset
    }

    public func hash(into h: inout Hasher) {
        h.combine(code)
        h.combine(field)
        h.combine(offset)
    }
}
