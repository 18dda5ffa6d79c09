// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

// Field readers that turn a short buffer into a named `BPSDecodingError`.
extension ByteReader {
    @inlinable
    mutating func u8(_ field: StaticString) throws(BPSDecodingError) -> UInt8 {
        guard let v = readUInt8() else { throw .truncated(field, at: offset, need: 1, have: remaining) }
        return v
    }

    @inlinable
    mutating func u16(_ field: StaticString) throws(BPSDecodingError) -> UInt16 {
        guard let v = readUInt16() else { throw .truncated(field, at: offset, need: 2, have: remaining) }
        return v
    }

    @inlinable
    mutating func u16BigEndian(_ field: StaticString) throws(BPSDecodingError) -> UInt16 {
        guard let v = readUInt16BigEndian() else { throw .truncated(field, at: offset, need: 2, have: remaining) }
        return v
    }

    @inlinable
    mutating func u32(_ field: StaticString) throws(BPSDecodingError) -> UInt32 {
        guard let v = readUInt32() else { throw .truncated(field, at: offset, need: 4, have: remaining) }
        return v
    }

    @inlinable
    mutating func sfloat(_ field: StaticString) throws(BPSDecodingError) -> SFloat {
        SFloat(rawValue: try u16(field))
    }

    /// Records trailing bytes as a warning.
    @inlinable
    func noteTrailing(_ warnings: inout [DecodeWarning]) {
        if !isAtEnd {
            warnings.append(
                DecodeWarning(.trailingBytes, "\(remaining) byte(s) after the last field ignored", offset: offset))
        }
    }
}
