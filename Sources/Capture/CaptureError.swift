// SPDX-License-Identifier: GPL-2.0-or-later

/// Why a capture could not be read, written or decoded, and where.
///
/// Equality compares ``code`` only, so a test can write `#expect(throws: CaptureError(.truncatedRecord))`
/// style checks; read ``offset`` and ``message`` for the detail. The message names the file offset
/// and what was expected there.
public struct CaptureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, machine-readable error code (`bad_magic`, `truncated_record`, …).
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The first bytes are no known capture magic, or not the one the forced format expects.
        public static let badMagic = Code(rawValue: "bad_magic")
        /// A btsnoop version other than 1, or a pcap/pcapng major version we do not read.
        public static let unsupportedVersion = Code(rawValue: "unsupported_version")
        /// A btsnoop datalink or pcap/pcapng link type this reader does not decode.
        public static let unknownDatalink = Code(rawValue: "unknown_datalink")
        /// The file ends inside its file header or a record/block header.
        public static let truncatedHeader = Code(rawValue: "truncated_header")
        /// The file ends inside a record's or block's body.
        public static let truncatedRecord = Code(rawValue: "truncated_record")
        /// A record or block claims more bytes than any Bluetooth packet can have.
        public static let oversizeRecord = Code(rawValue: "oversize_record")
        /// A pcapng block length that is too small, not a multiple of 4, or differs from its trailer.
        public static let badBlockLength = Code(rawValue: "bad_block_length")
        /// A pcapng packet names an interface that no Interface Description Block declared.
        public static let unknownInterface = Code(rawValue: "unknown_interface")
        /// A record is framed correctly but its content is too short or inconsistent (pseudo-header,
        /// H4 type byte, HCI header). The reader can go on with the next record.
        public static let malformedPacket = Code(rawValue: "malformed_packet")
        /// A record's timestamp lies outside what cuff can hold (nanoseconds since 1970 in 64 bits:
        /// 1677-09-21 to 2262-04-11), as a zeroed btsnoop timestamp (year 0) does. The record is
        /// skipped and the reader goes on with the next one.
        public static let badTimestamp = Code(rawValue: "bad_timestamp")
        /// An ACL continuation without a start, or a start while a frame was still incomplete.
        public static let aclOutOfOrder = Code(rawValue: "acl_out_of_order")
        /// An ACL packet's data length or an L2CAP frame's length disagrees with the bytes carried.
        public static let l2capLengthMismatch = Code(rawValue: "l2cap_length_mismatch")
        /// The writer was given a record its datalink cannot represent.
        public static let unsupportedRecord = Code(rawValue: "unsupported_record")
        /// A read or write system call failed.
        public static let ioError = Code(rawValue: "io_error")
    }

    public var code: Code
    /// Human-readable detail: what was expected, what was found.
    public var message: String
    /// File offset of the record, block or field at fault, when there is one.
    public var offset: Int64?
    /// True when the reader that threw this can go on with the next record.
    public var isRecoverable: Bool
    /// The C `errno` for ``Code-swift.struct/ioError``.
    public var errno: Int32?

    public init(
        _ code: Code, _ message: String = "", offset: Int64? = nil, isRecoverable: Bool = false, errno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.offset = offset
        self.isRecoverable = isRecoverable
        self.errno = errno
    }

    public static func == (a: CaptureError, b: CaptureError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String { "CaptureError." + summary }

    /// The code, the offset and the message, as stderr names them: `CODE at offset N: MESSAGE`.
    public var summary: String {
        var s = code.rawValue
        if let offset { s += " at offset \(offset)" }
        if !message.isEmpty { s += ": " + message }
        return s
    }
}
