// SPDX-License-Identifier: GPL-2.0-or-later

/// Consumes a byte buffer field by field, little-endian unless a method says otherwise.
///
/// Every `read…` returns `nil` and leaves the reader untouched when too few bytes remain, so a
/// decoder can name the field that was cut short and the offset where it began. Offsets are
/// counted from the first byte the reader was created with.
public struct ByteReader: Sendable {
    @usableFromInline let base: ArraySlice<UInt8>
    @usableFromInline var index: Int

    @inlinable
    public init(_ bytes: ArraySlice<UInt8>) {
        self.base = bytes
        self.index = bytes.startIndex
    }

    @inlinable
    public init(_ bytes: [UInt8]) {
        self.init(bytes[...])
    }

    /// Byte offset of the next unread byte, from the start of the buffer.
    @inlinable public var offset: Int { index - base.startIndex }
    /// Number of bytes not yet consumed.
    @inlinable public var remaining: Int { base.endIndex - index }
    /// True when every byte has been consumed.
    @inlinable public var isAtEnd: Bool { index >= base.endIndex }
    /// The whole buffer the reader was created with.
    @inlinable public var all: ArraySlice<UInt8> { base }

    @inlinable
    public mutating func readUInt8() -> UInt8? {
        guard index < base.endIndex else { return nil }
        defer { index += 1 }
        return base[index]
    }

    @inlinable
    public mutating func readUInt16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        let v = UInt16(base[index]) | UInt16(base[index + 1]) << 8
        index += 2
        return v
    }

    @inlinable
    public mutating func readUInt24() -> UInt32? {
        guard remaining >= 3 else { return nil }
        let v = UInt32(base[index]) | UInt32(base[index + 1]) << 8 | UInt32(base[index + 2]) << 16
        index += 3
        return v
    }

    @inlinable
    public mutating func readUInt32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(base[index + i]) << (8 * UInt32(i)) }
        index += 4
        return v
    }

    @inlinable
    public mutating func readUInt64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(base[index + i]) << (8 * UInt64(i)) }
        index += 8
        return v
    }

    @inlinable
    public mutating func readUInt16BigEndian() -> UInt16? {
        guard remaining >= 2 else { return nil }
        let v = UInt16(base[index]) << 8 | UInt16(base[index + 1])
        index += 2
        return v
    }

    @inlinable
    public mutating func readUInt32BigEndian() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var v: UInt32 = 0
        for i in 0..<4 { v = v << 8 | UInt32(base[index + i]) }
        index += 4
        return v
    }

    @inlinable
    public mutating func readUInt64BigEndian() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var v: UInt64 = 0
        for i in 0..<8 { v = v << 8 | UInt64(base[index + i]) }
        index += 8
        return v
    }

    /// Reads exactly `count` bytes as a slice of the underlying buffer (no copy).
    @inlinable
    public mutating func readBytes(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { index += count }
        return base[index..<(index + count)]
    }

    /// Consumes and returns every byte left.
    @inlinable
    public mutating func readRemaining() -> ArraySlice<UInt8> {
        defer { index = base.endIndex }
        return base[index..<base.endIndex]
    }

    /// Skips `count` bytes; returns false (and skips nothing) when fewer remain.
    @inlinable
    @discardableResult
    public mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, remaining >= count else { return false }
        index += count
        return true
    }
}
