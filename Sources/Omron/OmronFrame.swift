// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// One transaction frame, in either direction (facts sheet §4.1):
/// `L | type (2, BE) | address (2, BE) | n | data… | status | XOR`, with L = 8 + data bytes.
public struct OmronFrame: Sendable, Hashable, CustomStringConvertible {
    /// The command types; a reply sets the top bit of the first type byte.
    public enum Kind: UInt16, Sendable, CaseIterable {
        case start = 0x0000
        case read = 0x0100
        case write = 0x01C0
        case end = 0x0F00
    }

    public static let replyBit: UInt16 = 0x8000
    /// The longest frame: four 16-byte channels.
    public static let maxLength = 64
    public static let headerLength = 6

    public var type: UInt16
    public var address: UInt16
    /// Byte 5: the data length, or the size asked for in a read command.
    public var size: UInt8
    public var data: [UInt8]
    /// 0 from the host; the cuff's status in replies.
    public var status: UInt8

    public init(type: UInt16, address: UInt16 = 0, size: UInt8? = nil, data: [UInt8] = [], status: UInt8 = 0) {
        self.type = type
        self.address = address
        self.size = size ?? UInt8(truncatingIfNeeded: data.count)
        self.data = data
        self.status = status
    }

    // MARK: commands (host → cuff)

    public static let start = OmronFrame(type: Kind.start.rawValue, size: 0x10)
    public static let end = OmronFrame(type: Kind.end.rawValue)
    public static func read(_ address: UInt16, count: Int) -> OmronFrame {
        OmronFrame(type: Kind.read.rawValue, address: address, size: UInt8(count))
    }
    public static func write(_ address: UInt16, _ data: [UInt8]) -> OmronFrame {
        OmronFrame(type: Kind.write.rawValue, address: address, data: data)
    }

    public var isReply: Bool { type & OmronFrame.replyBit != 0 }
    public var kind: Kind? { Kind(rawValue: type & ~OmronFrame.replyBit) }
    public var length: Int { 8 + data.count }

    /// The wire bytes, XOR byte last.
    public func encode() -> [UInt8] {
        var b: [UInt8] = []
        b.reserveCapacity(length)
        b.append(UInt8(truncatingIfNeeded: length))
        b.append(UInt8(type >> 8)); b.append(UInt8(type & 0xFF))
        b.append(UInt8(address >> 8)); b.append(UInt8(address & 0xFF))
        b.append(size)
        b.append(contentsOf: data)
        b.append(status)
        b.append(b.reduce(0, ^))
        return b
    }

    /// Decodes the frame at the start of `bytes`; bytes after L (zero padding) are ignored.
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(OmronError) -> OmronFrame {
        let base = bytes.startIndex
        guard let first = bytes.first else { throw .truncated("length", at: 0, need: 1, have: 0) }
        let l = Int(first)
        guard l >= 8, l <= maxLength else {
            throw OmronError(
                .invalidLength, field: "length", offset: 0, detail: "\(l); a frame has 8 to \(maxLength) bytes")
        }
        let have = bytes.count
        func need(_ field: String, _ at: Int, _ n: Int) throws(OmronError) {
            if have < at + n { throw .truncated(field, at: at, need: n, have: max(0, have - at)) }
        }
        try need("type", 1, 2)
        try need("address", 3, 2)
        try need("size", 5, 1)
        try need("data", 6, l - 8)
        try need("status", l - 2, 1)
        try need("check", l - 1, 1)
        let frame = bytes[base..<base + l]
        if frame.reduce(0, ^) != 0 {
            throw OmronError(
                .badChecksum, field: "check", offset: l - 1,
                detail: "XOR of the \(l) bytes is 0x" + Hex.encode([frame.reduce(0, ^)]))
        }
        return OmronFrame(
            type: UInt16(bytes[base + 1]) << 8 | UInt16(bytes[base + 2]),
            address: UInt16(bytes[base + 3]) << 8 | UInt16(bytes[base + 4]),
            size: bytes[base + 5], data: Array(bytes[base + 6..<base + l - 2]), status: bytes[base + l - 2])
    }

    public static func decode(_ bytes: [UInt8]) throws(OmronError) -> OmronFrame { try decode(bytes[...]) }

    public var description: String { Hex.encode(encode()) }
}
