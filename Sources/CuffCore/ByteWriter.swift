// SPDX-License-Identifier: GPL-2.0-or-later

/// Appends fields to a byte array, little-endian unless a method says otherwise.
public struct ByteWriter: Sendable {
    public var bytes: [UInt8]

    @inlinable
    public init(capacity: Int = 32) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inlinable public mutating func write(_ v: UInt8) { bytes.append(v) }

    @inlinable
    public mutating func write(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
    }

    @inlinable
    public mutating func writeUInt24(_ v: UInt32) {
        for i in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }

    @inlinable
    public mutating func write(_ v: UInt32) {
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }

    @inlinable
    public mutating func write(_ v: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }

    @inlinable
    public mutating func writeBigEndian(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    @inlinable
    public mutating func writeBigEndian(_ v: UInt32) {
        for i in (0..<4).reversed() { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }

    @inlinable
    public mutating func writeBigEndian(_ v: UInt64) {
        for i in (0..<8).reversed() { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }

    @inlinable
    public mutating func write<S: Sequence>(contentsOf s: S) where S.Element == UInt8 {
        bytes.append(contentsOf: s)
    }
}
