// SPDX-License-Identifier: GPL-2.0-or-later

/// Why bytes are not a valid ATT PDU, with the opcode and the byte offset where the problem lies.
///
/// Equality compares ``code`` only, so tests can match on the kind of failure.
public struct ATTDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Zero bytes: not even an opcode.
        public static let empty = Code(rawValue: "empty")
        /// A fixed field is cut short.
        public static let truncated = Code(rawValue: "truncated")
        /// Bytes follow the last field of a fixed-size PDU.
        public static let trailingBytes = Code(rawValue: "trailing_bytes")
        /// A list's length byte or element size does not divide its data, or the list is empty.
        public static let invalidLength = Code(rawValue: "invalid_length")
        /// A Find Information Response format byte other than 1 or 2.
        public static let invalidFormat = Code(rawValue: "invalid_format")
        /// A UUID field that is neither 2 nor 16 bytes.
        public static let invalidUUIDLength = Code(rawValue: "invalid_uuid_length")
    }

    public var code: Code
    /// The PDU's opcode, nil for an empty PDU.
    public var opcode: ATTOpcode?
    /// Offset in the PDU (opcode at 0) where the offending field starts.
    public var offset: Int
    public var message: String

    public init(_ code: Code, opcode: ATTOpcode?, offset: Int, _ message: String) {
        self.code = code
        self.opcode = opcode
        self.offset = offset
        self.message = message
    }

    public static func == (a: ATTDecodingError, b: ATTDecodingError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// `ATTDecodingError.truncated: Read Request (0x0A) at offset 1: handle needs 2 bytes, 1 left`.
    public var description: String {
        let what = opcode.map { "\($0)" } ?? "PDU"
        return "ATTDecodingError.\(code.rawValue): \(what) at offset \(offset): \(message)"
    }
}
